// `hotkernel run`: the command runs with its arguments and environment, the
// preload shim appended to LD_PRELOAD (Note [Running a command under the
// preload]); run's own failures exit 125, 126, 127. The commands run here are
// /bin/sh scripts: the shim stays inert in a process without libtorch.

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>

#include "CacheTestUtil.h"
#include "RunCli.h"
#include "RunCommand.h"

namespace hotkernel::cli {
namespace {

using cache::test::TempDir;
using test::runCli;

const std::string kShim = HOTKERNEL_TEST_BINARY_DIR "/lib/libhotkernel_preload.so";

// Prints its arguments, one a line, then FOO and LD_PRELOAD.
const std::vector<std::string> kEcho = {"/bin/sh", "-c",
                                        "for a in \"$@\"; do echo \"arg=$a\"; done; echo \"FOO=$FOO\"; "
                                        "echo \"LD_PRELOAD=$LD_PRELOAD\"",
                                        "sh"};

std::vector<std::string> runArgs(std::vector<std::string> command, bool separator = true) {
  std::vector<std::string> args = {"run"};
  if (separator) args.push_back("--");
  args.insert(args.end(), command.begin(), command.end());
  return args;
}

std::string canonicalShim() { return std::filesystem::canonical(kShim).string(); }

TEST(RunCommandTest, GivenCommandWhenRunThenArgumentsAndEnvironmentPassedAndShimPreloaded) {
  std::vector<std::string> command = kEcho;
  for (const char* a : {"a b", "--help", "-u", "", "log"}) command.push_back(a);
  auto r = runCli(runArgs(command), {{"FOO", "bar baz"}, {"LD_PRELOAD", std::nullopt}});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_EQ(r.out, "arg=a b\narg=--help\narg=-u\narg=\narg=log\nFOO=bar baz\nLD_PRELOAD=" + canonicalShim() + "\n");
  EXPECT_TRUE(r.err.empty()) << r.err;
}

TEST(RunCommandTest, GivenNoSeparatorWhenRunThenOptionsAfterTheCommandAreItsOwn) {
  auto r = runCli(runArgs({"/bin/sh", "-c", "echo \"$0 $1\"", "--version", "-x"}, /*separator=*/false),
                  {{"LD_PRELOAD", std::nullopt}});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_EQ(r.out, "--version -x\n");
}

TEST(RunCommandTest, GivenExistingPreloadWhenRunThenShimAppendedNotReplaced) {
  auto r = runCli(runArgs(kEcho), {{"LD_PRELOAD", "libm.so.6"}});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_NE(r.out.find("LD_PRELOAD=libm.so.6:" + canonicalShim() + "\n"), std::string::npos) << r.out;
}

TEST(RunCommandTest, GivenShimAlreadyPreloadedWhenRunThenNotAddedTwice) {
  // Another spelling of the same file: found by identity, not by text.
  const std::string spelled = HOTKERNEL_TEST_BINARY_DIR "/bin/../lib/libhotkernel_preload.so";
  auto r = runCli(runArgs(kEcho), {{"LD_PRELOAD", "libm.so.6 " + spelled}});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_NE(r.out.find("LD_PRELOAD=libm.so.6 " + spelled + "\n"), std::string::npos) << r.out;
  auto nested = runCli(runArgs({HOTKERNEL_TEST_BINARY_DIR "/bin/hotkernel", "run", "--", "/bin/sh", "-c",
                                "echo \"$LD_PRELOAD\""}),
                       {{"LD_PRELOAD", std::nullopt}});
  ASSERT_EQ(nested.exitCode, 0) << nested.err;
  EXPECT_EQ(nested.out, canonicalShim() + "\n");
}

TEST(RunCommandTest, GivenCommandExitStatusWhenRunThenRunExitsWithIt) {
  for (int code : {0, 1, 2, 7, 125}) {
    auto r = runCli(runArgs({"/bin/sh", "-c", "exit " + std::to_string(code)}));
    EXPECT_EQ(r.exitCode, code) << r.err;
  }
}

TEST(RunCommandTest, GivenMissingCommandWhenRunThenExit127WithOneLine) {
  auto r = runCli(runArgs({"hotkernel-no-such-command-xyz", "arg"}));
  EXPECT_EQ(r.exitCode, kExitCommandNotFound);
  EXPECT_EQ(r.err, "hotkernel run: hotkernel-no-such-command-xyz: command not found\n");
  TempDir tmp;
  auto path = runCli(runArgs({tmp.sub("absent")}));
  EXPECT_EQ(path.exitCode, kExitCommandNotFound);
  EXPECT_EQ(path.err, "hotkernel run: " + tmp.sub("absent") + ": no such file\n");
}

TEST(RunCommandTest, GivenFileThatIsNotExecutableWhenRunThenExit126) {
  TempDir tmp;
  cache::test::writeFile(tmp.sub("script"), "#!/bin/sh\necho hi\n");
  ASSERT_EQ(::chmod(tmp.sub("script").c_str(), 0600), 0);
  auto r = runCli(runArgs({tmp.sub("script")}));
  EXPECT_EQ(r.exitCode, kExitCannotExecute);
  EXPECT_NE(r.err.find("hotkernel run: cannot execute " + tmp.sub("script")), std::string::npos) << r.err;
}

TEST(RunCommandTest, GivenNoCommandOrUnknownOptionWhenRunThenExit125WithUsage) {
  for (std::vector<std::string> args : std::vector<std::vector<std::string>>{{"run"}, {"run", "--"}}) {
    auto r = runCli(args);
    EXPECT_EQ(r.exitCode, kExitRunFailed);
    EXPECT_NE(r.err.find("hotkernel run: missing command"), std::string::npos) << r.err;
  }
  auto r = runCli({"run", "--frob", "/bin/true"});
  EXPECT_EQ(r.exitCode, kExitRunFailed);
  EXPECT_NE(r.err.find("unknown option '--frob'"), std::string::npos) << r.err;
}

TEST(RunCommandTest, GivenBinaryWithoutLibDirectoryWhenRunThenExit125NamingTheShim) {
  TempDir tmp;
  std::filesystem::create_directories(tmp.sub("prefix/bin"));
  const std::string copy = tmp.sub("prefix/bin/hotkernel");
  std::filesystem::copy_file(test::cliPath(), copy);
  ASSERT_EQ(::chmod(copy.c_str(), 0755), 0);
  auto r = test::runProgram(copy, {"run", "--", "/bin/true"});
  EXPECT_EQ(r.exitCode, kExitRunFailed);
  EXPECT_NE(r.err.find(tmp.sub("prefix/lib/libhotkernel_preload.so") + " is missing"), std::string::npos) << r.err;
}

TEST(RunCommandTest, GivenHelpWhenRunThenExitCodesDocumented) {
  auto r = runCli({"run", "--help"});
  EXPECT_EQ(r.exitCode, 0);
  for (const char* text : {"125", "126", "127", "LD_PRELOAD"}) {
    EXPECT_NE(r.out.find(text), std::string::npos) << text << "\n" << r.out;
  }
  auto top = runCli({"--help"});
  EXPECT_NE(top.out.find("\n  run "), std::string::npos) << top.out;
}

TEST(PreloadWithTest, GivenCurrentValueWhenShimAddedThenAppendedOnce) {
  EXPECT_EQ(preloadWith("", kShim), kShim);
  EXPECT_EQ(preloadWith("a.so", kShim), "a.so:" + kShim);
  EXPECT_EQ(preloadWith("a.so:b.so", kShim), "a.so:b.so:" + kShim);
  EXPECT_EQ(preloadWith("a.so: ", kShim), "a.so:" + kShim);
  EXPECT_EQ(preloadWith("a.so " + kShim, kShim), "a.so " + kShim);
  EXPECT_EQ(preloadWith(kShim + ":a.so", kShim), kShim + ":a.so");
}

TEST(PreloadWithTest, GivenAnotherHotkernelShimWhenShimAddedThenReplacedWithANote) {
  std::string note;
  EXPECT_EQ(preloadWith("a.so:/old/lib/libhotkernel_preload.so:b.so", kShim, &note), "a.so:b.so:" + kShim);
  EXPECT_NE(note.find("/old/lib/libhotkernel_preload.so"), std::string::npos) << note;
  preloadWith("a.so", kShim, &note);
  EXPECT_TRUE(note.empty()) << note;
}

}  // namespace
}  // namespace hotkernel::cli
