// Unsafe cache directories are refused with a message that says why, and
// nothing is created in them. The suite runs as root in CI, where permission
// bits do not stop writes, so "owned by another user" uses nobody (65534).

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include "FaultTestUtil.h"

namespace hotkernel::cache::fault {
namespace {

// Both open modes refuse `dir` with a message containing `why`; no database appears.
void expectRefused(const std::string& dir, const std::string& why) {
  std::string rw = errorOf([&] { CacheStore::open(dir); });
  std::string ro = errorOf([&] { CacheStore::openReadOnly(dir); });
  EXPECT_NE(rw.find(why), std::string::npos) << rw;
  EXPECT_NE(ro.find(why), std::string::npos) << ro;
  EXPECT_NE(rw.find("refusing cache"), std::string::npos) << rw;
}

TEST(CachePermissionTest, GivenWorldOrGroupWritableDirectory_WhenOpened_ThenRefusedWithTheModeAndTheFix) {
  TempDir tmp;
  const std::string dir = tmp.sub("cache");
  for (mode_t mode : {0777, 0770, 0720, 0702}) {
    ASSERT_EQ(::mkdir(dir.c_str(), 0700), 0);
    ::chmod(dir.c_str(), mode);
    SCOPED_TRACE(mode);
    expectRefused(dir, "writable by group or others");
    expectRefused(dir, "chmod go-w " + dir);
    EXPECT_NE(::access(CacheStore::databasePathFor(dir).c_str(), F_OK), 0);
    ::rmdir(dir.c_str());
  }
}

TEST(CachePermissionTest, GivenDirectoryOwnedByAnotherUser_WhenOpened_ThenRefusedNamingTheOwner) {
  TempDir tmp;
  const std::string dir = tmp.sub("cache");
  ASSERT_EQ(::mkdir(dir.c_str(), 0700), 0);
  ASSERT_EQ(::chown(dir.c_str(), 65534, 65534), 0);
  expectRefused(dir, "owned by uid 65534");
  EXPECT_NE(::access(CacheStore::databasePathFor(dir).c_str(), F_OK), 0);
}

TEST(CachePermissionTest, GivenAncestorOwnedByAnotherUser_WhenOpened_ThenRefusedNamingTheAncestor) {
  TempDir tmp;
  const std::string parent = tmp.sub("theirs");
  ASSERT_EQ(::mkdir(parent.c_str(), 0755), 0);
  ASSERT_EQ(::mkdir((parent + "/cache").c_str(), 0700), 0);
  ASSERT_EQ(::chown(parent.c_str(), 65534, 65534), 0);
  expectRefused(parent + "/cache", "ancestor " + parent + " is owned by another user");
}

TEST(CachePermissionTest, GivenCacheDirectoryThatIsASymlink_WhenOpened_ThenRefused) {
  TempDir tmp;
  ASSERT_EQ(::mkdir(tmp.sub("real").c_str(), 0700), 0);
  ASSERT_EQ(::symlink(tmp.sub("real").c_str(), tmp.sub("link").c_str()), 0);
  expectRefused(tmp.sub("link"), "is a symlink");
  EXPECT_NE(::access((tmp.sub("real") + "/kernels.sqlite").c_str(), F_OK), 0);
}

TEST(CachePermissionTest, GivenSymlinkedPathComponentOfAnyOwner_WhenOpened_ThenRefusedNamingTheLinkAndNothingCreated) {
  TempDir tmp;
  ASSERT_EQ(::mkdir(tmp.sub("real").c_str(), 0700), 0);
  ASSERT_EQ(::symlink(tmp.sub("real").c_str(), tmp.sub("ours").c_str()), 0);
  ASSERT_EQ(::symlink(tmp.sub("real").c_str(), tmp.sub("theirs").c_str()), 0);
  ASSERT_EQ(::lchown(tmp.sub("theirs").c_str(), 65534, 65534), 0);
  for (const char* link : {"ours", "theirs"}) {
    SCOPED_TRACE(link);
    expectRefused(tmp.sub(link) + "/a/cache", "path component " + tmp.sub(link) + " is a symlink");
    expectRefused(tmp.sub(link) + "/a/cache", "to " + tmp.sub("real"));
    EXPECT_NE(::access((tmp.sub("real") + "/a").c_str(), F_OK), 0) << "created behind the link";
  }
}

TEST(CachePermissionTest, GivenRegularFileWhereTheDirectoryShouldBe_WhenOpened_ThenRefusedAndFileUntouched) {
  TempDir tmp;
  writeFile(tmp.sub("cache"), "not a directory");
  expectRefused(tmp.sub("cache"), "is not a directory");
  EXPECT_EQ(readFile(tmp.sub("cache")), "not a directory");
}

TEST(CachePermissionTest, GivenUnsafeFilesInsideThePrivateDirectory_WhenOpened_ThenRefusedNamingTheFile) {
  TempDir tmp;
  const std::string dir = tmp.sub("cache");
  CacheStore::open(dir)->put(entryFor("e", 0));
  const std::string db = CacheStore::databasePathFor(dir);
  const std::string log = dir + "/kernels.commits";
  // The commit log guards against lost commits; it gets the database's protection.
  ::chmod(log.c_str(), 0666);
  expectRefused(dir, "refusing cache file " + log + ": it is writable by group or others");
  ::chmod(log.c_str(), 0600);
  ::rename(log.c_str(), (log + ".real").c_str());
  ASSERT_EQ(::symlink((log + ".real").c_str(), log.c_str()), 0);
  expectRefused(dir, "refusing cache file " + log + ": it is a symlink");
  ::unlink(log.c_str());
  ::rename(db.c_str(), (db + ".real").c_str());
  ASSERT_EQ(::symlink((db + ".real").c_str(), db.c_str()), 0);
  expectRefused(dir, "refusing cache file " + db + ": it is a symlink");
  ::unlink(db.c_str());
  ::mkdir((db + "-wal").c_str(), 0700);
  ::rename((db + ".real").c_str(), db.c_str());
  expectRefused(dir, "refusing cache file " + db + "-wal: it is not a regular file");
}

}  // namespace
}  // namespace hotkernel::cache::fault
