// Tests of runSubprocess and splitCommandLine (optimizer/agent/include/hotkernel/optimizer/Subprocess.h).
// They run ordinary programs (sh, cat, head, yes, sleep) as children of the test process.

#include <errno.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "hotkernel/optimizer/Subprocess.h"
#include "hotkernel/runtime/Check.h"

namespace hotkernel {
namespace {

using Clock = std::chrono::steady_clock;

SubprocessOptions command(std::vector<std::string> argv, double timeoutSeconds = 30.0) {
  SubprocessOptions o;
  o.argv = std::move(argv);
  o.timeoutSeconds = timeoutSeconds;
  return o;
}

double secondsSince(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// True when this process has no child at all, running or zombie (nothing left unreaped).
bool hasNoChildren() {
  siginfo_t info{};
  return ::waitid(P_ALL, 0, &info, WEXITED | WNOHANG | WNOWAIT) == -1 && errno == ECHILD;
}

// True once `pid` has ended: gone from /proc, or a zombie waiting for its new parent.
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

pid_t firstLineAsPid(const std::string& out) { return static_cast<pid_t>(std::atol(out.c_str())); }

TEST(SubprocessTest, givenTrue_whenRun_thenItSucceedsWithStatusZero) {
  const SubprocessResult r = runSubprocess(command({"true"}));
  EXPECT_TRUE(r.started);
  EXPECT_TRUE(r.exited);
  EXPECT_EQ(r.exitCode, 0);
  EXPECT_TRUE(r.succeeded());
  EXPECT_GT(r.pid, 0);
  EXPECT_EQ(r.describe(), "exited with status 0");
  EXPECT_TRUE(hasNoChildren());
}

TEST(SubprocessTest, givenNonZeroExit_whenRun_thenTheStatusIsReported) {
  const SubprocessResult r = runSubprocess(command({"sh", "-c", "echo out; echo err >&2; exit 7"}));
  EXPECT_TRUE(r.exited);
  EXPECT_EQ(r.exitCode, 7);
  EXPECT_FALSE(r.succeeded());
  EXPECT_EQ(r.out, "out\n");
  EXPECT_EQ(r.err, "err\n");
  EXPECT_EQ(r.describe(), "exited with status 7");
}

TEST(SubprocessTest, givenChildKillingItself_whenRun_thenTheSignalIsReported) {
  const SubprocessResult r = runSubprocess(command({"sh", "-c", "kill -SEGV $$"}));
  EXPECT_FALSE(r.exited);
  EXPECT_EQ(r.signal, SIGSEGV);
  EXPECT_EQ(r.describe(), "killed by signal 11 (SIGSEGV)");
  EXPECT_TRUE(hasNoChildren());
}

TEST(SubprocessTest, givenHungChildWithAGrandchild_whenTheTimeoutPasses_thenTheWholeGroupIsKilledAndReaped) {
  const auto t0 = Clock::now();
  const SubprocessResult r = runSubprocess(command({"sh", "-c", "sleep 60 & echo $!; sleep 60"}, 0.5));
  const double took = secondsSince(t0);
  EXPECT_TRUE(r.timedOut);
  EXPECT_EQ(r.signal, SIGKILL);
  EXPECT_FALSE(r.succeeded());
  EXPECT_GE(took, 0.45);
  EXPECT_LT(took, 3.0);
  EXPECT_NE(r.describe().find("timed out after"), std::string::npos) << r.describe();
  EXPECT_TRUE(hasNoChildren());  // the child was reaped: no zombie
  EXPECT_EQ(::kill(r.pid, 0), -1);
  const pid_t grandchild = firstLineAsPid(r.out);
  ASSERT_GT(grandchild, 0) << r.out;
  EXPECT_TRUE(processEnded(grandchild)) << "grandchild " << grandchild << " survived";
}

TEST(SubprocessTest, givenChildLeavingABackgroundProcess_whenItExits_thenRunReturnsAndTheStragglerIsKilled) {
  // The background sleep keeps stdout open: waiting for EOF would take 60 s.
  const auto t0 = Clock::now();
  const SubprocessResult r = runSubprocess(command({"sh", "-c", "sleep 60 & echo $!; exit 0"}, 30.0));
  EXPECT_LT(secondsSince(t0), 5.0);
  EXPECT_TRUE(r.succeeded()) << r.describe();
  const pid_t straggler = firstLineAsPid(r.out);
  ASSERT_GT(straggler, 0) << r.out;
  EXPECT_TRUE(processEnded(straggler));
  EXPECT_TRUE(hasNoChildren());
}

TEST(SubprocessTest, givenChildClosingStdoutButRunning_whenTheTimeoutPasses_thenItIsKilled) {
  const auto t0 = Clock::now();
  const SubprocessResult r = runSubprocess(command({"sh", "-c", "exec >&- 2>&-; sleep 60"}, 0.5));
  EXPECT_TRUE(r.timedOut);
  EXPECT_LT(secondsSince(t0), 3.0);
  EXPECT_TRUE(hasNoChildren());
}

TEST(SubprocessTest, givenLargeStdin_whenTheChildEchoesIt_thenItRoundTripsWithoutDeadlock) {
  SubprocessOptions o = command({"cat"});
  o.stdinData.resize(size_t{8} << 20);
  for (size_t i = 0; i < o.stdinData.size(); ++i) o.stdinData[i] = static_cast<char>((i * 131) ^ (i >> 9));
  o.maxStdoutBytes = size_t{16} << 20;
  const SubprocessResult r = runSubprocess(o);
  EXPECT_TRUE(r.succeeded()) << r.describe();
  EXPECT_EQ(r.out.size(), o.stdinData.size());
  EXPECT_TRUE(r.out == o.stdinData);
}

TEST(SubprocessTest, givenStdoutBeyondTheCap_whenRun_thenTheChildIsKilledAndOutputCutAtTheCap) {
  SubprocessOptions o = command({"yes"}, 30.0);  // endless output
  o.maxStdoutBytes = size_t{1} << 20;
  const auto t0 = Clock::now();
  const SubprocessResult r = runSubprocess(o);
  EXPECT_LT(secondsSince(t0), 5.0);
  EXPECT_TRUE(r.stdoutLimitExceeded);
  EXPECT_FALSE(r.timedOut);
  EXPECT_FALSE(r.succeeded());
  EXPECT_EQ(r.out.size(), o.maxStdoutBytes);
  EXPECT_EQ(r.out.substr(0, 4), "y\ny\n");
  EXPECT_NE(r.describe().find("stdout exceeded"), std::string::npos) << r.describe();
  EXPECT_TRUE(hasNoChildren());
}

TEST(SubprocessTest, givenLargeStderr_whenRun_thenStderrIsCutAndStdoutStillArrives) {
  SubprocessOptions o = command({"sh", "-c", "head -c 3000000 /dev/zero >&2; echo done"});
  o.maxStderrBytes = 1000;
  const SubprocessResult r = runSubprocess(o);
  EXPECT_TRUE(r.succeeded()) << r.describe();
  EXPECT_EQ(r.out, "done\n");
  EXPECT_EQ(r.err.size(), 1000u);
  EXPECT_TRUE(r.stderrTruncated);
}

TEST(SubprocessTest, givenChildNotReadingStdin_whenMuchStdinIsGiven_thenNoSigpipeReachesThisProcess) {
  SubprocessOptions o = command({"true"});
  o.stdinData.assign(size_t{16} << 20, 'x');
  const SubprocessResult r = runSubprocess(o);  // SIGPIPE's default action would end the test binary
  EXPECT_TRUE(r.succeeded()) << r.describe();
  sigset_t pending;
  sigemptyset(&pending);
  ::sigpending(&pending);
  EXPECT_EQ(sigismember(&pending, SIGPIPE), 0);
}

TEST(SubprocessTest, givenEnvAdditions_whenRun_thenTheChildSeesThemOverTheParentsEnvironment) {
  ::setenv("HK_SUBPROCESS_TEST_KEPT", "kept", 1);
  ::setenv("HK_SUBPROCESS_TEST_OVERRIDDEN", "parent", 1);
  SubprocessOptions o = command(
      {"sh", "-c", "printf '%s|%s|%s' \"$HK_SUBPROCESS_TEST_KEPT\" \"$HK_SUBPROCESS_TEST_OVERRIDDEN\" \"$HK_NEW\""});
  o.env = {{"HK_SUBPROCESS_TEST_OVERRIDDEN", "first"}, {"HK_NEW", "new"}, {"HK_SUBPROCESS_TEST_OVERRIDDEN", "child"}};
  const SubprocessResult r = runSubprocess(o);
  EXPECT_TRUE(r.succeeded()) << r.describe();
  EXPECT_EQ(r.out, "kept|child|new");
  ::unsetenv("HK_SUBPROCESS_TEST_KEPT");
  ::unsetenv("HK_SUBPROCESS_TEST_OVERRIDDEN");
}

TEST(SubprocessTest, givenAnInheritableDescriptor_whenRun_thenTheChildDoesNotHaveIt) {
  const int fd = ::open("/dev/null", O_RDONLY);  // deliberately without O_CLOEXEC
  ASSERT_GE(fd, 3);
  const std::string path = "/proc/self/fd/" + std::to_string(fd);
  const SubprocessResult r =
      runSubprocess(command({"sh", "-c", "if [ -e " + path + " ]; then echo open; else echo closed; fi"}));
  ::close(fd);
  EXPECT_TRUE(r.succeeded()) << r.describe();
  EXPECT_EQ(r.out, "closed\n");
}

TEST(SubprocessTest, givenParentIgnoringSigpipe_whenRun_thenTheChildHasDefaultSignalActions) {
  struct sigaction ignore {
  }, old{};
  ignore.sa_handler = SIG_IGN;
  ::sigaction(SIGPIPE, &ignore, &old);
  const SubprocessResult r = runSubprocess(command({"sh", "-c", "grep SigIgn /proc/self/status"}));
  ::sigaction(SIGPIPE, &old, nullptr);
  ASSERT_TRUE(r.succeeded()) << r.describe();
  const unsigned long long ignored = std::strtoull(r.out.substr(r.out.find(':') + 1).c_str(), nullptr, 16);
  EXPECT_EQ(ignored & (1ull << (SIGPIPE - 1)), 0u) << r.out;
}

TEST(SubprocessTest, givenWorkingDirectory_whenRun_thenTheChildStartsThere) {
  SubprocessOptions o = command({"pwd"});
  o.workingDirectory = "/";
  const SubprocessResult r = runSubprocess(o);
  EXPECT_TRUE(r.succeeded()) << r.describe();
  EXPECT_EQ(r.out, "/\n");
}

TEST(SubprocessTest, givenMissingProgram_whenRun_thenItIsReportedNotThrown) {
  SubprocessResult r;
  EXPECT_NO_THROW(r = runSubprocess(command({"/no/such/hotkernel-program"})));
  EXPECT_FALSE(r.started);
  EXPECT_FALSE(r.succeeded());
  EXPECT_NE(r.spawnError.find("No such file"), std::string::npos) << r.spawnError;
  EXPECT_NE(r.describe().find("could not be started"), std::string::npos);
  EXPECT_TRUE(hasNoChildren());
}

TEST(SubprocessTest, givenMisuse_whenRun_thenErrorIsThrown) {
  EXPECT_THROW(runSubprocess(command({})), Error);
  EXPECT_THROW(runSubprocess(command({""})), Error);
  EXPECT_THROW(runSubprocess(command({"true"}, 0.0)), Error);
  EXPECT_THROW(runSubprocess(command({"true"}, -1.0)), Error);
  EXPECT_THROW(runSubprocess(command({"true", std::string("a\0b", 3)})), Error);
  SubprocessOptions o = command({"true"});
  o.env = {{"A=B", "c"}};
  EXPECT_THROW(runSubprocess(o), Error);
}

TEST(SubprocessTest, givenManyThreads_whenRunningConcurrently_thenEachGetsItsOwnOutput) {
  constexpr int kThreads = 8;
  constexpr int kRuns = 5;
  std::vector<int> good(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([t, &good] {
      for (int i = 0; i < kRuns; ++i) {
        const std::string tag = std::to_string(t) + ":" + std::to_string(i);
        SubprocessOptions o = command({"sh", "-c", "cat; printf ' %s' \"$1\"", "sh", tag});
        o.stdinData = "in" + tag;
        const SubprocessResult r = runSubprocess(o);
        if (r.succeeded() && r.out == "in" + tag + " " + tag) ++good[t];
      }
    });
  }
  for (std::thread& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(good[t], kRuns) << "thread " << t;
  EXPECT_TRUE(hasNoChildren());
}

TEST(SubprocessTest, givenNoPidfd_whenRunning_thenExitTimeoutAndStragglersAreHandledByPolling) {
  detail::forceSubprocessPollingForTesting(true);
  const SubprocessResult exit7 = runSubprocess(command({"sh", "-c", "exit 7"}));
  EXPECT_EQ(exit7.exitCode, 7);

  SubprocessOptions echo = command({"cat"});
  echo.stdinData.assign(size_t{4} << 20, 'c');
  echo.maxStdoutBytes = echo.stdinData.size();
  const SubprocessResult echoed = runSubprocess(echo);
  EXPECT_TRUE(echoed.succeeded()) << echoed.describe();
  EXPECT_EQ(echoed.out.size(), echo.stdinData.size());

  auto t0 = Clock::now();
  const SubprocessResult hung = runSubprocess(command({"sh", "-c", "sleep 60 & echo $!; sleep 60"}, 0.5));
  EXPECT_TRUE(hung.timedOut);
  EXPECT_LT(secondsSince(t0), 3.0);
  EXPECT_TRUE(processEnded(firstLineAsPid(hung.out)));

  t0 = Clock::now();
  const SubprocessResult left = runSubprocess(command({"sh", "-c", "sleep 60 & echo $!; exit 0"}, 30.0));
  EXPECT_LT(secondsSince(t0), 5.0);
  EXPECT_TRUE(left.succeeded()) << left.describe();
  EXPECT_TRUE(processEnded(firstLineAsPid(left.out)));
  detail::forceSubprocessPollingForTesting(false);
  EXPECT_TRUE(hasNoChildren());
}

TEST(SubprocessTest, givenPlainWords_whenSplit_thenBlanksSeparateThem) {
  EXPECT_EQ(splitCommandLine("python3  agent.py\t--mode good\n"),
            (std::vector<std::string>{"python3", "agent.py", "--mode", "good"}));
  EXPECT_TRUE(splitCommandLine("").empty());
  EXPECT_TRUE(splitCommandLine("   ").empty());
}

TEST(SubprocessTest, givenQuotesAndEscapes_whenSplit_thenTheyFollowShellWordRules) {
  EXPECT_EQ(splitCommandLine("'/opt/my agent/run' --x"), (std::vector<std::string>{"/opt/my agent/run", "--x"}));
  EXPECT_EQ(splitCommandLine("\"a \\\"b\\\" \\\\ \\n\""), (std::vector<std::string>{"a \"b\" \\ \\n"}));
  EXPECT_EQ(splitCommandLine("'it'\\''s'"), (std::vector<std::string>{"it's"}));
  EXPECT_EQ(splitCommandLine("a\\ b c"), (std::vector<std::string>{"a b", "c"}));
  EXPECT_EQ(splitCommandLine("\"a\"'b'c"), (std::vector<std::string>{"abc"}));
  EXPECT_EQ(splitCommandLine("x \"\" y"), (std::vector<std::string>{"x", "", "y"}));
  EXPECT_EQ(splitCommandLine("a\\\nb"), (std::vector<std::string>{"ab"}));
}

TEST(SubprocessTest, givenShellSyntax_whenSplit_thenNothingIsExpanded) {
  EXPECT_EQ(splitCommandLine("echo $HOME ~ *.py a;b |c >d"),
            (std::vector<std::string>{"echo", "$HOME", "~", "*.py", "a;b", "|c", ">d"}));
}

TEST(SubprocessTest, givenUnterminatedQuoteOrTrailingBackslash_whenSplit_thenErrorIsThrown) {
  EXPECT_THROW(splitCommandLine("a 'b"), Error);
  EXPECT_THROW(splitCommandLine("a \"b"), Error);
  EXPECT_THROW(splitCommandLine("a b\\"), Error);
}

}  // namespace
}  // namespace hotkernel
