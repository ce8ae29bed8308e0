// Tests of ExternalAgent (optimizer/include/hotkernel/optimizer/ExternalAgent.h) with the
// reference agent tools/agent/reference_agent.py (python3): the protocol round trip down to a
// cubin compiled in the sandbox, the use of feedback, and every misbehaving mode rejected
// cleanly, in time, with no process left behind.

#include <errno.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "hotkernel/optimizer/ExternalAgent.h"
#include "hotkernel/optimizer/SandboxCompile.h"
#include "hotkernel/optimizer/Subprocess.h"
#include "hotkernel/runtime/Check.h"
#include "hotkernel/runtime/Logging.h"
#include "hotkernel/runtime/Nvrtc.h"

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
  const Rejection r = proposeExpectingRejection(
      referenceAgent("hang-with-child", 2.0, {{"HOTKERNEL_REFERENCE_AGENT_PIDFILE", pidfile}}));
  EXPECT_EQ(r.failure, AgentFailure::TimedOut);
  EXPECT_LT(r.seconds, 5.0);
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

TEST(ExternalAgentTest, givenEnvironment_whenReadingTheAgent_thenCommandAndTimeoutAreTaken) {
  ::unsetenv("HOTKERNEL_AGENT_CMD");
  ::unsetenv("HOTKERNEL_AGENT_TIMEOUT");
  EXPECT_FALSE(ExternalAgent::fromEnvironment().has_value());
  ::setenv("HOTKERNEL_AGENT_CMD", "   ", 1);
  EXPECT_FALSE(ExternalAgent::fromEnvironment().has_value());

  ::setenv("HOTKERNEL_AGENT_CMD", "python3 '/opt/my agents/agent.py' --mode good", 1);
  ::setenv("HOTKERNEL_AGENT_TIMEOUT", "2.5", 1);
  const std::optional<ExternalAgent> agent = ExternalAgent::fromEnvironment();
  ASSERT_TRUE(agent.has_value());
  EXPECT_EQ(agent->options().command,
            (std::vector<std::string>{"python3", "/opt/my agents/agent.py", "--mode", "good"}));
  EXPECT_DOUBLE_EQ(agent->options().timeoutSeconds, 2.5);
  EXPECT_EQ(agent->options().maxReplyBytes, size_t{2} << 20);

  ::setenv("HOTKERNEL_AGENT_TIMEOUT", "soon", 1);
  EXPECT_THROW(ExternalAgent::fromEnvironment(), Error);
  ::setenv("HOTKERNEL_AGENT_TIMEOUT", "-1", 1);
  EXPECT_THROW(ExternalAgent::fromEnvironment(), Error);
  ::unsetenv("HOTKERNEL_AGENT_TIMEOUT");
  ::setenv("HOTKERNEL_AGENT_CMD", "python3 'unterminated", 1);
  EXPECT_THROW(ExternalAgent::fromEnvironment(), Error);
  ::unsetenv("HOTKERNEL_AGENT_CMD");
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
