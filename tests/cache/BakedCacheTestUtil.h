#pragma once
// The image-baked case for tests that run as root (the cache and CLI tests):
// a cache directory made readable the way an image build leaves it, a
// snapshot of every file in it (to show that a reader changed nothing), and a
// program run under an unprivileged uid, as a serving process runs.

#include <fcntl.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "CacheTestUtil.h"

extern char** environ;

namespace hotkernel::cache::test {

// The uid and gid the serving process drops to (nobody on Debian).
constexpr uid_t kUnprivilegedUid = 65534;
constexpr gid_t kUnprivilegedGid = 65534;

// What an image build does to a cache its root writer closed: the directory
// 0755, its files 0644, everything root's.
inline void makeWorldReadable(const std::string& dir) {
  ASSERT_EQ(::chmod(dir.c_str(), 0755), 0) << dir;
  for (const auto& file : std::filesystem::directory_iterator(dir)) {
    ASSERT_EQ(::chmod(file.path().c_str(), 0644), 0) << file.path();
  }
}

// Every name in a directory (the directory itself as ".") with the stat fields
// a write changes; equal snapshots mean nothing was created, removed, written,
// renamed, chmod-ed or chown-ed. The database's bytes too.
struct DirectorySnapshot {
  using Fields = std::tuple<ino_t, off_t, int64_t, int64_t, mode_t, uid_t, gid_t>;  // ino size mtime ctime mode uid gid
  std::map<std::string, Fields> files;
  std::string databaseBytes;

  static DirectorySnapshot of(const std::string& dir) {
    DirectorySnapshot s;
    const auto take = [&](const std::string& name, const std::string& path) {
      struct stat st;
      EXPECT_EQ(::lstat(path.c_str(), &st), 0) << path;
      s.files[name] = Fields{st.st_ino, st.st_size, st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec,
                             st.st_ctim.tv_sec * 1000000000LL + st.st_ctim.tv_nsec, st.st_mode, st.st_uid, st.st_gid};
    };
    take(".", dir);
    for (const auto& file : std::filesystem::directory_iterator(dir)) {
      take(file.path().filename().string(), file.path().string());
    }
    s.databaseBytes = readFile(CacheStore::databasePathFor(dir));
    return s;
  }
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const auto& [name, fields] : files) out.push_back(name);
    return out;
  }
  bool operator==(const DirectorySnapshot& o) const { return files == o.files && databaseBytes == o.databaseBytes; }
};

struct UnprivilegedRun {
  int exitCode = -1;  // -1 when killed by a signal
  std::string out;
  std::string err;
};

// The exit codes of a child that could not become kUnprivilegedUid.
constexpr int kSetgroupsFailed = 120, kSetgidFailed = 121, kSetuidFailed = 122, kRootRegained = 123;

// Runs `program` with `args` as kUnprivilegedUid / kUnprivilegedGid with no
// supplementary groups (setgroups, setgid, setuid, each checked, then a check
// that root cannot be regained) and captures its exit code, stdout and stderr.
// Its environment is this process's without any HOTKERNEL_* variable, plus
// `env`. Precondition: this process runs as root.
inline UnprivilegedRun runUnprivileged(const std::string& program, const std::vector<std::string>& args,
                                       const std::map<std::string, std::string>& env) {
  TempDir io;  // root's, 0700: the child opens its output files before it drops root
  const std::string outPath = io.sub("out"), errPath = io.sub("err");
  std::vector<std::string> envStrings;
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::strncmp(*e, "HOTKERNEL_", 10) != 0) envStrings.emplace_back(*e);
  }
  for (const auto& [name, value] : env) envStrings.push_back(name + "=" + value);
  std::vector<char*> envp, argv;
  for (std::string& s : envStrings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> argStrings = {program};
  argStrings.insert(argStrings.end(), args.begin(), args.end());
  for (std::string& s : argStrings) argv.push_back(s.data());
  argv.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int out = ::open(outPath.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    const int err = ::open(errPath.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (out < 0 || err < 0) ::_exit(127);
    ::dup2(out, STDOUT_FILENO);
    ::dup2(err, STDERR_FILENO);
    if (::setgroups(0, nullptr) != 0) ::_exit(kSetgroupsFailed);
    if (::setgid(kUnprivilegedGid) != 0) ::_exit(kSetgidFailed);
    if (::setuid(kUnprivilegedUid) != 0) ::_exit(kSetuidFailed);
    if (::setuid(0) == 0 || ::geteuid() != kUnprivilegedUid || ::getegid() != kUnprivilegedGid) {
      ::_exit(kRootRegained);
    }
    ::execve(program.c_str(), argv.data(), envp.data());
    ::_exit(127);
  }
  UnprivilegedRun r;
  EXPECT_GT(pid, 0);
  int status = 0;
  EXPECT_EQ(::waitpid(pid, &status, 0), pid);
  if (WIFEXITED(status)) r.exitCode = WEXITSTATUS(status);
  EXPECT_TRUE(r.exitCode < kSetgroupsFailed || r.exitCode > kRootRegained)
      << "the child could not drop root (exit " << r.exitCode << ": 120 setgroups, 121 setgid, 122 setuid, "
      << "123 root regained)";
  r.out = readFile(outPath);
  r.err = readFile(errPath);
  return r;
}

}  // namespace hotkernel::cache::test
