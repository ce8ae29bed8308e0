#pragma once
// Runs the built `hotkernel` binary (or another program) as a subprocess and
// captures its exit code, stdout and stderr (through files, so large outputs cannot deadlock).

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "CacheTestUtil.h"

namespace hotkernel::cli::test {

inline const char* cliPath() { return HOTKERNEL_TEST_BINARY_DIR "/bin/hotkernel"; }

struct CliResult {
  int exitCode = -1;  // -1 when killed by a signal
  std::string out;
  std::string err;
};

// Runs `program` with `args`. `env`: variables to set (a value) or unset
// (nullopt) in the child only. HOTKERNEL_CACHE_DIR and HOTKERNEL_CACHE_KEY_FILE
// are unset unless given, so the user's cache and key are never touched.
inline CliResult runProgram(const std::string& program, const std::vector<std::string>& args,
                            std::map<std::string, std::optional<std::string>> env = {}) {
  cache::test::TempDir io;
  const std::string outPath = io.sub("out");
  const std::string errPath = io.sub("err");
  env.emplace("HOTKERNEL_CACHE_DIR", std::nullopt);
  env.emplace("HOTKERNEL_CACHE_KEY_FILE", std::nullopt);
  pid_t pid = ::fork();
  if (pid == 0) {
    int out = ::open(outPath.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    int err = ::open(errPath.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (out < 0 || err < 0) ::_exit(127);
    ::dup2(out, STDOUT_FILENO);
    ::dup2(err, STDERR_FILENO);
    for (const auto& [name, value] : env) {
      if (value) {
        ::setenv(name.c_str(), value->c_str(), 1);
      } else {
        ::unsetenv(name.c_str());
      }
    }
    std::vector<char*> argv;
    argv.push_back(const_cast<char*>(program.c_str()));
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv(program.c_str(), argv.data());
    ::_exit(127);
  }
  CliResult r;
  EXPECT_GT(pid, 0);
  int status = 0;
  EXPECT_EQ(::waitpid(pid, &status, 0), pid);
  if (WIFEXITED(status)) r.exitCode = WEXITSTATUS(status);
  r.out = cache::test::readFile(outPath);
  r.err = cache::test::readFile(errPath);
  return r;
}

// Runs the built `hotkernel` binary (see runProgram).
inline CliResult runCli(const std::vector<std::string>& args,
                        std::map<std::string, std::optional<std::string>> env = {}) {
  return runProgram(cliPath(), args, std::move(env));
}

}  // namespace hotkernel::cli::test
