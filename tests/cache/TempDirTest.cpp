// tests/TempDir.h, the temporary directory every cache and CLI test stands
// on: removal takes the whole tree (Note [No std::filesystem::remove_all next
// to libtorch]), directories a test closed included, and never follows a
// symbolic link out of it.

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "../TempDir.h"

namespace hotkernel::test {
namespace {

bool exists(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0;
}

void touch(const std::string& path) { std::ofstream(path) << "x"; }

TEST(TempDirTest, GivenANestedTreeWithClosedDirectoriesWhenTheTempDirEndsThenNothingOfItIsLeft) {
  std::string root;
  {
    TempDir dir;
    root = dir.path();
    ASSERT_TRUE(exists(root));
    ASSERT_EQ(::mkdir(dir.sub("a").c_str(), 0700), 0);
    ASSERT_EQ(::mkdir(dir.sub("a/b").c_str(), 0700), 0);
    ASSERT_EQ(::mkdir(dir.sub("a/b/c").c_str(), 0700), 0);
    touch(dir.sub("a/one"));
    touch(dir.sub("a/b/c/two"));
    ASSERT_EQ(::chmod(dir.sub("a/b/c").c_str(), 0), 0);  // unreadable, unwritable, two levels down
    ASSERT_EQ(::chmod(dir.sub("a/b").c_str(), 0500), 0);  // readable, unwritable
    ASSERT_EQ(::chmod(root.c_str(), 0), 0);                // the root itself closed
  }
  EXPECT_FALSE(exists(root));
}

TEST(TempDirTest, GivenALinkToAnOutsideDirectoryWhenTheTempDirEndsThenTheLinkGoesAndTheTargetStays) {
  TempDir outside("hotkernel-outside");
  touch(outside.sub("kept"));
  std::string root;
  {
    TempDir dir;
    root = dir.path();
    ASSERT_EQ(::symlink(outside.path().c_str(), dir.sub("link").c_str()), 0);
  }
  EXPECT_FALSE(exists(root));
  EXPECT_TRUE(exists(outside.sub("kept")));
}

TEST(TempDirTest, GivenAPathThatDoesNotExistWhenRemovedThenNothingHappens) {
  TempDir dir;
  removeTree(dir.sub("missing"));
  EXPECT_TRUE(exists(dir.path()));
}

}  // namespace
}  // namespace hotkernel::test
