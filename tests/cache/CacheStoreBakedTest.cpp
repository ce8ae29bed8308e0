// Note [Read-only cache directories]: immutable opens of baked caches and the
// owners a read-only open accepts.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "CacheTestUtil.h"
#include "SafePath.h"
#include "hotkernel/cache/CacheStore.h"
#include "hotkernel/runtime/Check.h"

namespace hotkernel::cache {
namespace {

using test::kernelEntry;
using test::TempDir;
using test::testFingerprint;

bool exists(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0;
}

TEST(CacheStoreBakedTest, GivenAClosedCacheWhenOpenedBakedThenItsEntriesReadAndNoLockFilesAppear) {
  TempDir tmp;
  const std::string dir = tmp.sub("baked");
  {
    auto store = CacheStore::open(dir, EntryTrust::none());
    store->put(kernelEntry("aten::_softmax", "dtype=bf16;rows=8;cols=64"));
    store->put(kernelEntry("aten::_softmax", "dtype=bf16;rows=16;cols=64"));
  }
  const std::string db = CacheStore::databasePathFor(dir);
  std::filesystem::remove(db + "-shm");  // what an image build leaves: the database alone
  ASSERT_FALSE(exists(db + "-wal") && std::filesystem::file_size(db + "-wal") > 0);
  auto baked = CacheStore::openBaked(dir, EntryTrust::none());
  ASSERT_NE(baked, nullptr);
  EXPECT_EQ(baked->listForFingerprint(testFingerprint().key()).size(), 2u);
  ASSERT_TRUE(baked->get(testFingerprint().key(), "aten::_softmax", "dtype=bf16;rows=8;cols=64").has_value());
  EXPECT_FALSE(exists(db + "-shm"));  // immutable: no shared-memory index, no locks
  EXPECT_FALSE(exists(db + "-wal"));
  EXPECT_THROW(baked->put(kernelEntry("aten::_softmax", "dtype=bf16;rows=32;cols=64")), Error);
}

TEST(CacheStoreBakedTest, GivenACacheAWriterStillHoldsWhenOpenedBakedThenRefusedNamingTheLog) {
  TempDir tmp;
  const std::string dir = tmp.sub("live");
  auto writer = CacheStore::open(dir, EntryTrust::none());
  writer->put(kernelEntry("aten::_softmax", "dtype=bf16;rows=8;cols=64"));
  const std::string wal = CacheStore::databasePathFor(dir) + "-wal";
  ASSERT_TRUE(exists(wal) && std::filesystem::file_size(wal) > 0);
  try {
    CacheStore::openBaked(dir, EntryTrust::none());
    FAIL() << "opened a database with an unmerged log";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("write-ahead log"), std::string::npos) << e.what();
  }
  // A plain read-only open sees the writer's entry through the log.
  auto reader = CacheStore::openReadOnly(dir, EntryTrust::none());
  ASSERT_NE(reader, nullptr);
  EXPECT_EQ(reader->listForFingerprint(testFingerprint().key()).size(), 1u);
}

TEST(CacheStoreBakedTest, GivenNoCacheWhenOpenedBakedThenNull) {
  TempDir tmp;
  EXPECT_EQ(CacheStore::openBaked(tmp.sub("none"), EntryTrust::none()), nullptr);
  ::mkdir(tmp.sub("empty").c_str(), 0700);
  EXPECT_EQ(CacheStore::openBaked(tmp.sub("empty"), EntryTrust::none()), nullptr);
}

TEST(CacheStoreBakedTest, GivenFilesOfAnotherUserWhenOpenedForReadingThenRefusedAsForWriting) {
  if (::geteuid() != 0) GTEST_SKIP() << "making files of another user needs root";
  TempDir tmp;
  const std::string dir = tmp.sub("foreign");
  { CacheStore::open(dir, EntryTrust::none())->put(kernelEntry("aten::_softmax", "dtype=bf16;rows=8;cols=64")); }
  ASSERT_EQ(::chown(dir.c_str(), 4242, 4242), 0);
  using Open = std::unique_ptr<CacheStore> (*)(const std::string&, EntryTrust);
  for (const Open open : {static_cast<Open>(&CacheStore::openBaked), static_cast<Open>(&CacheStore::openReadOnly)}) {
    try {
      (void)open(dir, EntryTrust::none());
      FAIL() << "a directory of uid 4242 was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("owned by uid 4242"), std::string::npos) << e.what();
    }
  }
  // Root's directory with another user's database file: refused too.
  ASSERT_EQ(::chown(dir.c_str(), 0, 0), 0);
  ASSERT_EQ(::chown(CacheStore::databasePathFor(dir).c_str(), 4242, 4242), 0);
  EXPECT_THROW(CacheStore::openReadOnly(dir, EntryTrust::none()), Error);
  EXPECT_TRUE(detail::checkReadableDirectory(dir));
  EXPECT_THROW(detail::checkReadableFile(CacheStore::databasePathFor(dir)), Error);
}

TEST(CacheStoreBakedTest, GivenADirectoryWritableByOthersWhenOpenedForReadingThenRefused) {
  TempDir tmp;
  const std::string dir = tmp.sub("open");
  { CacheStore::open(dir, EntryTrust::none())->put(kernelEntry("aten::_softmax", "dtype=bf16;rows=8;cols=64")); }
  ASSERT_EQ(::chmod(dir.c_str(), 0777), 0);
  EXPECT_THROW(CacheStore::openBaked(dir, EntryTrust::none()), Error);
  EXPECT_THROW(CacheStore::openReadOnly(dir, EntryTrust::none()), Error);
}

}  // namespace
}  // namespace hotkernel::cache
