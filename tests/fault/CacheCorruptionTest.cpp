// Damaged files: bit flips and truncations of the database, its -wal, the
// cubin blobs and the commit log. No damaged entry may load as valid, and
// every committed entry either loads intact or is reported (lost, or failing
// its digests) by verify.

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <random>
#include <set>

#include "CommitLog.h"
#include "FaultTestUtil.h"

namespace hotkernel::cache::fault {
namespace {

std::vector<Entry> numbered(const std::string& prefix, int count, int firstIndex = 0) {
  std::vector<Entry> out;
  for (int i = 0; i < count; ++i) out.push_back(entryFor(prefix + std::to_string(i), firstIndex + i));
  return out;
}

// Opens `dir` (read-write, as a serving process would) and checks the
// invariant of this file: each of `expected` loads intact or verify reports
// it; nothing loads that differs from what was put. Returns how many were
// reported lost; -1 when open refused the store (a loud, safe outcome).
int checkAccounted(const std::string& dir, const std::vector<Entry>& expected) {
  std::unique_ptr<CacheStore> store;
  std::string error = errorOf([&] { store = CacheStore::open(dir); });
  if (!store) {
    EXPECT_NE(error.find(dir), std::string::npos) << "refusal must name the cache: " << error;
    return -1;
  }
  std::vector<VerifyReport> reports = store->verifyAll();
  std::map<std::string, VerifyStatus> reported;
  for (const VerifyReport& r : reports) {
    if (!r.variant.empty() && r.status != VerifyStatus::Ok) reported[r.variant] = r.status;
  }
  int lost = 0;
  for (const Entry& want : expected) {
    std::optional<Entry> got;
    std::string readError = errorOf([&] { got = store->get(want.fingerprint, want.op, want.variant); });
    if (got) {
      EXPECT_TRUE(sameEntry(*got, want)) << "damaged entry loaded as valid: " << want.variant;
      continue;
    }
    // A flip inside a key column turns the row into another key: then the report names that one.
    bool anyReport = false;
    for (const VerifyReport& r : reports) anyReport |= r.status != VerifyStatus::Ok;
    EXPECT_TRUE(reported.count(want.variant) || anyReport)
        << want.variant << " vanished without a report (read error: " << readError << ")";
    lost += reported.count(want.variant) && reported[want.variant] == VerifyStatus::Lost ? 1 : 0;
  }
  std::vector<Entry> listed;
  errorOf([&] { listed = store->listForFingerprint(testFingerprint().key()); });  // may throw on a damaged page
  for (const Entry& got : listed) {
    bool known = false;
    for (const Entry& want : expected) known |= sameEntry(got, want);
    EXPECT_TRUE(known) << "loaded an entry that was never put: " << got.variant;
  }
  return lost;
}

class CacheWalDamageTest : public ::testing::Test {
 protected:
  void SetUp() override {
    base_ = numbered("base=", 4);
    walOnly_ = numbered("wal=", 6, 4);
    test::putWithCommitsOnlyInWal(tmp_.sub("live"), base_, walOnly_, tmp_.sub("pristine"));
    wal_ = readFile(tmp_.sub("pristine") + "/kernels.sqlite-wal");
    ASSERT_GT(wal_.size(), 32u + 6 * 4096u) << "the six puts should still be in the -wal";
  }
  std::vector<Entry> all() const {
    std::vector<Entry> out = base_;
    out.insert(out.end(), walOnly_.begin(), walOnly_.end());
    return out;
  }
  // A fresh copy of the crashed store whose -wal is `wal`.
  std::string crashedCopy(const std::string& name, const std::string& wal) {
    std::string dir = tmp_.sub(name);
    test::copyStoreFiles(tmp_.sub("pristine"), dir);
    writeFile(dir + "/kernels.sqlite-wal", wal);
    return dir;
  }

  TempDir tmp_;
  std::vector<Entry> base_;
  std::vector<Entry> walOnly_;
  std::string wal_;
};

TEST_F(CacheWalDamageTest, GivenUndamagedWalOfCrashedWriter_WhenOpened_ThenEveryEntryLoadsAndNothingReportedLost) {
  std::string dir = crashedCopy("intact", wal_);
  EXPECT_EQ(checkAccounted(dir, all()), 0);
  auto reports = CacheStore::openReadOnly(dir)->verifyAll();
  EXPECT_EQ(countStatus(reports, VerifyStatus::Ok), reports.size());
}

// The known bug: SQLite replays the -wal only up to the first frame whose
// checksum fails, silently dropping the later commits, and quick_check says ok.
TEST_F(CacheWalDamageTest, GivenBitFlippedFrameInWal_WhenVerified_ThenEveryDroppedCommitIsReportedLostByName) {
  std::string wal = wal_;
  const size_t middle = wal.size() / 2;
  wal[middle] = static_cast<char>(wal[middle] ^ 0x10);
  std::string dir = crashedCopy("flipped", wal);
  int lost = checkAccounted(dir, all());
  EXPECT_GT(lost, 0) << "a flipped frame in the middle of the -wal drops its commit and the later ones";
  auto store = CacheStore::openReadOnly(dir);
  auto reports = store->verifyAll();
  auto lostByName = lostVariants(reports);
  EXPECT_EQ(lostByName.count("wal=5"), 1u) << "the last commit comes after the damaged frame";
  for (const Entry& e : base_) EXPECT_EQ(lostByName.count(e.variant), 0u) << "checkpointed entries are safe";
  bool summary = false;
  for (const VerifyReport& r : reports) {
    summary |= r.variant.empty() && r.status == VerifyStatus::Lost && r.detail.find("-wal") != std::string::npos;
  }
  EXPECT_TRUE(summary) << "verify must say the database as a whole lost commits";
}

TEST_F(CacheWalDamageTest, GivenBitFlipsSweptOverTheWal_WhenEachDamagedCopyOpened_ThenEveryEntryLoadsIntactOrIsReportedLost) {
  int trials = 0;
  int lostTotal = 0;
  for (size_t offset = 0; offset < wal_.size(); offset += wal_.size() / 24 + 1) {
    std::string wal = wal_;
    wal[offset] = static_cast<char>(wal[offset] ^ 0x01);
    SCOPED_TRACE("flipped -wal byte " + std::to_string(offset));
    int lost = checkAccounted(crashedCopy("sweep" + std::to_string(offset), wal), all());
    lostTotal += lost > 0 ? lost : 0;
    ++trials;
  }
  EXPECT_GE(trials, 20);
  EXPECT_GT(lostTotal, 0);
}

TEST_F(CacheWalDamageTest, GivenWalTruncatedAtManyLengths_WhenOpened_ThenEveryEntryLoadsIntactOrIsReportedLost) {
  for (size_t keep : {size_t{0}, size_t{16}, size_t{32}, wal_.size() / 5, wal_.size() / 2, wal_.size() - 1}) {
    SCOPED_TRACE("-wal cut to " + std::to_string(keep) + " bytes");
    int lost = checkAccounted(crashedCopy("cut" + std::to_string(keep), wal_.substr(0, keep)), all());
    EXPECT_GT(lost, 0);
  }
}

TEST_F(CacheWalDamageTest, GivenWalRemoved_WhenVerified_ThenExactlyTheUncheckpointedEntriesAreReportedLost) {
  std::string dir = crashedCopy("removed", "");
  ::unlink((dir + "/kernels.sqlite-wal").c_str());
  EXPECT_EQ(checkAccounted(dir, all()), 6);
  auto lost = lostVariants(CacheStore::openReadOnly(dir)->verifyAll());
  std::set<std::string> names;
  for (const auto& [variant, detail] : lost) names.insert(variant);
  std::set<std::string> expected;
  for (const Entry& e : walOnly_) expected.insert(e.variant);
  EXPECT_EQ(names, expected);
}

TEST_F(CacheWalDamageTest, GivenLostCommits_WhenTheEntriesArePutAgain_ThenNoLongerReportedAndCommitNumbersAreNotReused) {
  std::string dir = crashedCopy("reput", "");
  ::unlink((dir + "/kernels.sqlite-wal").c_str());
  {
    auto store = CacheStore::open(dir);  // raises commit_seq above the log's numbers
    store->put(walOnly_[0]);
    store->put(walOnly_[1]);
  }
  auto lost = lostVariants(CacheStore::openReadOnly(dir)->verifyAll());
  EXPECT_EQ(lost.size(), 4u);
  EXPECT_EQ(lost.count(walOnly_[0].variant), 0u);
  EXPECT_EQ(lost.count(walOnly_[5].variant), 1u);
  // The lost commits were 5..10; new ones number above them.
  EXPECT_GT(RawDb(dir).queryInt("SELECT min(commit_seq) FROM entries WHERE variant LIKE 'wal=%'"), 10);
}

TEST_F(CacheWalDamageTest, GivenCommitLogPastItsSizeLimit_WhenOpenedReadWrite_ThenSettledLinesDroppedAndLostOnesKept) {
  std::string dir = crashedCopy("compact", "");
  ::unlink((dir + "/kernels.sqlite-wal").c_str());
  // Pad the log with old, settled writes of this store (commit 1: every base entry is newer).
  const std::string storeId = RawDb(dir).queryText("SELECT value FROM meta WHERE key = 'store_id'");
  std::string padding;
  for (int i = 0; padding.size() <= detail::kCompactAtBytes; ++i) {
    padding += detail::encodeCommitRecord({storeId, 1, "put", testFingerprint().key(), kOp, "base=0"});
  }
  writeFile(dir + "/kernels.commits", readFile(dir + "/kernels.commits") + padding);
  CacheStore::open(dir);
  EXPECT_LT(readFile(dir + "/kernels.commits").size(), 4096u);
  auto lost = lostVariants(CacheStore::openReadOnly(dir)->verifyAll());
  EXPECT_EQ(lost.size(), walOnly_.size()) << "lost writes stay in the log until written again";
}

TEST(CacheCorruptionTest, GivenDatabaseFileBitFlippedAtRandomOffsets_WhenOpenedAndRead_ThenNoDamagedEntryLoadsAsValid) {
  TempDir tmp;
  std::vector<Entry> expected = numbered("e=", 12);
  {
    auto store = CacheStore::open(tmp.sub("ref"));
    for (const Entry& e : expected) store->put(e);
  }  // the last close checkpoints everything into the database file
  const std::string ref = readFile(tmp.sub("ref") + "/kernels.sqlite");
  const unsigned seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  std::uniform_int_distribution<size_t> offset(0, ref.size() - 1);
  int refused = 0;
  for (int trial = 0; trial < 40; ++trial) {
    std::string bytes = ref;
    for (int flips = 0; flips < 4; ++flips) bytes[offset(rng)] ^= static_cast<char>(1 << (rng() % 8));
    std::string dir = tmp.sub("t" + std::to_string(trial));
    test::copyStoreFiles(tmp.sub("ref"), dir);
    writeFile(dir + "/kernels.sqlite", bytes);
    refused += checkAccounted(dir, expected) < 0 ? 1 : 0;
  }
  EXPECT_LT(refused, 40) << "most flips hit cubin pages, which the store survives entry by entry";
}

TEST(CacheCorruptionTest, GivenDatabaseFileTruncatedAtPageBoundaries_WhenOpened_ThenRefusedOrEntriesIntact) {
  TempDir tmp;
  std::vector<Entry> expected = numbered("e=", 8);
  {
    auto store = CacheStore::open(tmp.sub("ref"));
    for (const Entry& e : expected) store->put(e);
  }
  const std::string ref = readFile(tmp.sub("ref") + "/kernels.sqlite");
  for (size_t keep = 4096; keep < ref.size(); keep += ref.size() / 8 / 4096 * 4096 + 4096) {
    std::string dir = tmp.sub("cut" + std::to_string(keep));
    test::copyStoreFiles(tmp.sub("ref"), dir);
    writeFile(dir + "/kernels.sqlite", ref.substr(0, keep));
    SCOPED_TRACE("database cut to " + std::to_string(keep));
    checkAccounted(dir, expected);
  }
}

TEST(CacheCorruptionTest, GivenCubinBlobsFlippedTruncatedOrReplaced_WhenListed_ThenOnlyThoseDroppedAndVerifyNamesEach) {
  TempDir tmp;
  std::vector<Entry> expected = numbered("e=", 6);
  auto store = CacheStore::open(tmp.path());
  for (const Entry& e : expected) store->put(e);
  RawDb raw(tmp.path());
  raw.flipCubinByte(kOp, "e=1", 0);
  raw.flipCubinByte(kOp, "e=2", static_cast<int>(cubinBytesFor(2)) - 1);
  raw.exec("UPDATE entries SET cubin = substr(cubin, 1, length(cubin) / 2) WHERE variant = 'e=3'");
  raw.exec("UPDATE entries SET cubin = zeroblob(length(cubin)) WHERE variant = 'e=4'");
  std::set<std::string> loaded;
  for (const Entry& e : store->listForFingerprint(testFingerprint().key())) loaded.insert(e.variant);
  EXPECT_EQ(loaded, (std::set<std::string>{"e=0", "e=5"}));
  std::set<std::string> failed;
  for (const VerifyReport& r : store->verifyAll()) {
    if (r.status == VerifyStatus::HashMismatch) failed.insert(r.variant);
    EXPECT_NE(r.status, VerifyStatus::Lost) << "damaged rows are damaged, not lost";
  }
  EXPECT_EQ(failed, (std::set<std::string>{"e=1", "e=2", "e=3", "e=4"}));
}

TEST(CacheCorruptionTest, GivenCommitLogBitFlippedOrTruncated_WhenOpenedAndVerified_ThenEntriesLoadAndNoFalseLoss) {
  TempDir tmp;
  std::vector<Entry> expected = numbered("e=", 10);
  {
    auto store = CacheStore::open(tmp.sub("ref"));
    for (const Entry& e : expected) store->put(e);
  }
  const std::string log = readFile(tmp.sub("ref") + "/kernels.commits");
  ASSERT_GT(log.size(), 10 * 100u);
  for (size_t at = 0; at < log.size(); at += log.size() / 12 + 1) {
    for (bool truncate : {false, true}) {
      std::string damaged = truncate ? log.substr(0, at) : log;
      if (!truncate) damaged[at] = static_cast<char>(damaged[at] ^ 0x04);
      std::string dir = tmp.sub(std::string(truncate ? "cut" : "flip") + std::to_string(at));
      test::copyStoreFiles(tmp.sub("ref"), dir);
      writeFile(dir + "/kernels.commits", damaged);
      SCOPED_TRACE(dir);
      EXPECT_EQ(checkAccounted(dir, expected), 0);
      for (const VerifyReport& r : CacheStore::open(dir)->verifyAll()) {
        EXPECT_NE(r.status, VerifyStatus::Lost) << r.detail;
      }
    }
  }
}

TEST(CacheCorruptionTest, GivenCommitLogDeleted_WhenVerifiedThenReopenedReadWrite_ThenReportedMissingThenRestarted) {
  TempDir tmp;
  {
    auto store = CacheStore::open(tmp.path());
    store->put(entryFor("e=0", 0));
  }
  ::unlink((tmp.path() + "/kernels.commits").c_str());
  auto reports = CacheStore::openReadOnly(tmp.path())->verifyAll();
  bool missing = false;
  for (const VerifyReport& r : reports) missing |= r.detail.find("kernels.commits is missing") != std::string::npos;
  EXPECT_TRUE(missing);
  auto store = CacheStore::open(tmp.path());
  auto after = store->verifyAll();
  EXPECT_EQ(countStatus(after, VerifyStatus::Ok), after.size());
  EXPECT_EQ(test::modeOf(store->commitLogPath()), 0600u);
}

TEST(CacheCorruptionTest, GivenCommitLogLeftByADeletedDatabase_WhenNewDatabaseCreated_ThenItsLinesAreNotTakenAsLosses) {
  TempDir tmp;
  {
    auto store = CacheStore::open(tmp.path());
    for (const Entry& e : numbered("old=", 5)) store->put(e);
  }
  // What the refusal messages advise for a damaged database: remove it.
  ::unlink(CacheStore::databasePathFor(tmp.path()).c_str());
  auto store = CacheStore::open(tmp.path());
  store->put(entryFor("new=0", 0));
  auto reports = store->verifyAll();
  EXPECT_EQ(countStatus(reports, VerifyStatus::Ok), reports.size());
  EXPECT_EQ(reports.size(), 1u);
}

}  // namespace
}  // namespace hotkernel::cache::fault
