#include "hotkernel/optimizer/ExternalAgent.h"

#include <cmath>
#include <cstdlib>
#include <exception>

#include "hotkernel/optimizer/Subprocess.h"
#include "hotkernel/runtime/Check.h"
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

std::optional<ExternalAgent> ExternalAgent::fromEnvironment() {
  const char* cmd = std::getenv("HOTKERNEL_AGENT_CMD");
  if (cmd == nullptr) return std::nullopt;
  ExternalAgentOptions options;
  options.command = splitCommandLine(cmd);
  if (options.command.empty()) return std::nullopt;
  if (const char* timeout = std::getenv("HOTKERNEL_AGENT_TIMEOUT"); timeout != nullptr && *timeout != '\0') {
    char* end = nullptr;
    const double seconds = std::strtod(timeout, &end);
    HOTKERNEL_CHECK(end != timeout && *end == '\0' && seconds > 0 && std::isfinite(seconds),
                    "HOTKERNEL_AGENT_TIMEOUT must be a positive number of seconds, got \"", timeout, "\"");
    options.timeoutSeconds = seconds;
  }
  return ExternalAgent(std::move(options));
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
