#pragma once
// A fresh directory under $TMPDIR (or /tmp) for a test, removed with
// everything in it; removeTree for trees a test makes elsewhere.
//
// Note [No std::filesystem::remove_all next to libtorch]
// libtorch.so exports its own copy of libstdc++'s filesystem code. In a
// process that links it, remove_all can bind to libtorch's copy while the
// recursive_directory_iterator members that copy calls bind to the system
// libstdc++'s, whose object layout differs: on the GPU machine (g++ 13, a
// newer libstdc++) removing a directory with a subdirectory jumped to a null
// address. The helpers here remove with nftw(3), which no C++ runtime
// provides twice.

#include <ftw.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>

namespace hotkernel::test {

namespace detail {
inline int removeOne(const char* path, const struct stat* /*st*/, int type, struct FTW* /*ftw*/) {
  if (type == FTW_DP) {
    ::rmdir(path);
  } else {
    ::unlink(path);
  }
  return 0;  // go on: remove what can be removed
}
inline thread_local int unreadable = 0;
inline int reopenOne(const char* path, const struct stat* st, int type, struct FTW* /*ftw*/) {
  if (type == FTW_DNR) ++unreadable;  // opened now; its entries are walked on the next pass
  if (type == FTW_D || type == FTW_DNR) ::chmod(path, (st->st_mode & 07777) | S_IRWXU);
  return 0;
}
}  // namespace detail

// Removes `path` and everything under it (symbolic links themselves, never their targets); what cannot be
// removed stays. Directories a test made unreadable or unwritable are opened to their owner first.
inline void removeTree(const std::string& path) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) return;
  if (S_ISDIR(st.st_mode)) {
    // One pass per level of unreadable directories (nftw reads a directory before it visits it).
    for (int pass = 0; pass < 64; ++pass) {
      detail::unreadable = 0;
      ::nftw(path.c_str(), detail::reopenOne, 16, FTW_PHYS);
      if (detail::unreadable == 0) break;
    }
  }
  ::nftw(path.c_str(), detail::removeOne, 16, FTW_DEPTH | FTW_PHYS);
}

class TempDir {
 public:
  explicit TempDir(const std::string& prefix = "hotkernel-test") {
    const char* base = std::getenv("TMPDIR");
    std::string tmpl = std::string(base && *base ? base : "/tmp") + "/" + prefix + "-XXXXXX";
    char* made = ::mkdtemp(tmpl.data());
    EXPECT_NE(made, nullptr);
    path_ = tmpl;
  }
  ~TempDir() { removeTree(path_); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string sub(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

}  // namespace hotkernel::test
