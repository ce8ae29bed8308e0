// CacheStore under damage and contention: corrupt, truncated, foreign and
// newer databases; many writers at once (processes and threads); a write
// that fails because the file may not grow (disk full).

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <thread>

#include "CacheTestUtil.h"
#include "hotkernel/cache/CacheStore.h"
#include "hotkernel/runtime/Check.h"

namespace hotkernel::cache {
namespace {

using test::kernelEntry;
using test::RawDb;
using test::readFile;
using test::TempDir;
using test::writeFile;

const std::string kOp = "aten::_softmax";

std::string openError(const std::string& dir, bool readOnly = false) {
  try {
    if (readOnly) {
      CacheStore::openReadOnly(dir);
    } else {
      CacheStore::open(dir);
    }
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// Fills `dir` with a few entries and leaves the database checkpointed (no WAL).
void fillAndClose(const std::string& dir, int entries, size_t cubinBytes = 3000) {
  auto store = CacheStore::open(dir);
  for (int i = 0; i < entries; ++i)
    store->put(kernelEntry(kOp, "v=" + std::to_string(i), test::testFingerprint(), cubinBytes));
}

TEST(CacheStoreRobustnessTest, GivenGarbageDatabaseFileWhenOpenThenClearErrorAndFileUntouched) {
  TempDir tmp;
  std::string db = CacheStore::databasePathFor(tmp.path());
  std::string garbage(8192, '\0');
  for (size_t i = 0; i < garbage.size(); ++i) garbage[i] = static_cast<char>(i * 7 + 3);
  writeFile(db, garbage);
  ::chmod(db.c_str(), 0600);
  std::string error = openError(tmp.path());
  EXPECT_NE(error.find("is damaged or not a hotkernel cache"), std::string::npos) << error;
  EXPECT_NE(openError(tmp.path(), /*readOnly=*/true).find("is damaged"), std::string::npos);
  EXPECT_EQ(readFile(db), garbage);
}

TEST(CacheStoreRobustnessTest, GivenTruncatedDatabaseWhenOpenThenClearError) {
  TempDir tmp;
  fillAndClose(tmp.path(), 40);
  std::string db = CacheStore::databasePathFor(tmp.path());
  std::string full = readFile(db);
  ASSERT_GT(full.size(), 64 * 1024u);
  for (size_t keep : {full.size() / 2, size_t{4096}, size_t{1000}, size_t{50}}) {
    writeFile(db, full.substr(0, keep));
    std::string error = openError(tmp.path());
    EXPECT_TRUE(error.find("truncated") != std::string::npos || error.find("is damaged") != std::string::npos)
        << "kept " << keep << " bytes: " << error;
    EXPECT_EQ(readFile(db).size(), keep) << "refused file was modified";
  }
}

TEST(CacheStoreRobustnessTest, GivenDamagedPagesWhenVerifyAllThenFailureReportedWithoutCrash) {
  TempDir tmp;
  fillAndClose(tmp.path(), 40);
  std::string db = CacheStore::databasePathFor(tmp.path());
  std::string bytes = readFile(db);
  // Overwrite pages 2.. (b-tree and overflow pages) but keep the header page intact.
  for (size_t i = 4096; i < bytes.size(); i += 97) bytes[i] = static_cast<char>(bytes[i] ^ 0x5a);
  writeFile(db, bytes);
  std::unique_ptr<CacheStore> store;
  try {
    store = CacheStore::open(tmp.path());
  } catch (const Error& e) {
    SUCCEED() << "refused at open: " << e.what();
    return;
  }
  auto reports = store->verifyAll();
  bool anyFailure = false;
  for (const auto& r : reports) anyFailure |= r.status != VerifyStatus::Ok;
  EXPECT_TRUE(anyFailure);
}

TEST(CacheStoreRobustnessTest, GivenNewerFormatVersionWhenOpenThenRefusedAndFileUntouched) {
  TempDir tmp;
  fillAndClose(tmp.path(), 2);
  RawDb(tmp.path()).exec("PRAGMA user_version = 4; PRAGMA wal_checkpoint(TRUNCATE)");
  std::string db = CacheStore::databasePathFor(tmp.path());
  std::string before = readFile(db);
  std::string error = openError(tmp.path());
  EXPECT_NE(error.find("has format version 4, newer than this hotkernel"), std::string::npos) << error;
  EXPECT_NE(openError(tmp.path(), /*readOnly=*/true).find("format version 4"), std::string::npos);
  EXPECT_EQ(readFile(db), before);
  EXPECT_EQ(RawDb(tmp.path()).queryInt("SELECT count(*) FROM entries"), 2);
}

TEST(CacheStoreRobustnessTest, GivenForeignSqliteDatabaseWhenOpenThenRefusedAndUntouched) {
  TempDir tmp;
  {
    std::string db = CacheStore::databasePathFor(tmp.path());
    sqlite3* raw = nullptr;
    ASSERT_EQ(sqlite3_open(db.c_str(), &raw), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(raw, "CREATE TABLE notes(x); INSERT INTO notes VALUES ('mine')", nullptr, nullptr, nullptr),
              SQLITE_OK);
    sqlite3_close(raw);
    ::chmod(db.c_str(), 0600);
  }
  std::string error = openError(tmp.path());
  EXPECT_NE(error.find("is not a hotkernel cache"), std::string::npos) << error;
  RawDb raw(tmp.path());
  EXPECT_EQ(raw.queryText("SELECT x FROM notes"), "mine");
  EXPECT_EQ(raw.queryText("PRAGMA journal_mode"), "delete");  // not switched to WAL either
}

TEST(CacheStoreRobustnessTest, GivenMetaDisagreeingWithHeaderWhenOpenThenRefused) {
  TempDir tmp;
  fillAndClose(tmp.path(), 1);
  RawDb(tmp.path()).exec("UPDATE meta SET value = '7' WHERE key = 'format_version'");
  EXPECT_NE(openError(tmp.path()).find("records format version '7'"), std::string::npos);
  RawDb(tmp.path()).exec("DROP TABLE meta");
  EXPECT_NE(openError(tmp.path()).find("no such table: meta"), std::string::npos) << openError(tmp.path());
}

TEST(CacheStoreRobustnessTest, GivenEmptyDatabaseFileWhenOpenThenInitializedButReadOnlyRefuses) {
  TempDir tmp;
  std::string db = CacheStore::databasePathFor(tmp.path());
  writeFile(db, "");
  ::chmod(db.c_str(), 0600);
  EXPECT_NE(openError(tmp.path(), /*readOnly=*/true).find("is empty"), std::string::npos);
  EXPECT_EQ(openError(tmp.path()), "");
  EXPECT_NE(CacheStore::openReadOnly(tmp.path()), nullptr);
}

// Rewrites a format-3 store in `dir` into exactly what format 1 wrote: no
// commit_seq column, no store_id / commit_seq meta rows, no commit log.
void downgradeToFormat1(const std::string& dir) {
  RawDb raw(dir);
  raw.exec(
      "BEGIN;"
      "CREATE TABLE entries_v1 (fingerprint TEXT NOT NULL, op TEXT NOT NULL, variant TEXT NOT NULL, "
      "fingerprint_json TEXT NOT NULL, decision TEXT NOT NULL, family TEXT NOT NULL, params TEXT NOT NULL, "
      "kernel_name TEXT NOT NULL, cubin_sha256 TEXT NOT NULL, metrics TEXT NOT NULL, created_unix INTEGER NOT NULL, "
      "record_sha256 TEXT NOT NULL, cubin BLOB NOT NULL, PRIMARY KEY (fingerprint, op, variant));"
      "INSERT INTO entries_v1 SELECT fingerprint, op, variant, fingerprint_json, decision, family, params, "
      "kernel_name, cubin_sha256, metrics, created_unix, record_sha256, cubin FROM entries;"
      "DROP TABLE entries; ALTER TABLE entries_v1 RENAME TO entries;"
      "DELETE FROM meta WHERE key IN ('store_id', 'commit_seq');"
      "UPDATE meta SET value = '1' WHERE key = 'format_version';"
      "PRAGMA user_version = 1; COMMIT; PRAGMA wal_checkpoint(TRUNCATE)");
  ::unlink((CacheStore::absoluteDirectory(dir) + "/kernels.commits").c_str());
}

TEST(CacheStoreRobustnessTest, GivenFormatOneStoreWhenOpenedReadOnlyThenReadAsIsAndUntouched) {
  TempDir tmp;
  fillAndClose(tmp.path(), 3);
  downgradeToFormat1(tmp.path());
  std::string before = readFile(CacheStore::databasePathFor(tmp.path()));
  auto store = CacheStore::openReadOnly(tmp.path());
  ASSERT_NE(store, nullptr);
  EXPECT_TRUE(store->get(test::testFingerprint().key(), kOp, "v=2").has_value());
  auto reports = store->verifyAll();
  EXPECT_EQ(reports.size(), 3u);
  for (const auto& r : reports) EXPECT_EQ(r.status, VerifyStatus::Ok) << r.detail;
  store.reset();
  EXPECT_EQ(readFile(CacheStore::databasePathFor(tmp.path())), before);
}

TEST(CacheStoreRobustnessTest, GivenFormatOneStoreWhenOpenedReadWriteThenMigratedToFormatThreeWithEntriesKept) {
  TempDir tmp;
  fillAndClose(tmp.path(), 3);
  downgradeToFormat1(tmp.path());
  auto store = CacheStore::open(tmp.path());
  RawDb raw(tmp.path());
  EXPECT_EQ(raw.queryInt("PRAGMA user_version"), 3);
  EXPECT_EQ(raw.queryText("SELECT value FROM meta WHERE key = 'format_version'"), "3");
  EXPECT_EQ(raw.queryInt("SELECT count(*) FROM entries WHERE commit_seq = 0 AND signature = ''"), 3);
  // commit_seq and signature sit before cubin, as in a store created with format 3.
  EXPECT_EQ(raw.queryText("SELECT name FROM pragma_table_info('entries') ORDER BY cid DESC LIMIT 1"), "cubin");
  EXPECT_EQ(test::modeOf(store->commitLogPath()), 0600u);
  store->put(kernelEntry(kOp, "after"));
  EXPECT_EQ(raw.queryInt("SELECT commit_seq FROM entries WHERE variant = 'after'"), 1);
  auto reports = store->verifyAll();
  EXPECT_EQ(reports.size(), 4u);
  for (const auto& r : reports) EXPECT_EQ(r.status, VerifyStatus::Ok) << r.detail;
}

// Rewrites a format-3 store in `dir` into exactly what format 2 wrote: no
// signature column (the commit log and meta rows stay).
void downgradeToFormat2(const std::string& dir) {
  RawDb raw(dir);
  raw.exec(
      "BEGIN;"
      "CREATE TABLE entries_v2 (fingerprint TEXT NOT NULL, op TEXT NOT NULL, variant TEXT NOT NULL, "
      "fingerprint_json TEXT NOT NULL, decision TEXT NOT NULL, family TEXT NOT NULL, params TEXT NOT NULL, "
      "kernel_name TEXT NOT NULL, cubin_sha256 TEXT NOT NULL, metrics TEXT NOT NULL, created_unix INTEGER NOT NULL, "
      "record_sha256 TEXT NOT NULL, commit_seq INTEGER NOT NULL, cubin BLOB NOT NULL, "
      "PRIMARY KEY (fingerprint, op, variant));"
      "INSERT INTO entries_v2 SELECT fingerprint, op, variant, fingerprint_json, decision, family, params, "
      "kernel_name, cubin_sha256, metrics, created_unix, record_sha256, commit_seq, cubin FROM entries;"
      "DROP TABLE entries; ALTER TABLE entries_v2 RENAME TO entries;"
      "UPDATE meta SET value = '2' WHERE key = 'format_version';"
      "PRAGMA user_version = 2; COMMIT; PRAGMA wal_checkpoint(TRUNCATE)");
}

TEST(CacheStoreRobustnessTest, GivenFormatTwoStoreWhenOpenedReadOnlyThenReadAsIsUnsignedAndUntouched) {
  TempDir tmp;
  fillAndClose(tmp.path(), 3);
  downgradeToFormat2(tmp.path());
  std::string before = readFile(CacheStore::databasePathFor(tmp.path()));
  auto store = CacheStore::openReadOnly(tmp.path(), EntryTrust::none());
  ASSERT_NE(store, nullptr);
  EXPECT_TRUE(store->get(test::testFingerprint().key(), kOp, "v=2").has_value());
  EXPECT_EQ(store->listForFingerprint(test::testFingerprint().key()).size(), 3u);
  for (const auto& r : store->verifyAll()) EXPECT_EQ(r.status, VerifyStatus::Ok) << r.detail;
  store.reset();
  EXPECT_EQ(readFile(CacheStore::databasePathFor(tmp.path())), before);
}

TEST(CacheStoreRobustnessTest, GivenFormatTwoStoreWhenOpenedReadWriteWithoutKeyThenMigratedAndRowsStillLoad) {
  TempDir tmp;
  fillAndClose(tmp.path(), 3);
  const int64_t seqBefore = RawDb(tmp.path()).queryInt("SELECT max(commit_seq) FROM entries");
  downgradeToFormat2(tmp.path());
  auto store = CacheStore::open(tmp.path(), EntryTrust::none());
  RawDb raw(tmp.path());
  EXPECT_EQ(raw.queryInt("PRAGMA user_version"), 3);
  EXPECT_EQ(raw.queryText("SELECT value FROM meta WHERE key = 'format_version'"), "3");
  EXPECT_EQ(raw.queryInt("SELECT count(*) FROM entries WHERE signature = ''"), 3);
  EXPECT_EQ(raw.queryInt("SELECT max(commit_seq) FROM entries"), seqBefore);  // kept, not reset to 0
  EXPECT_EQ(raw.queryText("SELECT name FROM pragma_table_info('entries') ORDER BY cid DESC LIMIT 1"), "cubin");
  EXPECT_EQ(store->listForFingerprint(test::testFingerprint().key()).size(), 3u);
  auto reports = store->verifyAll();
  EXPECT_EQ(reports.size(), 3u);  // no lost commits: the log still matches
  for (const auto& r : reports) EXPECT_EQ(r.status, VerifyStatus::Ok) << r.detail;
}

// Note [Concurrency tests]
// Each child opens its own store on a directory that does not exist yet, so
// creation, schema set-up and the WAL switch race as well as the puts.
TEST(CacheStoreRobustnessTest, GivenSeveralProcessesWritingAtOnceWhenAllDoneThenEveryEntryLands) {
  TempDir tmp;
  std::string dir = tmp.sub("shared");
  constexpr int kProcesses = 6;
  constexpr int kPutsEach = 25;
  std::vector<pid_t> children;
  for (int p = 0; p < kProcesses; ++p) {
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      int rc = 0;
      try {
        auto store = CacheStore::open(dir);
        for (int i = 0; i < kPutsEach; ++i) {
          store->put(kernelEntry(kOp, "p=" + std::to_string(p) + ";i=" + std::to_string(i)));
          if (i % 5 == 0) store->listMetadata();  // readers interleave with writers
        }
      } catch (const std::exception& e) {
        std::fprintf(stderr, "child %d: %s\n", p, e.what());
        rc = 1;
      }
      ::_exit(rc);
    }
    children.push_back(pid);
  }
  for (pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child failed, status " << status;
  }
  auto store = CacheStore::open(dir);
  EXPECT_EQ(store->listMetadata().size(), static_cast<size_t>(kProcesses * kPutsEach));
  for (const auto& r : store->verifyAll()) EXPECT_EQ(r.status, VerifyStatus::Ok) << r.variant << ": " << r.detail;
}

TEST(CacheStoreRobustnessTest, GivenThreadsWithOwnAndSharedStoresWhenWritingThenEveryEntryLands) {
  TempDir tmp;
  auto shared = CacheStore::open(tmp.path());
  constexpr int kThreads = 8;
  constexpr int kPutsEach = 20;
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      try {
        // Even threads share one store (its mutex), odd ones have their own connection (SQLite locking).
        std::unique_ptr<CacheStore> own = (t % 2) ? CacheStore::open(tmp.path()) : nullptr;
        CacheStore& store = own ? *own : *shared;
        for (int i = 0; i < kPutsEach; ++i) {
          Entry e = kernelEntry(kOp, "t=" + std::to_string(t) + ";i=" + std::to_string(i));
          store.put(e);
          if (!store.get(e.fingerprint, e.op, e.variant)) failures++;
        }
      } catch (const std::exception& e) {
        ADD_FAILURE() << "thread " << t << ": " << e.what();
        failures++;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(shared->listMetadata().size(), static_cast<size_t>(kThreads * kPutsEach));
}

TEST(CacheStoreRobustnessTest, GivenFileSizeLimitWhenPutLargeCubinThenThrowsAndDatabaseStaysConsistent) {
  TempDir tmp;
  fillAndClose(tmp.path(), 3);
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    // Child: any write past 256 KiB fails with EFBIG, as on a full disk.
    ::signal(SIGXFSZ, SIG_IGN);
    int rc = 0;
    try {
      auto store = CacheStore::open(tmp.path());
      struct rlimit limit;
      ::getrlimit(RLIMIT_FSIZE, &limit);
      struct rlimit small = limit;
      small.rlim_cur = 256 * 1024;
      ::setrlimit(RLIMIT_FSIZE, &small);
      bool threw = false;
      try {
        store->put(kernelEntry(kOp, "big", test::testFingerprint(), 2 * 1024 * 1024));
      } catch (const Error& e) {
        threw = std::string(e.what()).find("failed") != std::string::npos;
        if (!threw) std::fprintf(stderr, "unexpected message: %s\n", e.what());
      }
      if (!threw) rc = 2;
      ::setrlimit(RLIMIT_FSIZE, &limit);
      // The same store keeps working once space is back.
      if (rc == 0 && store->get(test::testFingerprint().key(), kOp, "v=0")) {
        store->put(kernelEntry(kOp, "after"));
      } else if (rc == 0) {
        rc = 3;
      }
    } catch (const std::exception& e) {
      std::fprintf(stderr, "child: %s\n", e.what());
      rc = 4;
    }
    ::_exit(rc);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << "child died, status " << status;
  ASSERT_EQ(WEXITSTATUS(status), 0);

  RawDb raw(tmp.path());
  EXPECT_EQ(raw.queryText("PRAGMA integrity_check"), "ok");
  auto store = CacheStore::open(tmp.path());
  auto fp = test::testFingerprint().key();
  EXPECT_FALSE(store->get(fp, kOp, "big").has_value());
  EXPECT_TRUE(store->get(fp, kOp, "after").has_value());
  EXPECT_EQ(store->listMetadata().size(), 4u);
  for (const auto& r : store->verifyAll()) EXPECT_EQ(r.status, VerifyStatus::Ok) << r.detail;
}

}  // namespace
}  // namespace hotkernel::cache
