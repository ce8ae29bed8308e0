// A full disk and a read-only cache: writes fail with one clear error, no
// crash, no damage; what was stored before still loads. A full disk is a
// file size limit (RLIMIT_FSIZE, SIGXFSZ ignored: writes fail with EFBIG) in a
// child; read-only is real because the child drops root to nobody.

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "FaultTestUtil.h"

namespace hotkernel::cache::fault {
namespace {

void limitFileSize(rlim_t bytes) {
  ::signal(SIGXFSZ, SIG_IGN);
  struct rlimit limit;
  ::getrlimit(RLIMIT_FSIZE, &limit);
  limit.rlim_cur = bytes;
  ::setrlimit(RLIMIT_FSIZE, &limit);
}

off_t sizeOf(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 ? st.st_size : 0;
}

TEST(CacheDiskTest, GivenDiskFillingUpDuringPuts_WhenAPutNoLongerFits_ThenItThrowsClearlyAndEveryEarlierPutStillLoads) {
  TempDir tmp;
  const std::string dir = tmp.sub("cache");
  {
    auto store = CacheStore::open(dir);
    for (int i = 0; i < 3; ++i) store->put(entryFor("before=" + std::to_string(i), i));
  }
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  int rc = runInChild([&] {
    ::close(fds[0]);
    auto store = CacheStore::open(dir);
    limitFileSize(sizeOf(store->databasePath()) + 600 * 1024);
    for (int i = 0; i < 100; ++i) {
      std::string error = errorOf([&] { store->put(entryFor("full=" + std::to_string(i), 4)); });  // 260 KB each
      if (error.empty()) {
        if (::write(fds[1], &i, sizeof i) != sizeof i) return 5;
        continue;
      }
      // One clear error naming the database and the failing write.
      if (error.find(store->databasePath()) == std::string::npos || error.find("failed") == std::string::npos) {
        std::fprintf(stderr, "unclear error: %s\n", error.c_str());
        return 2;
      }
      // Serving continues: the same store still reads.
      return store->get(testFingerprint().key(), kOp, "before=1") ? 0 : 3;
    }
    return 4;  // never filled up
  });
  ::close(fds[1]);
  ASSERT_EQ(rc, 0);
  std::vector<int> stored;
  int i;
  while (::read(fds[0], &i, sizeof i) == sizeof i) stored.push_back(i);
  ::close(fds[0]);
  EXPECT_FALSE(stored.empty()) << "some puts fit before the limit";

  EXPECT_EQ(RawDb(dir).queryText("PRAGMA integrity_check"), "ok");
  auto store = CacheStore::open(dir);
  for (int b = 0; b < 3; ++b) {
    auto e = store->get(testFingerprint().key(), kOp, "before=" + std::to_string(b));
    ASSERT_TRUE(e.has_value());
    EXPECT_TRUE(sameEntry(*e, entryFor("before=" + std::to_string(b), b)));
  }
  for (int s : stored) {
    auto e = store->get(testFingerprint().key(), kOp, "full=" + std::to_string(s));
    ASSERT_TRUE(e.has_value()) << "a put that returned is missing: full=" << s;
    EXPECT_TRUE(sameEntry(*e, entryFor("full=" + std::to_string(s), 4)));
  }
  EXPECT_EQ(store->listMetadata().size(), 3 + stored.size());
  auto reports = store->verifyAll();
  EXPECT_EQ(countStatus(reports, VerifyStatus::Ok), reports.size());
}

TEST(CacheDiskTest, GivenNoSpaceAtAll_WhenANewCacheIsOpened_ThenOneClearErrorAndNoCrash) {
  TempDir tmp;
  const std::string dir = tmp.sub("cache");
  int rc = runInChild([&] {
    limitFileSize(0);
    std::string error = errorOf([&] { CacheStore::open(dir); });
    if (error.find(CacheStore::databasePathFor(dir)) == std::string::npos) {
      std::fprintf(stderr, "unclear error: '%s'\n", error.c_str());
      return 2;
    }
    return 0;
  });
  EXPECT_EQ(rc, 0);
  // Once space is back the cache opens (the empty file left behind is initialized).
  auto store = CacheStore::open(dir);
  store->put(entryFor("after", 0));
  EXPECT_TRUE(store->get(testFingerprint().key(), kOp, "after").has_value());
}

// A cache directory owned by nobody, made read-only (0500) after it was filled.
std::string readOnlyCacheForNobody(const TempDir& tmp) {
  ::chmod(tmp.path().c_str(), 0755);  // nobody may traverse the test's directory
  const std::string dir = tmp.sub("cache");
  {
    auto store = CacheStore::open(dir);
    store->put(entryFor("stored", 0));
  }  // the last close checkpoints and removes the -wal and -shm
  for (const char* name : {"", "/kernels.sqlite", "/kernels.commits"}) {
    EXPECT_EQ(::chown((dir + name).c_str(), 65534, 65534), 0);
  }
  ::chmod(dir.c_str(), 0500);
  return dir;
}

TEST(CacheDiskTest, GivenReadOnlyCacheDirectoryAsUnprivilegedUser_WhenOpened_ThenOneClearErrorAndNoCrash) {
  TempDir tmp;
  const std::string dir = readOnlyCacheForNobody(tmp);
  const std::string before = readFile(dir + "/kernels.sqlite");
  int rc = runInChild([&] {
    if (!becomeNobody()) return 10;
    // Serving would log this once and run without a cache.
    std::string error = errorOf([&] { CacheStore::open(dir)->put(entryFor("new", 1)); });
    if (error.find(CacheStore::databasePathFor(dir)) == std::string::npos || error.find('\n') != std::string::npos ||
        error.find("not writable by this user") == std::string::npos) {
      std::fprintf(stderr, "unclear error: '%s'\n", error.c_str());
      return 2;
    }
    return 0;
  });
  EXPECT_EQ(rc, 0);
  EXPECT_EQ(readFile(dir + "/kernels.sqlite"), before);
}

TEST(CacheDiskTest, GivenReadOnlyDatabaseFileAsUnprivilegedUser_WhenPut_ThenClearErrorAndStoredEntriesStillLoad) {
  TempDir tmp;
  const std::string dir = readOnlyCacheForNobody(tmp);
  ::chmod(dir.c_str(), 0700);                                 // SQLite may create its -wal/-shm
  ::chmod((dir + "/kernels.sqlite").c_str(), 0400);           // but the database is read-only
  int rc = runInChild([&] {
    if (!becomeNobody()) return 10;
    std::unique_ptr<CacheStore> store;
    std::string openError = errorOf([&] { store = CacheStore::open(dir); });
    if (!store) {
      std::fprintf(stderr, "open refused: %s\n", openError.c_str());
      return 2;  // a read-only database still serves what it holds
    }
    std::string error = errorOf([&] { store->put(entryFor("new", 1)); });
    if (error.find("not writable by this user") == std::string::npos) {
      std::fprintf(stderr, "unclear error: '%s'\n", error.c_str());
      return 3;
    }
    auto e = store->get(testFingerprint().key(), kOp, "stored");
    return e && sameEntry(*e, entryFor("stored", 0)) ? 0 : 4;
  });
  EXPECT_EQ(rc, 0);
  for (const char* name : {"", "/kernels.sqlite", "/kernels.sqlite-wal", "/kernels.sqlite-shm", "/kernels.commits"}) {
    ::chown((dir + name).c_str(), 0, 0);  // the -wal/-shm the child created are nobody's
  }
  ::chmod((dir + "/kernels.sqlite").c_str(), 0600);
  auto store = CacheStore::open(dir);
  EXPECT_EQ(store->listMetadata().size(), 1u);
}

TEST(CacheDiskTest, GivenMissingCacheUnderUnwritableParentAsUnprivilegedUser_WhenOpened_ThenClearCannotCreateError) {
  TempDir tmp;
  ::chmod(tmp.path().c_str(), 0755);  // owned by root: nobody cannot create inside
  const std::string dir = tmp.sub("cache");
  int rc = runInChild([&] {
    if (!becomeNobody()) return 10;
    std::string error = errorOf([&] { CacheStore::open(dir); });
    if (error.find("cannot create cache directory " + dir) == std::string::npos) {
      std::fprintf(stderr, "unclear error: '%s'\n", error.c_str());
      return 2;
    }
    return 0;
  });
  EXPECT_EQ(rc, 0);
  EXPECT_NE(::access(dir.c_str(), F_OK), 0);
}

}  // namespace
}  // namespace hotkernel::cache::fault
