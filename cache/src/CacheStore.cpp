// Writes and reads the cache database. Its byte format (tables, columns,
// pragmas, version rules) is Note [Cache database format, version 1] at the
// top of Schema.cpp; the record digest stored with each row is
// Note [Record digest, format v1] in EntryRecord.h.

#include "hotkernel/cache/CacheStore.h"

#include <sys/stat.h>

#include <ctime>
#include <utility>

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
  checkNotTruncated(dbPath);
  std::unique_ptr<Database> db = Database::open(dbPath, readOnly);
  detail::prepareSchema(*db, readOnly);
  return std::unique_ptr<CacheStore>(new CacheStore(std::move(absDir), std::move(dbPath), readOnly, std::move(db)));
}

CacheStore::CacheStore(std::string dir, std::string dbPath, bool readOnly, std::unique_ptr<detail::Database> db)
    : dir_(std::move(dir)), dbPath_(std::move(dbPath)), readOnly_(readOnly), db_(std::move(db)) {}

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
  Statement st(*db_,
               "INSERT OR REPLACE INTO entries (fingerprint, op, variant, fingerprint_json, decision, family, params, "
               "kernel_name, cubin_sha256, metrics, created_unix, record_sha256, cubin) "
               "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
               "store entry");
  int i = 1;
  for (const std::string* text : {&e.fingerprint, &e.op, &e.variant, &e.fingerprintJson, &e.decision, &e.family,
                                  &e.params, &e.kernelName, &e.cubinSha256, &e.metrics}) {
    st.bindText(i++, *text);
  }
  st.bindInt(i++, e.createdUnix);
  st.bindText(i++, record);
  st.bindBlob(i++, e.cubin);
  st.step();
  tx.commit();
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
  Statement st(*db_, "DELETE FROM entries" + where.sql, "remove entries");
  where.bind(st);
  st.step();
  size_t removed = static_cast<size_t>(db_->changes());
  // Hand the freed pages back to the file system (auto_vacuum = INCREMENTAL).
  db_->exec("PRAGMA incremental_vacuum", "free pages");
  tx.commit();
  return removed;
}

}  // namespace hotkernel::cache
