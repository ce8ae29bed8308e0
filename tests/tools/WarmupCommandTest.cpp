// `hotkernel warmup` hands over to hotkernel-warmup (torch, GPU); these checks
// need neither: bad input is refused before any GPU work.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <fstream>

#include "RunCli.h"

namespace hotkernel::cli {
namespace {
using test::CliResult;
using test::runCli;

bool warmupBuilt() {
  struct stat st;
  return ::stat(HOTKERNEL_TEST_BINARY_DIR "/bin/hotkernel-warmup", &st) == 0;
}

TEST(WarmupCommandTest, GivenHelpWhenListingCommandsThenWarmupIsListed) {
  CliResult r = runCli({"--help"});
  EXPECT_EQ(r.exitCode, 0);
  EXPECT_NE(r.out.find("warmup"), std::string::npos) << r.out;
}

TEST(WarmupCommandTest, GivenMissingProfileWhenWarmingUpThenUsageErrorExitTwo) {
  if (!warmupBuilt()) GTEST_SKIP() << "built without torch";
  CliResult r = runCli({"warmup", "--profile", "/nonexistent/profile.json"});
  EXPECT_EQ(r.exitCode, 2);
  EXPECT_NE(r.err.find("cannot read"), std::string::npos) << r.err;
}

TEST(WarmupCommandTest, GivenFileThatIsNotAProfileWhenWarmingUpThenRefusedExitTwo) {
  if (!warmupBuilt()) GTEST_SKIP() << "built without torch";
  const std::string path = ::testing::TempDir() + "/not-a-profile.json";
  std::ofstream(path) << "{\"format\": \"something-else\"}";
  CliResult r = runCli({"warmup", "--profile", path});
  EXPECT_EQ(r.exitCode, 2);
  EXPECT_NE(r.err.find("is not a hotkernel profile"), std::string::npos) << r.err;
}

TEST(WarmupCommandTest, GivenBadBudgetWhenWarmingUpThenRefusedExitTwo) {
  if (!warmupBuilt()) GTEST_SKIP() << "built without torch";
  CliResult r = runCli({"warmup", "--profile", "x.json", "--budget", "soon"});
  EXPECT_EQ(r.exitCode, 2);
  EXPECT_NE(r.err.find("bad --budget"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace hotkernel::cli
