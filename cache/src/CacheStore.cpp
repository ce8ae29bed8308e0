// Writes and reads the cache database. Its byte format (tables, columns,
// pragmas, version rules) is Note [Cache database format, version 2] at the
// top of Schema.cpp; the record digest stored with each row is
// Note [Record digest, format v1] in EntryRecord.h; the commit log beside the
// database is Note [Commit log format, version 1] in CommitLog.h.

#include "hotkernel/cache/CacheStore.h"

#include <sys/stat.h>

#include <algorithm>
#include <ctime>
#include <map>
#include <tuple>
#include <utility>

#include "CommitLog.h"
#include "EntryRecord.h"
#include "SafePath.h"
#include "Schema.h"
#include "Sqlite.h"
#include "hotkernel/runtime/Check.h"
#include "hotkernel/runtime/Hash.h"
#include "hotkernel/runtime/Logging.h"

namespace hotkernel::cache {
namespace {

using detail::Database;
using detail::Statement;
using detail::CommitLogContents;
using detail::CommitRecord;
using detail::WriteTransaction;

// Column order of readRow; cubin (optional) comes last, see the schema note.
constexpr const char* kMetadataColumns =
    "fingerprint, op, variant, fingerprint_json, decision, family, params, kernel_name, cubin_sha256, metrics, "
    "created_unix, record_sha256, length(cubin)";

struct StoredRow {
  Entry entry;
  std::string recordSha256;
};

StoredRow readRow(const Statement& st, bool withCubin) {
  StoredRow row;
  Entry& e = row.entry;
  e.fingerprint = st.text(0);
  e.op = st.text(1);
  e.variant = st.text(2);
  e.fingerprintJson = st.text(3);
  e.decision = st.text(4);
  e.family = st.text(5);
  e.params = st.text(6);
  e.kernelName = st.text(7);
  e.cubinSha256 = st.text(8);
  e.metrics = st.text(9);
  e.createdUnix = st.integer(10);
  row.recordSha256 = st.text(11);
  e.cubinBytes = st.integer(12);
  if (withCubin) e.cubin = st.blob(13);
  return row;
}

// " WHERE a = ?1 AND b = ?2" for the parts of `filter` that are set.
struct WhereClause {
  std::string sql;
  std::vector<std::string> values;
  void bind(Statement& st) const {
    for (size_t i = 0; i < values.size(); ++i) st.bindText(static_cast<int>(i + 1), values[i]);
  }
};

WhereClause whereFor(const EntryFilter& filter) {
  WhereClause w;
  auto add = [&w](const char* column, const std::optional<std::string>& value) {
    if (!value) return;
    w.sql += w.values.empty() ? " WHERE " : " AND ";
    w.sql += column;
    w.sql += " = ?" + std::to_string(w.values.size() + 1);
    w.values.push_back(*value);
  };
  add("fingerprint", filter.fingerprint);
  add("op", filter.op);
  add("variant", filter.variant);
  return w;
}

// A database file's size is a whole number of pages (at least 512 bytes each).
// SQLite itself refuses a file shorter than its header says, except one cut
// inside the header, which it would take for an empty database.
void checkNotTruncated(const std::string& dbPath) {
  struct stat st;
  if (::stat(dbPath.c_str(), &st) != 0) {
    HOTKERNEL_THROW("cannot inspect cache database ", dbPath);
  }
  if (st.st_size % 512 != 0) {
    HOTKERNEL_THROW("cache database ", dbPath, " is truncated or damaged (", st.st_size,
                    " bytes is not a whole number of pages); remove it to start an empty cache");
  }
}

using Key = std::tuple<std::string, std::string, std::string>;  // (fingerprint, op, variant)

bool matches(const EntryFilter& f, const CommitRecord& r) {
  return (!f.fingerprint || *f.fingerprint == r.fingerprint) && (!f.op || *f.op == r.op) &&
         (!f.variant || *f.variant == r.variant);
}

int64_t metaInt(Database& db, const char* key) {
  Statement st(db, std::string("SELECT CAST(value AS INTEGER) FROM meta WHERE key = '") + key + "'", "read meta");
  if (!st.step()) {
    HOTKERNEL_THROW("cache database ", db.path(), " lacks its meta record '", key, "'");
  }
  return st.integer(0);
}

std::string metaText(Database& db, const char* key) {
  Statement st(db, std::string("SELECT value FROM meta WHERE key = '") + key + "'", "read meta");
  if (!st.step()) {
    HOTKERNEL_THROW("cache database ", db.path(), " lacks its meta record '", key, "'");
  }
  return st.text(0);
}

// The next commit number, stored in meta. Precondition: inside a write transaction.
int64_t nextCommitSeq(Database& db) {
  db.exec("UPDATE meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'commit_seq'", "count commit");
  return metaInt(db, "commit_seq");
}

// The latest record per key of this store's commits in `log`, those matching `filter`.
std::map<Key, CommitRecord> latestCommits(const CommitLogContents& log, const std::string& storeId,
                                          const EntryFilter& filter) {
  std::map<Key, CommitRecord> latest;
  for (const CommitRecord& r : log.records) {
    if (r.store != storeId || !matches(filter, r)) continue;
    auto [it, inserted] = latest.try_emplace(Key{r.fingerprint, r.op, r.variant}, r);
    if (!inserted && r.seq > it->second.seq) it->second = r;
  }
  return latest;
}

// What the database lacks of `latest` (Note [Commits lost with the WAL]): one
// report per key. `latest` must have been read from the log before this call.
std::vector<VerifyReport> findLost(Database& db, const std::map<Key, CommitRecord>& latest) {
  std::vector<VerifyReport> out;
  if (latest.empty()) return out;
  Statement st(db, "SELECT commit_seq FROM entries WHERE fingerprint = ?1 AND op = ?2 AND variant = ?3",
               "check committed entries");
  for (const auto& [key, r] : latest) {
    st.bindText(1, r.fingerprint);
    st.bindText(2, r.op);
    st.bindText(3, r.variant);
    const bool present = st.step();
    const int64_t rowSeq = present ? st.integer(0) : -1;
    st.reset();
    VerifyReport report;
    report.fingerprint = r.fingerprint;
    report.op = r.op;
    report.variant = r.variant;
    report.status = VerifyStatus::Lost;
    const std::string commit = "commit " + std::to_string(r.seq);
    if (r.kind == "put" && !present) {
      report.detail = "stored by " + commit + " but missing from the database";
    } else if (r.kind == "put" && rowSeq < r.seq) {
      report.detail = "stored by " + commit + " but the database holds an older version (commit " +
                      std::to_string(rowSeq) + ")";
    } else if (r.kind == "remove" && present && rowSeq <= r.seq) {
      report.detail = "removed by " + commit + " but back in the database (its version of commit " +
                      std::to_string(rowSeq) + ")";
    } else {
      continue;
    }
    out.push_back(std::move(report));
  }
  return out;
}

void logRefusal(const std::string& dbPath, const VerifyReport& r) {
  HOTKERNEL_LOG_ONCE(Warn, "cache-refused:" + dbPath + "|" + r.fingerprint + "|" + r.op + "|" + r.variant)
      << "refusing cache entry op=" << r.op << " variant=" << r.variant << " fingerprint=" << r.fingerprint << " in "
      << dbPath << ": " << toString(r.status) << ": " << r.detail
      << "; the original kernel is used instead (see `hotkernel cache verify`)";
}

}  // namespace

std::string CacheStore::absoluteDirectory(const std::string& dir) { return detail::absolutePath(dir); }

std::string CacheStore::databasePathFor(const std::string& dir) {
  return detail::absolutePath(dir) + "/" + kDatabaseFileName;
}

std::unique_ptr<CacheStore> CacheStore::open(const std::string& dir) { return openImpl(dir, /*readOnly=*/false); }

std::unique_ptr<CacheStore> CacheStore::openReadOnly(const std::string& dir) {
  return openImpl(dir, /*readOnly=*/true);
}

std::unique_ptr<CacheStore> CacheStore::openImpl(const std::string& dir, bool readOnly) {
  std::string absDir = detail::absolutePath(dir);
  std::string dbPath = absDir + "/" + kDatabaseFileName;
  // Note [Opening order]
  // Directory first (created 0700 if missing), then the database file, which
  // we create ourselves with 0600 so that SQLite never creates it with the
  // umask's mode (it gives -wal/-shm the mode of the database). Only then does
  // SQLite see the file, and it opens it with O_NOFOLLOW.
  if (readOnly) {
    if (!detail::checkPrivateDirectory(absDir) || !detail::checkPrivateFile(dbPath)) return nullptr;
  } else {
    detail::ensurePrivateDirectory(absDir);
    detail::ensurePrivateFile(dbPath);
  }
  detail::checkPrivateFile(dbPath + "-wal");
  detail::checkPrivateFile(dbPath + "-shm");
  detail::checkPrivateFile(absDir + "/" + detail::kCommitLogFileName);
  checkNotTruncated(dbPath);
  std::unique_ptr<Database> db = Database::open(dbPath, readOnly);
  const int formatVersion = detail::prepareSchema(*db, readOnly);
  std::string storeId = formatVersion >= 2 ? metaText(*db, "store_id") : std::string();
  std::unique_ptr<CacheStore> store(new CacheStore(std::move(absDir), std::move(dbPath), readOnly, std::move(db),
                                                   formatVersion, std::move(storeId)));
  if (!readOnly) {
    try {
      store->reconcileCommitLog();
    } catch (const Error& e) {
      // The store works without its log; only the detection of lost commits suffers.
      HOTKERNEL_LOG_ONCE(Warn, "cache-commit-log:" + store->dbPath_) << e.what();
    }
  }
  return store;
}

CacheStore::CacheStore(std::string dir, std::string dbPath, bool readOnly, std::unique_ptr<detail::Database> db,
                       int formatVersion, std::string storeId)
    : dir_(std::move(dir)),
      dbPath_(std::move(dbPath)),
      commitLogPath_(dir_ + "/" + detail::kCommitLogFileName),
      readOnly_(readOnly),
      formatVersion_(formatVersion),
      storeId_(std::move(storeId)),
      db_(std::move(db)) {}

void CacheStore::reconcileCommitLog() {
  std::lock_guard<std::mutex> guard(mu_);
  CommitLogContents log = detail::readCommitLog(commitLogPath_);  // before any database read
  if (!log.exists) {
    const int64_t seq = metaInt(*db_, "commit_seq");
    if (seq > 0) {
      HOTKERNEL_LOG_ONCE(Warn, "cache-no-commit-log:" + dbPath_)
          << "cache commit log " << commitLogPath_ << " is missing; starting a new one (commits up to " << seq
          << " cannot be checked for loss)";
    }
    detail::appendCommitRecords(commitLogPath_, {});
    detail::checkPrivateFile(commitLogPath_);
    return;
  }
  if (!log.readable) {
    HOTKERNEL_LOG_ONCE(Warn, "cache-bad-commit-log:" + dbPath_)
        << "cache commit log " << commitLogPath_ << " is unreadable (" << log.problem
        << "); lost commits cannot be detected; remove it to start a new one";
    return;
  }
  const std::map<Key, CommitRecord> latest = latestCommits(log, storeId_, EntryFilter{});
  const std::vector<VerifyReport> lost = findLost(*db_, latest);
  if (!lost.empty()) {
    HOTKERNEL_LOG_ONCE(Warn, "cache-lost:" + dbPath_)
        << "cache " << dbPath_ << " lost " << lost.size() << (lost.size() == 1 ? " committed entry" : " committed entries")
        << " (e.g. op=" << lost.front().op << " variant=" << lost.front().variant
        << ") that its commit log records: its -wal file was damaged or removed; they will be measured again "
           "(see `hotkernel cache verify`)";
  }
  // New commits must number above every logged one (Note [Commits lost with the WAL]).
  int64_t highest = 0;
  for (const auto& [key, r] : latest) highest = std::max(highest, r.seq);
  if (highest > metaInt(*db_, "commit_seq")) {
    WriteTransaction tx(*db_);
    Statement st(*db_,
                 "UPDATE meta SET value = ?1 WHERE key = 'commit_seq' AND CAST(value AS INTEGER) < ?1",
                 "raise commit number");
    st.bindInt(1, highest);
    st.step();
    tx.commit();
  }
  struct stat st;
  if (::stat(commitLogPath_.c_str(), &st) == 0 && static_cast<size_t>(st.st_size) > detail::kCompactAtBytes) {
    // Lines up to `settled` may go once the database file (not only the -wal) holds that commit.
    const int64_t settled = metaInt(*db_, "commit_seq");
    if (!db_->checkpointPassive()) return;  // readers hold the -wal: compact at a later open
    std::map<Key, bool> lostKeys;
    for (const VerifyReport& r : lost) lostKeys[Key{r.fingerprint, r.op, r.variant}] = true;
    try {
      detail::compactCommitLog(commitLogPath_, [&](const CommitRecord& r) {
        return r.store == storeId_ && (r.seq > settled || lostKeys.count(Key{r.fingerprint, r.op, r.variant}) > 0);
      });
    } catch (const Error& e) {
      HOTKERNEL_LOG_ONCE(Warn, "cache-compact:" + dbPath_) << e.what();
    }
  }
}

void CacheStore::logCommit(int64_t seq, const char* kind, const std::vector<Entry>& keys) const {
  if (formatVersion_ < 2 || keys.empty()) return;
  std::vector<CommitRecord> records;
  for (const Entry& e : keys) records.push_back(CommitRecord{storeId_, seq, kind, e.fingerprint, e.op, e.variant});
  try {
    detail::appendCommitRecords(commitLogPath_, records);
  } catch (const Error& e) {
    HOTKERNEL_LOG_ONCE(Warn, "cache-commit-log-append:" + dbPath_)
        << e.what() << "; the entry is stored, but its loss could not be detected later";
  }
}

std::vector<VerifyReport> CacheStore::lostReports(const EntryFilter& filter) const {
  std::vector<VerifyReport> out;
  if (formatVersion_ < 2) return out;
  CommitLogContents log = detail::readCommitLog(commitLogPath_);  // before any database read
  auto databaseReport = [&out](VerifyStatus status, std::string detail) {
    VerifyReport r;
    r.status = status;
    r.detail = std::move(detail);
    out.push_back(std::move(r));
  };
  if (!log.exists || !log.readable) {
    databaseReport(VerifyStatus::Malformed,
                   "commit log " + commitLogPath_ + (log.exists ? " is unreadable (" + log.problem + ")" : " is missing") +
                       ": committed entries lost with the -wal cannot be detected");
    return out;
  }
  std::vector<VerifyReport> lost = findLost(*db_, latestCommits(log, storeId_, filter));
  if (lost.empty()) return out;
  const int64_t seq = metaInt(*db_, "commit_seq");
  databaseReport(VerifyStatus::Lost,
                 "database: " + std::to_string(lost.size()) +
                     (lost.size() == 1 ? " committed entry is" : " committed entries are") +
                     " missing (listed as lost; the commit log records them, the database ends at commit " +
                     std::to_string(seq) +
                     "): its write-ahead log (-wal) was damaged, truncated or removed, or the database file was "
                     "replaced by an older copy" +
                     (log.damagedLines ? "; " + std::to_string(log.damagedLines) + " damaged commit log lines skipped"
                                       : std::string()));
  out.insert(out.end(), std::make_move_iterator(lost.begin()), std::make_move_iterator(lost.end()));
  return out;
}

CacheStore::~CacheStore() = default;

void CacheStore::put(const Entry& entry) {
  if (readOnly_) {
    HOTKERNEL_THROW("cache ", dbPath_, " was opened read-only; cannot store op=", entry.op);
  }
  Entry e = entry;
  e.cubinSha256 = sha256Hex(e.cubin);
  e.cubinBytes = static_cast<int64_t>(e.cubin.size());
  if (e.createdUnix == 0) e.createdUnix = static_cast<int64_t>(std::time(nullptr));
  detail::checkPuttable(e);
  const std::string record = detail::recordDigest(e);

  std::lock_guard<std::mutex> guard(mu_);
  WriteTransaction tx(*db_);
  const int64_t seq = nextCommitSeq(*db_);
  Statement st(*db_,
               "INSERT OR REPLACE INTO entries (fingerprint, op, variant, fingerprint_json, decision, family, params, "
               "kernel_name, cubin_sha256, metrics, created_unix, record_sha256, commit_seq, cubin) "
               "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)",
               "store entry");
  int i = 1;
  for (const std::string* text : {&e.fingerprint, &e.op, &e.variant, &e.fingerprintJson, &e.decision, &e.family,
                                  &e.params, &e.kernelName, &e.cubinSha256, &e.metrics}) {
    st.bindText(i++, *text);
  }
  st.bindInt(i++, e.createdUnix);
  st.bindText(i++, record);
  st.bindInt(i++, seq);
  st.bindBlob(i++, e.cubin);
  st.step();
  tx.commit();
  logCommit(seq, "put", {e});
  // Note [Checkpoint after put]
  // Copies the commit into the database file now (unless a reader's snapshot
  // still needs the -wal as it is), so it does not live in the -wal alone
  // until SQLite's size-based auto-checkpoint: damage to the -wal then costs
  // nothing. Puts are rare (one per tuned variant), the copy is small.
  db_->checkpointPassive();
}

std::optional<Entry> CacheStore::get(const std::string& fingerprint, const std::string& op,
                                     const std::string& variant) const {
  std::lock_guard<std::mutex> guard(mu_);
  Statement st(*db_,
               std::string("SELECT ") + kMetadataColumns +
                   ", cubin FROM entries WHERE fingerprint = ?1 AND op = ?2 AND variant = ?3",
               "read entry");
  st.bindText(1, fingerprint);
  st.bindText(2, op);
  st.bindText(3, variant);
  if (!st.step()) return std::nullopt;
  StoredRow row = readRow(st, /*withCubin=*/true);
  VerifyReport report = detail::verifyStored(row.entry, row.recordSha256);
  if (report.status != VerifyStatus::Ok) {
    logRefusal(dbPath_, report);
    return std::nullopt;
  }
  return std::move(row.entry);
}

std::vector<Entry> CacheStore::listForFingerprint(const std::string& fingerprint) const {
  std::lock_guard<std::mutex> guard(mu_);
  Statement st(
      *db_,
      std::string("SELECT ") + kMetadataColumns + ", cubin FROM entries WHERE fingerprint = ?1 ORDER BY op, variant",
      "list entries");
  st.bindText(1, fingerprint);
  std::vector<Entry> out;
  while (st.step()) {
    StoredRow row = readRow(st, /*withCubin=*/true);
    VerifyReport report = detail::verifyStored(row.entry, row.recordSha256);
    if (report.status == VerifyStatus::Ok) {
      out.push_back(std::move(row.entry));
    } else {
      logRefusal(dbPath_, report);
    }
  }
  return out;
}

std::vector<Entry> CacheStore::listMetadata(const EntryFilter& filter) const {
  WhereClause where = whereFor(filter);
  std::lock_guard<std::mutex> guard(mu_);
  Statement st(
      *db_,
      std::string("SELECT ") + kMetadataColumns + " FROM entries" + where.sql + " ORDER BY fingerprint, op, variant",
      "list entries");
  where.bind(st);
  std::vector<Entry> out;
  while (st.step()) out.push_back(readRow(st, /*withCubin=*/false).entry);
  return out;
}

std::vector<VerifyReport> CacheStore::verify(const EntryFilter& filter) const {
  WhereClause where = whereFor(filter);
  std::lock_guard<std::mutex> guard(mu_);
  std::vector<VerifyReport> out;
  auto databaseReport = [&out](std::string detail) {
    VerifyReport r;
    r.status = VerifyStatus::Malformed;
    r.detail = "database: " + std::move(detail);
    out.push_back(std::move(r));
  };
  try {
    if (filter.selectsAll()) {
      // Structural check of every page (b-trees, free list), not just our rows.
      Statement check(*db_, "PRAGMA quick_check(20)", "quick_check");
      std::string problems;
      while (check.step()) {
        std::string line = check.text(0);
        if (line != "ok") problems += (problems.empty() ? "" : "; ") + line;
      }
      if (!problems.empty()) databaseReport(problems);
    }
    Statement st(*db_,
                 std::string("SELECT ") + kMetadataColumns + ", cubin FROM entries" + where.sql +
                     " ORDER BY fingerprint, op, variant",
                 "verify entries");
    where.bind(st);
    while (st.step()) {
      StoredRow row = readRow(st, /*withCubin=*/true);
      out.push_back(detail::verifyStored(row.entry, row.recordSha256));
    }
    std::vector<VerifyReport> lost = lostReports(filter);
    out.insert(out.end(), std::make_move_iterator(lost.begin()), std::make_move_iterator(lost.end()));
  } catch (const Error& e) {
    // A damaged page stops the scan; report it with whatever was verified before.
    databaseReport(e.what());
  }
  return out;
}

size_t CacheStore::remove(const EntryFilter& filter) {
  if (filter.selectsAll()) {
    HOTKERNEL_THROW("refusing to remove every cache entry through an empty filter; use removeAll()");
  }
  std::lock_guard<std::mutex> guard(mu_);
  return removeLocked(filter);
}

size_t CacheStore::removeAll() {
  std::lock_guard<std::mutex> guard(mu_);
  return removeLocked(EntryFilter{});
}

size_t CacheStore::removeLocked(const EntryFilter& filter) {
  if (readOnly_) {
    HOTKERNEL_THROW("cache ", dbPath_, " was opened read-only; cannot remove entries");
  }
  WhereClause where = whereFor(filter);
  WriteTransaction tx(*db_);
  const int64_t seq = nextCommitSeq(*db_);
  std::vector<Entry> removed;
  {
    Statement st(*db_, "DELETE FROM entries" + where.sql + " RETURNING fingerprint, op, variant", "remove entries");
    where.bind(st);
    while (st.step()) {
      Entry e;
      e.fingerprint = st.text(0);
      e.op = st.text(1);
      e.variant = st.text(2);
      removed.push_back(std::move(e));
    }
  }
  // Hand the freed pages back to the file system (auto_vacuum = INCREMENTAL).
  db_->exec("PRAGMA incremental_vacuum", "free pages");
  tx.commit();
  logCommit(seq, "remove", removed);
  return removed.size();
}

}  // namespace hotkernel::cache
