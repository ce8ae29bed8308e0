// Importing a bundle's entries (Note [Importing a bundle is idempotent]):
// through put, so each entry keeps its digests and is signed with the
// importing store's key; a second import writes nothing; newer local entries
// stay; local entries that fail their checks are replaced.

#include "hotkernel/cache/BundleImport.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "CacheTestUtil.h"
#include "hotkernel/cache/Bundle.h"
#include "hotkernel/cache/CacheStore.h"
#include "hotkernel/runtime/Hash.h"
#include "hotkernel/runtime/Logging.h"

namespace hotkernel::cache {
namespace {

using test::keepAtenEntry;
using test::kernelEntry;
using test::RawDb;
using test::TempDir;
using test::testFingerprint;

const std::string kOp = "aten::_softmax";

EntryTrust trustOf(char fill) { return EntryTrust::withKey(EntryKey::fromBytes(std::string(32, fill))); }

// Fills a store in `dir` and returns its entries as a decoded bundle carries them.
std::vector<Entry> exported(const std::string& dir) {
  auto store = CacheStore::open(dir, EntryTrust::none());
  Entry a = kernelEntry(kOp, "dtype=bf16;rows=8;cols=64");
  a.createdUnix = 1700000000;
  Entry b = keepAtenEntry("aten::_log_softmax", "dtype=fp32;rows=8;cols=64");
  b.createdUnix = 1700000100;
  store->put(a);
  store->put(b);
  BundleHeader h;
  h.hotkernelVersion = "0.1.0";
  return decodeBundle(encodeBundle(h, store->listForFingerprint(testFingerprint().key()), nullptr),
                      EntryTrust::none())
      .entries;
}

TEST(BundleImportTest, GivenAnEmptyCacheWhenImportedThenEveryEntryIsAddedAndLoads) {
  TempDir src, dst;
  const std::vector<Entry> entries = exported(src.path());
  ImportCounts c = importEntries(dst.sub("cache"), EntryTrust::none(), entries);
  EXPECT_EQ(c.added, 2u);
  EXPECT_EQ(c.written(), 2u);
  auto store = CacheStore::openReadOnly(dst.sub("cache"), EntryTrust::none());
  ASSERT_NE(store, nullptr);
  std::vector<Entry> loaded = store->listForFingerprint(testFingerprint().key());
  ASSERT_EQ(loaded.size(), 2u);
  for (const Entry& e : loaded) {
    const Entry& want = entries[e.op == entries[0].op ? 0 : 1];
    ASSERT_EQ(e.op, want.op);
    EXPECT_EQ(e.cubin, want.cubin);
    EXPECT_EQ(e.createdUnix, want.createdUnix);
    EXPECT_EQ(e.metrics, want.metrics);
  }
  for (const VerifyReport& r : store->verifyAll()) EXPECT_EQ(r.status, VerifyStatus::Ok) << r.detail;
}

TEST(BundleImportTest, GivenABundleImportedOnceWhenImportedAgainThenNothingIsWritten) {
  TempDir src, dst;
  const std::vector<Entry> entries = exported(src.path());
  ASSERT_EQ(importEntries(dst.path(), EntryTrust::none(), entries).added, 2u);
  RawDb before(dst.path());
  const int64_t seq = before.queryInt("SELECT CAST(value AS INTEGER) FROM meta WHERE key = 'commit_seq'");
  const std::string commits = test::readFile(dst.sub("kernels.commits"));
  ImportCounts again = importEntries(dst.path(), EntryTrust::none(), entries);
  EXPECT_EQ(again.unchanged, 2u);
  EXPECT_EQ(again.written(), 0u);
  EXPECT_EQ(before.queryInt("SELECT CAST(value AS INTEGER) FROM meta WHERE key = 'commit_seq'"), seq);
  EXPECT_EQ(test::readFile(dst.sub("kernels.commits")), commits);
}

TEST(BundleImportTest, GivenLocalEntriesOlderAndNewerWhenImportedThenOlderReplacedNewerKept) {
  TempDir src, dst;
  const std::vector<Entry> entries = exported(src.path());
  {
    auto store = CacheStore::open(dst.path(), EntryTrust::none());
    for (Entry e : entries) {
      e.metrics = R"({"speedup":1.01})";
      e.createdUnix += e.op == kOp ? -10 : 10;  // the softmax entry older, the other newer
      store->put(e);
    }
  }
  ImportCounts c = importEntries(dst.path(), EntryTrust::none(), entries);
  EXPECT_EQ(c.replaced, 1u);
  EXPECT_EQ(c.kept, 1u);
  auto store = CacheStore::openReadOnly(dst.path(), EntryTrust::none());
  for (const Entry& e : entries) {
    std::optional<Entry> got = store->get(e.fingerprint, e.op, e.variant);
    ASSERT_TRUE(got);
    EXPECT_EQ(got->metrics, e.op == kOp ? e.metrics : R"({"speedup":1.01})") << e.op;
  }
}

TEST(BundleImportTest, GivenAKeyWhenImportedThenEntriesAreSignedWithTheImportingKey) {
  TempDir src, dst;
  const std::vector<Entry> entries = exported(src.path());
  ImportCounts c = importEntries(dst.path(), trustOf('k'), entries);
  EXPECT_EQ(c.added, 2u);
  auto store = CacheStore::openReadOnly(dst.path(), trustOf('k'));
  EXPECT_EQ(store->listForFingerprint(testFingerprint().key()).size(), 2u);
  for (const VerifyReport& r : store->verifyAll()) EXPECT_EQ(r.status, VerifyStatus::Ok) << r.detail;
  auto other = CacheStore::openReadOnly(dst.path(), trustOf('o'));
  EXPECT_TRUE(other->listForFingerprint(testFingerprint().key()).empty());
}

TEST(BundleImportTest, GivenUnsignedLocalEntriesAndAKeyWhenImportedThenTheyAreReplacedSigned) {
  setLogLevel(LogLevel::Error);  // the unsigned rows are refused with a warning
  TempDir src, dst;
  const std::vector<Entry> entries = exported(src.path());
  ASSERT_EQ(importEntries(dst.path(), EntryTrust::none(), entries).added, 2u);
  ImportCounts c = importEntries(dst.path(), trustOf('k'), entries);
  EXPECT_EQ(c.replaced, 2u);
  auto store = CacheStore::openReadOnly(dst.path(), trustOf('k'));
  EXPECT_EQ(store->listForFingerprint(testFingerprint().key()).size(), 2u);
  EXPECT_EQ(importEntries(dst.path(), trustOf('k'), entries).unchanged, 2u);
  setLogLevel(LogLevel::Warn);
}

TEST(BundleImportTest, GivenEachCaseWhenActionIsDecidedThenItFollowsTheNote) {
  Entry incoming = kernelEntry(kOp, "v");
  incoming.cubinSha256 = sha256Hex(incoming.cubin);
  incoming.createdUnix = 100;
  EXPECT_EQ(importActionFor(incoming, std::nullopt, false), ImportAction::Add);
  EXPECT_EQ(importActionFor(incoming, std::nullopt, true), ImportAction::Replace);
  EXPECT_EQ(importActionFor(incoming, incoming, false), ImportAction::Unchanged);
  Entry older = incoming;
  older.metrics = "{}";
  older.createdUnix = 99;
  EXPECT_EQ(importActionFor(incoming, older, false), ImportAction::Replace);
  Entry sameAge = older;
  sameAge.createdUnix = 100;
  EXPECT_EQ(importActionFor(incoming, sameAge, false), ImportAction::Replace);
  Entry newer = older;
  newer.createdUnix = 101;
  EXPECT_EQ(importActionFor(incoming, newer, false), ImportAction::KeepLocal);
  EXPECT_STREQ(toString(ImportAction::KeepLocal), "kept");
}

}  // namespace
}  // namespace hotkernel::cache
