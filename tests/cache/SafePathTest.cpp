// SafePath: the directory and file checks behind CacheStore::open.

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include "CacheTestUtil.h"
#include "SafePath.h"
#include "hotkernel/runtime/Check.h"

namespace hotkernel::cache::detail {
namespace {

using cache::test::modeOf;
using cache::test::TempDir;

TEST(SafePathTest, GivenRelativePathWhenAbsolutePathThenPrefixedWithCwdAndTrailingSlashesDropped) {
  char cwd[4096];
  ASSERT_NE(::getcwd(cwd, sizeof(cwd)), nullptr);
  EXPECT_EQ(absolutePath("x/y/"), std::string(cwd) + "/x/y");
  EXPECT_EQ(absolutePath("/a/b///"), "/a/b");
  EXPECT_EQ(absolutePath("/"), "/");
  EXPECT_THROW(absolutePath(""), Error);
}

TEST(SafePathTest, GivenMissingPathsWhenCheckedThenFalseNotError) {
  TempDir tmp;
  EXPECT_FALSE(checkPrivateDirectory(tmp.sub("none")));
  EXPECT_FALSE(checkPrivateFile(tmp.sub("none")));
  EXPECT_FALSE(checkPrivateDirectory(tmp.sub("none/deeper")));
}

TEST(SafePathTest, GivenMissingDirWhenEnsuredThenCreated0700EvenUnderPermissiveUmask) {
  TempDir tmp;
  mode_t old = ::umask(0);
  ensurePrivateDirectory(tmp.sub("p/q"));
  ::umask(old);
  EXPECT_EQ(modeOf(tmp.sub("p")), 0700u);
  EXPECT_EQ(modeOf(tmp.sub("p/q")), 0700u);
  EXPECT_NO_THROW(ensurePrivateDirectory(tmp.sub("p/q")));  // idempotent
}

TEST(SafePathTest, GivenExistingWorldWritableDirWhenEnsuredThenRefusedNotFixed) {
  TempDir tmp;
  std::string dir = tmp.sub("d");
  ASSERT_EQ(::mkdir(dir.c_str(), 0700), 0);
  ASSERT_EQ(::chmod(dir.c_str(), 0777), 0);
  EXPECT_THROW(ensurePrivateDirectory(dir), Error);
  EXPECT_EQ(modeOf(dir), 0777u);
}

TEST(SafePathTest, GivenPrivateDirInsideWorldWritableParentWhenCheckedThenRefused) {
  TempDir tmp;
  std::string parent = tmp.sub("shared");
  std::string dir = parent + "/cache";
  ASSERT_EQ(::mkdir(parent.c_str(), 0700), 0);
  ASSERT_EQ(::mkdir(dir.c_str(), 0700), 0);
  ASSERT_EQ(::chmod(parent.c_str(), 0777), 0);
  try {
    checkPrivateDirectory(dir);
    FAIL() << "accepted a cache dir whose parent anyone can write";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("ancestor"), std::string::npos) << e.what();
  }
  EXPECT_THROW(ensurePrivateDirectory(dir), Error);
}

TEST(SafePathTest, GivenPrivateDirInsideStickyWorldWritableParentWhenCheckedThenAccepted) {
  TempDir tmp;
  std::string parent = tmp.sub("tmp-like");
  std::string dir = parent + "/cache";
  ASSERT_EQ(::mkdir(parent.c_str(), 0700), 0);
  ASSERT_EQ(::chmod(parent.c_str(), 01777), 0);  // like /tmp
  EXPECT_NO_THROW(ensurePrivateDirectory(dir));
  EXPECT_TRUE(checkPrivateDirectory(dir));
}

TEST(SafePathTest, GivenFileWhenCreatedThen0600AndExistingFileKept) {
  TempDir tmp;
  mode_t old = ::umask(0);
  std::string file = tmp.sub("f");
  ensurePrivateFile(file);
  ::umask(old);
  EXPECT_EQ(modeOf(file), 0600u);
  EXPECT_TRUE(checkPrivateFile(file));
  cache::test::writeFile(file, "keep");
  ensurePrivateFile(file);
  EXPECT_EQ(cache::test::readFile(file), "keep");
}

TEST(SafePathTest, GivenDanglingSymlinkWhenCreatingFileThenRefusedAndTargetNotCreated) {
  TempDir tmp;
  std::string target = tmp.sub("target");
  std::string link = tmp.sub("link");
  ASSERT_EQ(::symlink(target.c_str(), link.c_str()), 0);
  EXPECT_THROW(ensurePrivateFile(link), Error);
  EXPECT_FALSE(std::filesystem::exists(target));
  EXPECT_THROW(checkPrivateFile(link), Error);
}

TEST(SafePathTest, GivenDirectoryWhereFileExpectedWhenCheckedThenRefused) {
  TempDir tmp;
  try {
    checkPrivateFile(tmp.path());
    FAIL() << "expected refusal";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not a regular file"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace hotkernel::cache::detail
