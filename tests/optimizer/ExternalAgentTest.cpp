// Tests of ExternalAgent (optimizer/agent/include/hotkernel/optimizer/ExternalAgent.h) with the
// reference agent tools/agent/reference_agent.py (python3): the protocol round trip down to a
// cubin compiled in the sandbox, the use of feedback, and every misbehaving mode rejected
// cleanly, in time, with no process left behind.

#include <errno.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>

#include "hotkernel/optimizer/ExternalAgent.h"
#include "hotkernel/optimizer/SandboxCompile.h"
#include "hotkernel/optimizer/Subprocess.h"
#include "hotkernel/runtime/Check.h"
#include "hotkernel/runtime/Logging.h"
#include "hotkernel/runtime/Nvrtc.h"

#include "../TempDir.h"

namespace hotkernel {
namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

const std::string kAgentScript = HOTKERNEL_TEST_SOURCE_DIR "/tools/agent/reference_agent.py";
const std::string kHelper = HOTKERNEL_TEST_BINARY_DIR "/bin/hotkernel-sandbox-compile";

bool pythonAvailable() {
  SubprocessOptions o;
  o.argv = {"python3", "-c", "pass"};
  o.timeoutSeconds = 30;
  return runSubprocess(o).succeeded();
}

#define SKIP_WITHOUT_PYTHON() \
  if (!pythonAvailable()) GTEST_SKIP() << "python3 is not on PATH"

ExternalAgent referenceAgent(const std::string& mode = "good", double timeoutSeconds = 60.0,
                             std::vector<std::pair<std::string, std::string>> env = {}) {
  ExternalAgentOptions o;
  o.command = {"python3", kAgentScript, "--mode", mode};
  o.timeoutSeconds = timeoutSeconds;
  o.env = std::move(env);
  return ExternalAgent(o);
}

AgentTask task() {
  return makeSoftmaxAgentTask(kernels::SoftmaxVariant{kernels::DType::BFloat16, 4096, 32000}, "sm_90a");
}

double secondsSince(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

bool hasNoChildren() {
  siginfo_t info{};
  return ::waitid(P_ALL, 0, &info, WEXITED | WNOHANG | WNOWAIT) == -1 && errno == ECHILD;
}

bool processEnded(pid_t pid, double waitSeconds = 5.0) {
  const auto t0 = Clock::now();
  do {
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string text;
    if (!stat || !std::getline(stat, text)) return true;
    const size_t close = text.rfind(')');
    if (close != std::string::npos && close + 2 < text.size() && text[close + 2] == 'Z') return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  } while (secondsSince(t0) < waitSeconds);
  return false;
}

// The outcome of one propose() on a misbehaving agent.
struct Rejection {
  AgentFailure failure = AgentFailure::None;
  std::string reason;
  double seconds = 0;
};

Rejection proposeExpectingRejection(const ExternalAgent& agent, const AgentTask& t = task()) {
  Rejection r;
  const auto t0 = Clock::now();
  const std::optional<AgentReply> reply = agent.propose(t, &r.reason, &r.failure);
  r.seconds = secondsSince(t0);
  EXPECT_FALSE(reply.has_value());
  return r;
}

int pointOf(const AgentReply& reply) { return json::parse(reply.notes).at("point").get<int>(); }

TEST(ExternalAgentTest, givenReferenceAgent_whenProposing_thenItsReplyIsAFamilyPointThatCompilesInTheSandbox) {
  SKIP_WITHOUT_PYTHON();
  const AgentTask t = task();
  std::string why = "not cleared";
  AgentFailure failure = AgentFailure::TimedOut;
  const std::optional<AgentReply> reply = referenceAgent().propose(t, &why, &failure);
  ASSERT_TRUE(reply.has_value()) << why;
  EXPECT_EQ(why, "");
  EXPECT_EQ(failure, AgentFailure::None);
  EXPECT_EQ(reply->kernelName, t.family.kernelName);
  EXPECT_EQ(reply->source, specializeSource(t.family.source, t.family.points[0].defines));
  EXPECT_EQ(reply->launch, t.family.points[0].launch);
  EXPECT_EQ(pointOf(*reply), 0);

  if (!nvrtcAvailable()) GTEST_SKIP() << "reply checked; no NVRTC to compile it: " << nvrtcUnavailableReason();
  SandboxCompileRequest request;
  request.source = reply->source;
  request.programName = "agent.cu";
  request.arch = t.arch;
  SandboxCompileOptions options;
  options.helperPath = kHelper;
  const SandboxCompileResult compiled = sandboxCompile(request, options);
  ASSERT_TRUE(compiled.compiled()) << compiled.error << "\n" << compiled.log;
  EXPECT_EQ(compiled.cubin.compare(0, 4,
                                   "\x7f"
                                   "ELF"),
            0);
  EXPECT_NE(compiled.cubin.find(reply->kernelName), std::string::npos);
  EXPECT_TRUE(hasNoChildren());
}

TEST(ExternalAgentTest, givenFeedbackOnItsLastAttempt_whenProposingAgain_thenTheAgentTriesAnotherPoint) {
  SKIP_WITHOUT_PYTHON();
  const ExternalAgent agent = referenceAgent();
  AgentTask t = task();
  ASSERT_GE(t.family.points.size(), 3u);
  std::string why;
  const std::optional<AgentReply> first = agent.propose(t, &why);
  ASSERT_TRUE(first.has_value()) << why;

  AgentFeedback feedback;
  feedback.stage = AgentStage::Correctness;
  feedback.error = "max error 0.5 at row 3";
  feedback.reply = *first;
  t.lastAttempt = feedback;
  t.attempt = 2;
  const std::optional<AgentReply> second = agent.propose(t, &why);
  ASSERT_TRUE(second.has_value()) << why;
  EXPECT_NE(second->source, first->source);
  EXPECT_EQ(pointOf(*second), 1);
  EXPECT_EQ(json::parse(second->notes).at("previousFailure"), "correctness");

  feedback.stage = AgentStage::Benchmark;
  feedback.passed = true;
  feedback.error.clear();
  feedback.timing = AgentTiming{300.0, 320.0, 0.94};
  feedback.reply = *second;
  t.lastAttempt = feedback;
  t.attempt = 3;
  const std::optional<AgentReply> third = agent.propose(t, &why);
  ASSERT_TRUE(third.has_value()) << why;
  EXPECT_EQ(pointOf(*third), 2);
}

TEST(ExternalAgentTest, givenBestSoFarIsTheFirstPoint_whenProposing_thenTheAgentSkipsIt) {
  SKIP_WITHOUT_PYTHON();
  AgentTask t = task();
  AgentBest best;
  best.kernel.source = specializeSource(t.family.source, t.family.points[0].defines);
  best.kernel.kernelName = t.family.kernelName;
  best.kernel.launch = t.family.points[0].launch;
  best.timing = AgentTiming{310.0, 200.0, 1.55};
  t.best = best;
  std::string why;
  const std::optional<AgentReply> reply = referenceAgent().propose(t, &why);
  ASSERT_TRUE(reply.has_value()) << why;
  EXPECT_EQ(pointOf(*reply), 1);
}

TEST(ExternalAgentTest, givenAgentWritingNonJson_whenProposing_thenInvalidReplyR1) {
  SKIP_WITHOUT_PYTHON();
  const Rejection r = proposeExpectingRejection(referenceAgent("malformed"));
  EXPECT_EQ(r.failure, AgentFailure::InvalidReply);
  EXPECT_NE(r.reason.find("R1: it is not JSON"), std::string::npos) << r.reason;
  EXPECT_EQ(agentFailureStage(r.failure), AgentStage::Reply);
}

TEST(ExternalAgentTest, givenAgentThatNeverAnswers_whenTheTimeoutPasses_thenItIsKilledAndReaped) {
  SKIP_WITHOUT_PYTHON();
  const Rejection r = proposeExpectingRejection(referenceAgent("timeout", 1.0));
  EXPECT_EQ(r.failure, AgentFailure::TimedOut);
  EXPECT_NE(r.reason.find("timed out after"), std::string::npos) << r.reason;
  EXPECT_GE(r.seconds, 0.9);
  EXPECT_LT(r.seconds, 4.0);
  EXPECT_TRUE(hasNoChildren());
  EXPECT_EQ(agentFailureStage(r.failure), AgentStage::Agent);
}

TEST(ExternalAgentTest, givenHungAgentWithAChild_whenTheTimeoutPasses_thenTheChildIsKilledToo) {
  SKIP_WITHOUT_PYTHON();
  char dir[] = "/tmp/hotkernel-agent-test-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  const std::string pidfile = std::string(dir) + "/pid";
  // The timeout leaves the agent (a Python start, a fork, the pid file) time on a loaded machine.
  const Rejection r = proposeExpectingRejection(
      referenceAgent("hang-with-child", 6.0, {{"HOTKERNEL_REFERENCE_AGENT_PIDFILE", pidfile}}));
  EXPECT_EQ(r.failure, AgentFailure::TimedOut);
  EXPECT_LT(r.seconds, 10.0);
  std::ifstream in(pidfile);
  pid_t child = 0;
  ASSERT_TRUE(in >> child) << "the agent wrote no pid file";
  EXPECT_GT(child, 0);
  EXPECT_TRUE(processEnded(child)) << "the agent's child " << child << " survived";
  EXPECT_TRUE(hasNoChildren());
  ::unlink(pidfile.c_str());
  ::rmdir(dir);
}

TEST(ExternalAgentTest, givenAgentThatCrashes_whenProposing_thenCrashedWithTheSignal) {
  SKIP_WITHOUT_PYTHON();
  const Rejection r = proposeExpectingRejection(referenceAgent("crash"));
  EXPECT_EQ(r.failure, AgentFailure::Crashed);
  EXPECT_NE(r.reason.find("killed by signal 11 (SIGSEGV)"), std::string::npos) << r.reason;
  EXPECT_TRUE(hasNoChildren());
}

TEST(ExternalAgentTest, givenAgentExitingNonZero_whenProposing_thenTheStatusAndItsStderrAreReported) {
  SKIP_WITHOUT_PYTHON();
  const Rejection r = proposeExpectingRejection(referenceAgent("exit"));
  EXPECT_EQ(r.failure, AgentFailure::NonZeroExit);
  EXPECT_NE(r.reason.find("exited with status 3"), std::string::npos) << r.reason;
  EXPECT_NE(r.reason.find("stderr: reference agent: exiting with status 3"), std::string::npos) << r.reason;
}

TEST(ExternalAgentTest, givenAgentWritingTooMuch_whenProposing_thenOutputTooLarge) {
  SKIP_WITHOUT_PYTHON();
  const Rejection r = proposeExpectingRejection(referenceAgent("huge"));
  EXPECT_EQ(r.failure, AgentFailure::OutputTooLarge);
  EXPECT_NE(r.reason.find("wrote more than 2097152 bytes on stdout"), std::string::npos) << r.reason;
  EXPECT_TRUE(hasNoChildren());
}

TEST(ExternalAgentTest, givenRepliesBreakingRules_whenProposing_thenEachIsRejectedWithItsRule) {
  SKIP_WITHOUT_PYTHON();
  const std::pair<const char*, const char*> cases[] = {
      {"include", "R5"}, {"bad-launch", "R7"}, {"missing-field", "R3: \"kernelName\" is missing"}};
  for (const auto& [mode, rule] : cases) {
    const Rejection r = proposeExpectingRejection(referenceAgent(mode));
    EXPECT_EQ(r.failure, AgentFailure::InvalidReply) << mode;
    EXPECT_NE(r.reason.find(rule), std::string::npos) << mode << ": " << r.reason;
  }
}

TEST(ExternalAgentTest, givenReplyThatDoesNotCompile_whenCompiledInTheSandbox_thenCompileErrorWithLog) {
  SKIP_WITHOUT_PYTHON();
  if (!nvrtcAvailable()) GTEST_SKIP() << nvrtcUnavailableReason();
  std::string why;
  const std::optional<AgentReply> reply = referenceAgent("compile-error").propose(task(), &why);
  ASSERT_TRUE(reply.has_value()) << why;  // the reply is well formed; the compiler rejects it
  SandboxCompileRequest request;
  request.source = reply->source;
  SandboxCompileOptions options;
  options.helperPath = kHelper;
  const SandboxCompileResult r = sandboxCompile(request, options);
  EXPECT_EQ(r.failure, SandboxFailure::CompileError);
  EXPECT_NE(r.log.find("error"), std::string::npos) << r.log;
}

TEST(ExternalAgentTest, givenMissingProgram_whenProposing_thenSpawnFailedWithoutThrowing) {
  ExternalAgentOptions o;
  o.command = {"/no/such/agent"};
  const Rejection r = proposeExpectingRejection(ExternalAgent(o));
  EXPECT_EQ(r.failure, AgentFailure::SpawnFailed);
  EXPECT_NE(r.reason.find("could not be started"), std::string::npos) << r.reason;
}

TEST(ExternalAgentTest, givenAnyAgent_whenRun_thenItSeesHotkernelOffAndTheProtocolVersion) {
  ExternalAgentOptions o;
  o.command = {"sh", "-c",
               "cat >/dev/null; printf 'H=%s P=%s' \"$HOTKERNEL\" \"$HOTKERNEL_AGENT_PROTOCOL\" >&2; exit 1"};
  const Rejection r = proposeExpectingRejection(ExternalAgent(o));
  EXPECT_EQ(r.failure, AgentFailure::NonZeroExit);
  EXPECT_NE(r.reason.find("stderr: H=0 P=1"), std::string::npos) << r.reason;
}

TEST(ExternalAgentTest, givenAnyAgent_whenRun_thenItReceivesTheTaskDocumentOnStdin) {
  ExternalAgentOptions o;
  o.command = {"sh", "-c", "cat >&2; exit 1"};
  const Rejection r = proposeExpectingRejection(ExternalAgent(o));
  // The reason keeps stderr's tail: the document's last keys, in nlohmann's (sorted) order.
  EXPECT_NE(r.reason.find("\"variant\":{\"cols\":32000,\"dtype\":\"bfloat16\",\"rows\":4096},\"version\":1}"),
            std::string::npos)
      << r.reason;
}

TEST(ExternalAgentTest, givenRepeatedFailuresOfOneKind_whenProposing_thenOneWarningIsLogged) {
  ExternalAgentOptions o;
  o.command = {"sh", "-c", "cat >/dev/null; echo '{not json'"};
  const ExternalAgent agent(o);
  std::fflush(stderr);
  const int saved = ::dup(STDERR_FILENO);
  std::FILE* capture = std::tmpfile();
  ASSERT_NE(capture, nullptr);
  ::dup2(::fileno(capture), STDERR_FILENO);
  for (int i = 0; i < 3; ++i) proposeExpectingRejection(agent);
  ::dup2(saved, STDERR_FILENO);
  ::close(saved);
  std::rewind(capture);
  std::string logged;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), capture)) > 0) logged.append(buf, n);
  std::fclose(capture);
  size_t lines = 0;
  for (size_t at = logged.find("R1: it is not JSON"); at != std::string::npos;
       at = logged.find("R1: it is not JSON", at + 1)) {
    ++lines;
  }
  // One line at most: none when an earlier test in this process already logged this kind.
  EXPECT_LE(lines, 1u) << logged;
  EXPECT_FALSE(firstTimeFor("external-agent:invalid-reply"));  // the kind is marked as logged
}

// Sets (a value) or unsets (nullptr) an environment variable for one scope, then restores it.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = ::getenv(name)) old_ = std::string(old);
    if (value != nullptr) {
      ::setenv(name, value, 1);
    } else {
      ::unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (old_) {
      ::setenv(name_.c_str(), old_->c_str(), 1);
    } else {
      ::unsetenv(name_.c_str());
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_;
  std::optional<std::string> old_;
};

struct FromEnvironment {
  std::optional<ExternalAgent> agent;
  std::string problem;
};

// fromEnvironment with a problem slot; a throw fails the test.
FromEnvironment readAgent(const char* command, const char* timeout) {
  ScopedEnv cmd("HOTKERNEL_AGENT_CMD", command);
  ScopedEnv time("HOTKERNEL_AGENT_TIMEOUT", timeout);
  FromEnvironment r;
  r.problem = "(not cleared)";
  EXPECT_NO_THROW(r.agent = ExternalAgent::fromEnvironment(&r.problem)) << command;
  return r;
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(ExternalAgentTest, givenEnvironment_whenReadingTheAgent_thenCommandAndTimeoutAreTaken) {
  FromEnvironment unset = readAgent(nullptr, nullptr);
  EXPECT_FALSE(unset.agent.has_value());
  EXPECT_EQ(unset.problem, "");
  FromEnvironment empty = readAgent("", "soon");  // an empty command is unset: its timeout does not matter
  EXPECT_FALSE(empty.agent.has_value());
  EXPECT_EQ(empty.problem, "");

  const FromEnvironment r = readAgent("sh '/opt/my agents/agent.sh' --mode good", "2.5");
  ASSERT_TRUE(r.agent.has_value()) << r.problem;
  EXPECT_EQ(r.problem, "");
  EXPECT_EQ(r.agent->options().command,
            (std::vector<std::string>{"sh", "/opt/my agents/agent.sh", "--mode", "good"}));
  EXPECT_DOUBLE_EQ(r.agent->options().timeoutSeconds, 2.5);
  EXPECT_EQ(r.agent->options().maxReplyBytes, size_t{2} << 20);

  const FromEnvironment padded = readAgent("sh -c true", " 3\n");
  ASSERT_TRUE(padded.agent.has_value()) << padded.problem;
  EXPECT_DOUBLE_EQ(padded.agent->options().timeoutSeconds, 3.0);

  const FromEnvironment defaults = readAgent("sh -c true", nullptr);
  ASSERT_TRUE(defaults.agent.has_value()) << defaults.problem;
  EXPECT_DOUBLE_EQ(defaults.agent->options().timeoutSeconds, 60.0);
}

TEST(ExternalAgentTest, givenMalformedTimeout_whenReadingTheAgent_thenNoAgentAndOneLineProblemWithoutThrowing) {
  for (const char* bad : {"soon", "5s", "-1", "0", "-0", "inf", "-inf", "nan", "1e400", " ", "0x"}) {
    const FromEnvironment r = readAgent("sh -c true", bad);
    EXPECT_FALSE(r.agent.has_value()) << bad;
    EXPECT_TRUE(contains(r.problem, std::string("HOTKERNEL_AGENT_TIMEOUT='") + bad + "'")) << r.problem;
    EXPECT_TRUE(contains(r.problem, "tuning continues without the agent")) << r.problem;
    EXPECT_FALSE(contains(r.problem, "\n")) << r.problem;
  }
}

TEST(ExternalAgentTest, givenHugeTimeout_whenReadingTheAgent_thenClampedToTheMaximumAndSaid) {
  const FromEnvironment r = readAgent("sh -c true", "1e12");
  ASSERT_TRUE(r.agent.has_value()) << r.problem;
  EXPECT_DOUBLE_EQ(r.agent->options().timeoutSeconds, ExternalAgent::kMaxAgentTimeoutSeconds);
  EXPECT_TRUE(contains(r.problem, "HOTKERNEL_AGENT_TIMEOUT='1e12' is above the maximum of 86400 s")) << r.problem;

  const FromEnvironment atMax = readAgent("sh -c true", "86400");
  ASSERT_TRUE(atMax.agent.has_value()) << atMax.problem;
  EXPECT_EQ(atMax.problem, "");
}

TEST(ExternalAgentTest, givenCommandThatCannotBeSplit_whenReadingTheAgent_thenNoAgentAndProblem) {
  for (const char* bad : {"sh 'unterminated", "sh \"unterminated", "sh -c true \\"}) {
    const FromEnvironment r = readAgent(bad, nullptr);
    EXPECT_FALSE(r.agent.has_value()) << bad;
    EXPECT_TRUE(contains(r.problem, std::string("HOTKERNEL_AGENT_CMD='") + bad + "' cannot be split")) << r.problem;
    EXPECT_TRUE(contains(r.problem, "tuning continues without the agent")) << r.problem;
    EXPECT_FALSE(contains(r.problem, ".cpp:")) << r.problem;  // what is wrong, not where it was found
  }
}

TEST(ExternalAgentTest, givenCommandWithNoProgram_whenReadingTheAgent_thenNoAgentAndProblem) {
  const FromEnvironment blank = readAgent(" \t ", nullptr);
  EXPECT_FALSE(blank.agent.has_value());
  EXPECT_TRUE(contains(blank.problem, "holds no words")) << blank.problem;
  const FromEnvironment newlines = readAgent("\n\n", nullptr);
  EXPECT_FALSE(newlines.agent.has_value());
  EXPECT_TRUE(contains(newlines.problem, "HOTKERNEL_AGENT_CMD='\\n\\n' holds no words")) << newlines.problem;
  EXPECT_FALSE(contains(newlines.problem, "\n")) << newlines.problem;
  const FromEnvironment emptyWord = readAgent("'' --mode good", nullptr);
  EXPECT_FALSE(emptyWord.agent.has_value());
  EXPECT_TRUE(contains(emptyWord.problem, "its program is an empty word")) << emptyWord.problem;
}

TEST(ExternalAgentTest, givenProgramThatCannotBeRun_whenReadingTheAgent_thenNoAgentAndProblemNamesIt) {
  char dirTemplate[] = "/tmp/hotkernel-agent-env-XXXXXX";
  ASSERT_NE(::mkdtemp(dirTemplate), nullptr);
  const std::string dir = dirTemplate;
  const std::string notExecutable = dir + "/agent.sh";
  std::ofstream(notExecutable) << "#!/bin/sh\nexit 0\n";
  ASSERT_EQ(::chmod(notExecutable.c_str(), 0644), 0);

  struct Case {
    std::string command;
    std::string expected;
  };
  for (const Case& c : {Case{"/nonexistent/agent --x", "program '/nonexistent/agent' cannot be run (No such file"},
                        Case{dir + " --x", "program '" + dir + "' cannot be run (a directory)"},
                        Case{notExecutable, "program '" + notExecutable + "' cannot be run (not executable"},
                        Case{"hotkernel-no-such-agent-program --x",
                             "program 'hotkernel-no-such-agent-program' is not an executable file in any directory "
                             "of PATH"}}) {
    const FromEnvironment r = readAgent(c.command.c_str(), nullptr);
    EXPECT_FALSE(r.agent.has_value()) << c.command;
    EXPECT_TRUE(contains(r.problem, "HOTKERNEL_AGENT_CMD='" + c.command + "': " + c.expected)) << r.problem;
    EXPECT_TRUE(contains(r.problem, "tuning continues without the agent")) << r.problem;
  }
  ::unlink(notExecutable.c_str());
  ::rmdir(dir.c_str());
}

TEST(ExternalAgentTest, givenProgramNameWithoutSlash_whenReadingTheAgent_thenLookedUpInPathLikePosixSpawnp) {
  char dirTemplate[] = "/tmp/hotkernel-agent-path-XXXXXX";
  ASSERT_NE(::mkdtemp(dirTemplate), nullptr);
  const std::string dir = dirTemplate;
  const std::string plain = dir + "/plain", bin = dir + "/bin";
  ASSERT_EQ(::mkdir(plain.c_str(), 0755), 0);
  ASSERT_EQ(::mkdir(bin.c_str(), 0755), 0);
  // The same name: not executable in the first directory, executable in the second.
  std::ofstream(plain + "/hk-agent") << "#!/bin/sh\nexit 0\n";
  std::ofstream(bin + "/hk-agent") << "#!/bin/sh\nexit 0\n";
  ASSERT_EQ(::chmod((plain + "/hk-agent").c_str(), 0644), 0);
  ASSERT_EQ(::chmod((bin + "/hk-agent").c_str(), 0755), 0);
  {
    ScopedEnv path("PATH", (plain + ":" + bin).c_str());
    const FromEnvironment found = readAgent("hk-agent --mode good", nullptr);
    EXPECT_TRUE(found.agent.has_value()) << found.problem;
    EXPECT_EQ(found.problem, "");
  }
  {
    ScopedEnv path("PATH", plain.c_str());
    const FromEnvironment notFound = readAgent("hk-agent", nullptr);
    EXPECT_FALSE(notFound.agent.has_value());
    EXPECT_TRUE(contains(notFound.problem, "program 'hk-agent' is not an executable file in any directory of PATH"))
        << notFound.problem;
  }
  {
    ScopedEnv path("PATH", nullptr);  // unset: /bin:/usr/bin
    const FromEnvironment shell = readAgent("sh -c true", nullptr);
    EXPECT_TRUE(shell.agent.has_value()) << shell.problem;
  }
  test::removeTree(dir);  // Note [No std::filesystem::remove_all next to libtorch]
}

TEST(ExternalAgentTest, givenMalformedAgentAndNoProblemSlot_whenReadTwice_thenOneWarningAndNoThrow) {
  ScopedEnv cmd("HOTKERNEL_AGENT_CMD", "sh 'unterminated");
  ScopedEnv timeout("HOTKERNEL_AGENT_TIMEOUT", nullptr);
  setLogLevel(LogLevel::Warn);
  std::fflush(stderr);
  const int saved = ::dup(STDERR_FILENO);
  std::FILE* capture = std::tmpfile();
  ASSERT_NE(capture, nullptr);
  ::dup2(::fileno(capture), STDERR_FILENO);
  bool threw = false;
  try {
    for (int i = 0; i < 2; ++i) {
      if (ExternalAgent::fromEnvironment().has_value()) threw = true;  // not an agent either
    }
  } catch (...) {
    threw = true;
  }
  ::dup2(saved, STDERR_FILENO);
  ::close(saved);
  std::rewind(capture);
  std::string logged;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), capture)) > 0) logged.append(buf, n);
  std::fclose(capture);
  EXPECT_FALSE(threw);
  size_t lines = 0;
  for (size_t at = logged.find("HOTKERNEL_AGENT_CMD="); at != std::string::npos;
       at = logged.find("HOTKERNEL_AGENT_CMD=", at + 1)) {
    ++lines;
  }
  EXPECT_EQ(lines, 1u) << logged;
}

TEST(ExternalAgentTest, givenMisuse_whenConstructing_thenErrorIsThrown) {
  EXPECT_THROW(ExternalAgent(ExternalAgentOptions{}), Error);
  ExternalAgentOptions o;
  o.command = {"true"};
  o.timeoutSeconds = 0;
  EXPECT_THROW(ExternalAgent{o}, Error);
}

}  // namespace
}  // namespace hotkernel
