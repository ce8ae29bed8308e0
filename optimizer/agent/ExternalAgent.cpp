#include "hotkernel/optimizer/ExternalAgent.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <exception>

#include "hotkernel/optimizer/Subprocess.h"
#include "hotkernel/runtime/Check.h"
#include "hotkernel/runtime/Config.h"  // lazyVariable
#include "hotkernel/runtime/Logging.h"

namespace hotkernel {
namespace {

// The last `maxBytes` of stderr, on one line, for a rejection reason.
std::string stderrTail(const std::string& err, size_t maxBytes = 400) {
  std::string tail = err.size() > maxBytes ? "..." + err.substr(err.size() - maxBytes) : err;
  while (!tail.empty() && (tail.back() == '\n' || tail.back() == ' ')) tail.pop_back();
  for (char& c : tail) {
    if (c == '\n' || c == '\r') c = '|';
  }
  return tail.empty() ? "" : "; stderr: " + tail;
}

std::optional<AgentReply> reject(AgentFailure kind, const std::string& reason, std::string* whyRejected,
                                 AgentFailure* failure) {
  HOTKERNEL_LOG_ONCE(Warn, std::string("external-agent:") + agentFailureName(kind))
      << reason << " (further failures of this kind are not logged)";
  if (whyRejected != nullptr) *whyRejected = reason;
  if (failure != nullptr) *failure = kind;
  return std::nullopt;
}

// Note [A malformed agent configuration]: the end of every problem that leaves the agent out.
constexpr const char* kWithoutAgent = "; tuning continues without the agent";

bool isExecutableFile(const std::string& path, std::string* why) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    *why = std::strerror(errno);
    return false;
  }
  if (!S_ISREG(st.st_mode)) {
    *why = S_ISDIR(st.st_mode) ? "a directory" : "not a regular file";
    return false;
  }
  if (::faccessat(AT_FDCWD, path.c_str(), X_OK, AT_EACCESS) != 0) {
    *why = std::string("not executable: ") + std::strerror(errno);
    return false;
  }
  return true;
}

// "" when `program` (argv[0]) can be executed the way runSubprocess starts it (posix_spawnp),
// else why not.
std::string whyNotExecutable(const std::string& program) {
  std::string why;
  if (program.find('/') != std::string::npos) {
    return isExecutableFile(program, &why) ? "" : "program '" + program + "' cannot be run (" + why + ")";
  }
  std::string path;
  if (const char* env = std::getenv("PATH"); env != nullptr) {
    path = env;
  } else {
    path = "/bin:/usr/bin";  // posix_spawnp's default (confstr(_CS_PATH))
  }
  size_t from = 0;
  while (true) {
    const size_t colon = path.find(':', from);
    std::string dir = path.substr(from, colon == std::string::npos ? std::string::npos : colon - from);
    if (dir.empty()) dir = ".";
    if (isExecutableFile(dir + "/" + program, &why)) return "";
    if (colon == std::string::npos) break;
    from = colon + 1;
  }
  return "program '" + program + "' is not an executable file in any directory of PATH";
}

// `text` on one line: newlines and carriage returns as \n and \r.
std::string oneLine(const std::string& text) {
  std::string out;
  for (const char c : text) {
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else {
      out += c;
    }
  }
  return out;
}

// fromEnvironment without its catch-all: the agent, or nullopt with `*problem` set when malformed.
std::optional<ExternalAgent> agentFromEnvironment(std::string* problem) {
  problem->clear();
  const std::string cmd = lazyVariable(LazyVariable::AgentCommand);
  if (cmd.empty()) return std::nullopt;
  const std::string cmdText = "HOTKERNEL_AGENT_CMD='" + oneLine(cmd) + "'";
  ExternalAgentOptions options;
  try {
    options.command = splitCommandLine(cmd);
  } catch (const Error& e) {
    // "unterminated ' in command line: ... (Subprocess.cpp:N)": the first part says it all.
    const std::string what = e.what();
    *problem = cmdText + " cannot be split into words: " + what.substr(0, what.find(" in command line")) +
               kWithoutAgent;
    return std::nullopt;
  }
  if (options.command.empty()) {
    *problem = cmdText + " holds no words" + kWithoutAgent;
    return std::nullopt;
  }
  if (options.command[0].empty()) {
    *problem = cmdText + ": its program is an empty word" + kWithoutAgent;
    return std::nullopt;
  }
  if (const std::string why = whyNotExecutable(options.command[0]); !why.empty()) {
    *problem = cmdText + ": " + why + kWithoutAgent;
    return std::nullopt;
  }
  if (const std::string raw = lazyVariable(LazyVariable::AgentTimeout); !raw.empty()) {
    const std::string text = oneLine(raw);
    const size_t first = raw.find_first_not_of(" \t\n");
    const size_t last = raw.find_last_not_of(" \t\n");
    const std::string number = first == std::string::npos ? "" : raw.substr(first, last - first + 1);
    char* end = nullptr;
    const double seconds = number.empty() ? 0.0 : std::strtod(number.c_str(), &end);
    if (number.empty() || end == number.c_str() || *end != '\0' || !std::isfinite(seconds) || !(seconds > 0)) {
      *problem = "HOTKERNEL_AGENT_TIMEOUT='" + text + "' is not a number of seconds in (0, " +
                 std::to_string(static_cast<int64_t>(ExternalAgent::kMaxAgentTimeoutSeconds)) + "]" + kWithoutAgent;
      return std::nullopt;
    }
    options.timeoutSeconds = std::min(seconds, ExternalAgent::kMaxAgentTimeoutSeconds);
    if (seconds > ExternalAgent::kMaxAgentTimeoutSeconds) {
      *problem = "HOTKERNEL_AGENT_TIMEOUT='" + text + "' is above the maximum of " +
                 std::to_string(static_cast<int64_t>(ExternalAgent::kMaxAgentTimeoutSeconds)) +
                 " s; the agent runs with that maximum";
    }
  }
  return ExternalAgent(std::move(options));
}

}  // namespace

const char* agentFailureName(AgentFailure failure) {
  switch (failure) {
    case AgentFailure::None:
      return "none";
    case AgentFailure::SpawnFailed:
      return "spawn-failed";
    case AgentFailure::TimedOut:
      return "timed-out";
    case AgentFailure::Crashed:
      return "crashed";
    case AgentFailure::NonZeroExit:
      return "non-zero-exit";
    case AgentFailure::OutputTooLarge:
      return "output-too-large";
    case AgentFailure::InvalidReply:
      return "invalid-reply";
  }
  HOTKERNEL_INTERNAL_ASSERT(false, "unknown AgentFailure ", static_cast<int>(failure));
}

AgentStage agentFailureStage(AgentFailure failure) {
  return failure == AgentFailure::InvalidReply ? AgentStage::Reply : AgentStage::Agent;
}

ExternalAgent::ExternalAgent(ExternalAgentOptions options) : options_(std::move(options)) {
  HOTKERNEL_CHECK(!options_.command.empty() && !options_.command[0].empty(), "ExternalAgent needs a command");
  HOTKERNEL_CHECK(options_.timeoutSeconds > 0 && std::isfinite(options_.timeoutSeconds),
                  "ExternalAgent: timeoutSeconds must be > 0, got ", options_.timeoutSeconds);
}

std::optional<ExternalAgent> ExternalAgent::fromEnvironment(std::string* problem) {
  std::string found;
  std::optional<ExternalAgent> agent;
  try {
    agent = agentFromEnvironment(&found);
  } catch (const std::exception& e) {  // bad_alloc, or a check of the constructor: never thrown on
    agent.reset();
    found = std::string("HOTKERNEL_AGENT_CMD could not be read: ") + e.what() + kWithoutAgent;
  } catch (...) {
    agent.reset();
    found = std::string("HOTKERNEL_AGENT_CMD could not be read: unknown error") + kWithoutAgent;
  }
  if (problem != nullptr) {
    *problem = found;
  } else if (!found.empty()) {
    HOTKERNEL_LOG_ONCE(Warn, "external-agent:configuration") << found;
  }
  return agent;
}

std::optional<AgentReply> ExternalAgent::propose(const AgentTask& task, std::string* whyRejected,
                                                 AgentFailure* failure) const {
  SubprocessOptions run;
  run.argv = options_.command;
  run.stdinData = task.serialize();
  run.timeoutSeconds = options_.timeoutSeconds;
  run.maxStdoutBytes = options_.maxReplyBytes;
  run.env = {{"HOTKERNEL", "0"}, {"HOTKERNEL_AGENT_PROTOCOL", "1"}};
  run.env.insert(run.env.end(), options_.env.begin(), options_.env.end());
  const SubprocessResult r = runSubprocess(run);

  const std::string who = "agent (" + options_.command[0] + ")";
  if (!r.started) return reject(AgentFailure::SpawnFailed, who + " " + r.describe(), whyRejected, failure);
  if (r.timedOut)
    return reject(AgentFailure::TimedOut, who + " " + r.describe() + stderrTail(r.err), whyRejected, failure);
  if (r.stdoutLimitExceeded) {
    return reject(AgentFailure::OutputTooLarge,
                  who + " wrote more than " + std::to_string(options_.maxReplyBytes) + " bytes on stdout (killed)",
                  whyRejected, failure);
  }
  if (!r.exited)
    return reject(AgentFailure::Crashed, who + " crashed: " + r.describe() + stderrTail(r.err), whyRejected, failure);
  if (r.exitCode != 0) {
    return reject(AgentFailure::NonZeroExit, who + " " + r.describe() + stderrTail(r.err), whyRejected, failure);
  }
  try {
    AgentReply reply = AgentReply::parse(r.out);
    if (whyRejected != nullptr) whyRejected->clear();
    if (failure != nullptr) *failure = AgentFailure::None;
    return reply;
  } catch (const std::exception& e) {  // Error, or anything a malformed document provokes
    return reject(AgentFailure::InvalidReply, e.what(), whyRejected, failure);
  }
}

}  // namespace hotkernel
