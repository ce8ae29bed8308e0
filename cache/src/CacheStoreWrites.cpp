// The store's writes: put and remove, each one write transaction with its
// own commit number, logged to the commit log after COMMIT.

#include "hotkernel/cache/CacheStore.h"

#include <ctime>
#include <utility>

#include "CommitLog.h"
#include "EntryRecord.h"
#include "Sqlite.h"
#include "StoreSql.h"
#include "hotkernel/runtime/Check.h"
#include "hotkernel/runtime/Hash.h"
#include "hotkernel/runtime/Logging.h"

namespace hotkernel::cache {
namespace {

using detail::CommitRecord;
using detail::Database;
using detail::metaInt;
using detail::Statement;
using detail::WhereClause;
using detail::whereFor;
using detail::WriteTransaction;

// The next commit number, stored in meta. Precondition: inside a write transaction.
int64_t nextCommitSeq(Database& db) {
  db.exec("UPDATE meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'commit_seq'", "count commit");
  return metaInt(db, "commit_seq");
}

}  // namespace

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

void CacheStore::put(const Entry& entry) {
  if (readOnly_) {
    HOTKERNEL_THROW("cache ", dbPath_, " was opened read-only; cannot store op=", entry.op);
  }
  if (!trust_.keyRefused.empty()) {
    HOTKERNEL_THROW("cache ", dbPath_, ": not storing op=", entry.op, " unsigned: ", trust_.keyRefused);
  }
  Entry e = entry;
  e.cubinSha256 = sha256Hex(e.cubin);
  e.cubinBytes = static_cast<int64_t>(e.cubin.size());
  if (e.createdUnix == 0) e.createdUnix = static_cast<int64_t>(std::time(nullptr));
  detail::checkPuttable(e);
  const std::string record = detail::recordDigest(e);
  const std::string signature = trust_.key ? detail::entrySignature(*trust_.key, e, record) : std::string();

  std::lock_guard<std::mutex> guard(mu_);
  WriteTransaction tx(*db_);
  const int64_t seq = nextCommitSeq(*db_);
  Statement st(*db_,
               "INSERT OR REPLACE INTO entries (fingerprint, op, variant, fingerprint_json, decision, family, params, "
               "kernel_name, cubin_sha256, metrics, created_unix, record_sha256, commit_seq, signature, cubin) "
               "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)",
               "store entry");
  int i = 1;
  for (const std::string* text : {&e.fingerprint, &e.op, &e.variant, &e.fingerprintJson, &e.decision, &e.family,
                                  &e.params, &e.kernelName, &e.cubinSha256, &e.metrics}) {
    st.bindText(i++, *text);
  }
  st.bindInt(i++, e.createdUnix);
  st.bindText(i++, record);
  st.bindInt(i++, seq);
  st.bindText(i++, signature);
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
