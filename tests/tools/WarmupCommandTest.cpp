// `hotkernel warmup` hands over to hotkernel-warmup (torch, GPU); these checks
// need neither: bad arguments and bad --profile files are refused by the CLI
// front end before it executes the helper (tools/cli/WarmupArgs.h, Note
// [Reading a profile safely]), with the usage exit code and one message, never
// an abort or a hang. Every run has a time limit.
#include <fcntl.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "ExitStatus.h"
#include "RunCli.h"
#include "WarmupArgs.h"

namespace hotkernel::cli {
namespace {
using test::CliResult;
using test::runCli;

constexpr uid_t kNobody = 65534;

size_t countOf(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

bool warmupBuilt() {
  struct stat st;
  return ::stat(HOTKERNEL_TEST_BINARY_DIR "/bin/hotkernel-warmup", &st) == 0;
}

struct TimedRun {
  CliResult result;
  bool timedOut = false;
  bool signaled = false;  // ended by a signal (an abort, a crash) other than our kill
  int childSetup = 0;     // 124: the file was readable after dropping privileges; 125: could not drop them
  double seconds = 0;
};

// Runs `hotkernel warmup ARGS...` with a time limit (the guard against a hang:
// the child is killed at the limit). `asNobody`: the child drops to uid/gid
// 65534 before executing, and first checks that `mustNotRead` cannot be opened.
TimedRun runWarmupWithin(const std::vector<std::string>& args, double limitSeconds, bool asNobody = false,
                         const std::string& mustNotRead = "") {
  cache::test::TempDir io;
  const std::string outPath = io.sub("out"), errPath = io.sub("err");
  const auto start = std::chrono::steady_clock::now();
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int out = ::open(outPath.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    const int err = ::open(errPath.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (out < 0 || err < 0) ::_exit(127);
    ::dup2(out, STDOUT_FILENO);
    ::dup2(err, STDERR_FILENO);
    ::unsetenv("HOTKERNEL_CACHE_DIR");
    if (asNobody) {
      if (::setgroups(0, nullptr) != 0 || ::setgid(kNobody) != 0 || ::setuid(kNobody) != 0) ::_exit(125);
      const int probe = ::open(mustNotRead.c_str(), O_RDONLY | O_NONBLOCK);
      if (probe >= 0) ::_exit(124);
    }
    std::vector<char*> argv;
    argv.push_back(const_cast<char*>(test::cliPath()));
    argv.push_back(const_cast<char*>("warmup"));
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv(test::cliPath(), argv.data());
    ::_exit(127);
  }
  TimedRun r;
  EXPECT_GT(pid, 0);
  int status = 0;
  while (true) {
    const pid_t done = ::waitpid(pid, &status, WNOHANG);
    if (done == pid) break;
    if (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() > limitSeconds) {
      r.timedOut = true;
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (WIFEXITED(status)) {
    r.result.exitCode = WEXITSTATUS(status);
    if (asNobody && (r.result.exitCode == 124 || r.result.exitCode == 125)) r.childSetup = r.result.exitCode;
  }
  r.signaled = WIFSIGNALED(status) && !r.timedOut;
  r.result.out = cache::test::readFile(outPath);
  r.result.err = cache::test::readFile(errPath);
  return r;
}

// The refusal every bad --profile must get: promptly, the usage exit code, one
// "hotkernel warmup:" line that holds `expected`, then the usage text.
void expectUsageError(const TimedRun& r, const std::string& expected) {
  EXPECT_FALSE(r.timedOut) << "hung: killed after " << r.seconds << " s";
  EXPECT_FALSE(r.signaled) << "ended by a signal: " << r.result.err;
  EXPECT_EQ(r.result.exitCode, kExitUsage) << r.result.err;
  EXPECT_NE(r.result.err.find(expected), std::string::npos) << r.result.err;
  EXPECT_EQ(countOf(r.result.err, "hotkernel warmup: "), 1u) << r.result.err;
  EXPECT_NE(r.result.err.find("usage: hotkernel warmup --profile FILE"), std::string::npos) << r.result.err;
}

std::string validProfileText() {
  return R"({"format": "hotkernel-profile", "version": 1, "samplingProb": 0.05, "ops": [],
             "variants": [{"op": "aten::_softmax", "dtype": "bf16", "device": 0, "rows": 4096, "cols": 32000,
                           "sampledCalls": 10, "estimatedCalls": 200}]})";
}

TEST(WarmupCommandTest, GivenHelpWhenListingCommandsThenWarmupIsListed) {
  CliResult r = runCli({"--help"});
  EXPECT_EQ(r.exitCode, 0);
  EXPECT_NE(r.out.find("warmup"), std::string::npos) << r.out;
}

TEST(WarmupCommandTest, GivenMissingProfileWhenWarmingUpThenUsageErrorExitTwo) {
  expectUsageError(runWarmupWithin({"--profile", "/nonexistent/profile.json"}, 20),
                   "cannot read /nonexistent/profile.json (No such file or directory)");
}

TEST(WarmupCommandTest, GivenDirectoryAsProfileWhenWarmingUpThenUsageErrorNamingIt) {
  cache::test::TempDir dir;
  expectUsageError(runWarmupWithin({"--profile", dir.path()}, 20),
                   "cannot read " + dir.path() + ": it is a directory, not a profile file");
}

TEST(WarmupCommandTest, GivenFifoWithNoWriterAsProfileWhenWarmingUpThenUsageErrorPromptly) {
  cache::test::TempDir dir;
  const std::string fifo = dir.sub("profile.fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0) << std::strerror(errno);
  const TimedRun r = runWarmupWithin({"--profile", fifo}, 20);
  expectUsageError(r, "cannot read " + fifo + ": it is a FIFO (named pipe), not a profile file");
  EXPECT_LT(r.seconds, 10.0);
}

TEST(WarmupCommandTest, GivenSocketAsProfileWhenWarmingUpThenUsageError) {
  cache::test::TempDir dir;
  const std::string path = dir.sub("profile.sock");
  const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  ASSERT_LT(path.size(), sizeof(addr.sun_path));
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0) << std::strerror(errno);
  ASSERT_EQ(::listen(fd, 1), 0);
  expectUsageError(runWarmupWithin({"--profile", path}, 20), "cannot read " + path + ": it is a socket");
  ::close(fd);
}

TEST(WarmupCommandTest, GivenDeviceAsProfileWhenWarmingUpThenUsageErrorWithoutReadingIt) {
  // /dev/zero would never end if it were read.
  expectUsageError(runWarmupWithin({"--profile", "/dev/zero"}, 20),
                   "cannot read /dev/zero: it is a character device, not a profile file");
  expectUsageError(runWarmupWithin({"--profile", "/dev/null"}, 20), "cannot read /dev/null: it is a character device");
}

TEST(WarmupCommandTest, GivenUnreadableProfileWhenWarmingUpThenUsageErrorPermissionDenied) {
  cache::test::TempDir dir;
  ASSERT_EQ(::chmod(dir.path().c_str(), 0711), 0);  // others may reach the file, not list the directory
  const std::string path = dir.sub("secret-profile.json");
  std::ofstream(path) << validProfileText();
  ASSERT_EQ(::chmod(path.c_str(), 0600), 0);
  // As root, permission bits do not stop reads: the child drops to nobody first.
  const bool root = ::geteuid() == 0;
  if (!root) ASSERT_EQ(::chmod(path.c_str(), 0000), 0);
  const TimedRun r = runWarmupWithin({"--profile", path}, 20, /*asNobody=*/root, path);
  if (r.childSetup == 125) GTEST_SKIP() << "running as root but cannot drop to uid/gid 65534 (setgid/setuid refused)";
  ASSERT_NE(r.childSetup, 124) << "the file was still readable after dropping to uid 65534";
  if (!root) {
    // Without root, an unreadable file needs no privilege change; a process with CAP_DAC_OVERRIDE can still read it.
    if (::access(path.c_str(), R_OK) == 0) GTEST_SKIP() << "this process can read a mode-000 file (capabilities)";
  }
  expectUsageError(r, "cannot read " + path + " (Permission denied)");
}

TEST(WarmupCommandTest, GivenEmptyProfileWhenWarmingUpThenUsageError) {
  cache::test::TempDir dir;
  const std::string path = dir.sub("empty.json");
  std::ofstream(path).flush();
  expectUsageError(runWarmupWithin({"--profile", path}, 20), path + " is empty, not a hotkernel profile");
}

TEST(WarmupCommandTest, GivenInvalidJsonProfileWhenWarmingUpThenUsageError) {
  cache::test::TempDir dir;
  const std::string path = dir.sub("broken.json");
  std::ofstream(path) << "{\"format\": \"hotkernel-profile\", \"variants\": [";
  expectUsageError(runWarmupWithin({"--profile", path}, 20), path + " is not valid JSON, not a hotkernel profile");
}

TEST(WarmupCommandTest, GivenFileThatIsNotAProfileWhenWarmingUpThenRefusedExitTwo) {
  cache::test::TempDir dir;
  const std::string path = dir.sub("not-a-profile.json");
  std::ofstream(path) << "{\"format\": \"something-else\"}";
  expectUsageError(runWarmupWithin({"--profile", path}, 20), "is not a hotkernel profile");
}

TEST(WarmupCommandTest, GivenAValidProfileAndABrokenOneWhenWarmingUpThenRefusedNamingTheBrokenOne) {
  cache::test::TempDir dir;
  const std::string good = dir.sub("worker-1.json"), broken = dir.sub("worker-2.json");
  std::ofstream(good) << validProfileText();
  std::ofstream(broken) << "{\"format\": \"hotkernel-profile\", \"variants\": [";
  expectUsageError(runWarmupWithin({"--profile", good, "--profile", broken}, 20),
                   broken + " is not valid JSON, not a hotkernel profile");
}

TEST(WarmupCommandTest, GivenBadArgumentsWhenWarmingUpThenRefusedExitTwo) {
  struct Case {
    std::vector<std::string> args;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {{"--profile", "x.json", "--budget", "soon"}, "bad --budget 'soon'"},
      {{"--profile", "x.json", "--budget", "inf"}, "bad --budget 'inf'"},
      {{"--profile", "x.json", "--budget", "nan"}, "bad --budget 'nan'"},
      {{"--profile", "x.json", "--budget", "-5m"}, "bad --budget '-5m'"},
      {{"--profile", "x.json", "--budget", "1e300h"}, "bad --budget '1e300h'"},
      {{"--profile", "x.json", "--device", "first"}, "bad --device 'first'"},
      {{"--profile", "x.json", "--device", "-1"}, "bad --device '-1'"},
      {{"--profile"}, "--profile needs a value"},
      {{"--profile", ""}, "--profile needs a file"},
      {{"--budget", "10m"}, "--profile is required"},
      {{}, "--profile is required"},
      {{"--profile", "x.json", "--fast"}, "unknown argument '--fast'"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.expected);
    expectUsageError(runWarmupWithin(c.args, 20), c.expected);
  }
}

TEST(WarmupCommandTest, GivenValidProfileWithoutTheTorchHelperWhenWarmingUpThenHandedOverAfterTheChecks) {
  if (warmupBuilt()) GTEST_SKIP() << "hotkernel-warmup is built: handing over would start a warm-up on the GPU";
  cache::test::TempDir dir;
  const std::string path = dir.sub("profile.json");
  std::ofstream(path) << validProfileText();
  const TimedRun r = runWarmupWithin({"--profile", path, "--budget", "10m"}, 20);
  EXPECT_FALSE(r.timedOut);
  EXPECT_EQ(r.result.exitCode, kExitUsage);
  // The checks passed: only executing the helper failed.
  EXPECT_NE(r.result.err.find("cannot run"), std::string::npos) << r.result.err;
  EXPECT_EQ(r.result.err.find("hotkernel warmup: "), std::string::npos) << r.result.err;
}

TEST(WarmupArgsTest, GivenDurationsWhenParsedThenSecondsOrRefused) {
  EXPECT_DOUBLE_EQ(parseWarmupDuration("90"), 90);
  EXPECT_DOUBLE_EQ(parseWarmupDuration("90s"), 90);
  EXPECT_DOUBLE_EQ(parseWarmupDuration("10m"), 600);
  EXPECT_DOUBLE_EQ(parseWarmupDuration("1h"), 3600);
  EXPECT_DOUBLE_EQ(parseWarmupDuration("8760h"), kMaxWarmupBudgetSeconds);
  for (const char* bad : {"", "soon", "0", "-1", "inf", "nan", "10d", "8761h", "1e300"}) {
    EXPECT_LT(parseWarmupDuration(bad), 0) << bad;
  }
}

TEST(WarmupArgsTest, GivenDirLikeTheOtherCommandsWhenParsedThenTakenAndTheHelpShowsTheDefaults) {
  WarmupArgs a;
  EXPECT_EQ(parseWarmupArgs({"--profile", "p.json", "--dir", "/cache"}, &a), "");
  EXPECT_EQ(a.cacheDir, "/cache");
  EXPECT_DOUBLE_EQ(a.budgetSeconds, 3600);
  EXPECT_EQ(a.device, 0);
  const std::string usage = warmupUsageText();
  for (const char* shown : {"--dir", "--budget", "1h", "--device", "--profile", "--json", "Exit:"}) {
    EXPECT_NE(usage.find(shown), std::string::npos) << shown << " missing from:\n" << usage;
  }
  EXPECT_EQ(parseWarmupArgs({"--profile", "p.json", "--device", "99999999999"}, &a).rfind("bad --device", 0), 0u);
  EXPECT_EQ(parseWarmupArgs({"--profile", "p.json", "--device"}, &a), "--device needs a value");
}

TEST(WarmupArgsTest, GivenAllOptionsWhenParsedThenTaken) {
  WarmupArgs a;
  EXPECT_EQ(
      parseWarmupArgs(
          {"--profile", "p.json", "--budget", "2m", "--cache-dir", "/c", "--device", "3", "--json", "o.json"}, &a),
      "");
  EXPECT_EQ(a.profilePaths, (std::vector<std::string>{"p.json"}));
  EXPECT_DOUBLE_EQ(a.budgetSeconds, 120);
  EXPECT_EQ(a.cacheDir, "/c");
  EXPECT_EQ(a.device, 3);
  EXPECT_EQ(a.jsonOut, "o.json");
  EXPECT_EQ(parseWarmupArgs({"--help"}, &a), "");
  EXPECT_TRUE(a.help);
  // --profile repeats: every file, in order.
  EXPECT_EQ(parseWarmupArgs({"--profile", "w1.json", "--profile", "w2.json"}, &a), "");
  EXPECT_EQ(a.profilePaths, (std::vector<std::string>{"w1.json", "w2.json"}));
}

}  // namespace
}  // namespace hotkernel::cli
