#pragma once
// The persistent kernel cache: one SQLite database (WAL mode) in a private
// directory, shared by every process of the user that points at it.
//
//   auto store = CacheStore::open(config().cacheDir);        // throws hotkernel::Error
//   store->put(entry);                                          // upsert, one transaction
//   for (auto& e : store->listForFingerprint(fp.key())) ...    // verified entries only
//
// Every method reports failure by throwing hotkernel::Error (HOTKERNEL_THROW):
// an unsafe directory, a corrupt or truncated database, a database written by
// a newer hotkernel, a failed write (disk full). Callers on the serving path
// catch it and carry on without a cache.
//
// Note [The cache stores bytes, it never runs them]
// This module writes and reads cubin bytes and checks their digests; loading
// a cubin is the runtime's job, and it only ever gets bytes whose SHA-256
// matches what put() recorded. The digests detect corruption and accidental
// edits, not an attacker: anyone who can write the database can rewrite the
// digests too. The permission checks (private directory and database file,
// owned by this user, no symlinks) are what keep other users out. Against a
// writer of the database, configure a key (EntryTrust, Note [Cache key file]
// in EntryKey.h): then put() signs and reads return only entries whose
// signature verifies (Note [Entry signature, v1] in cache/src/EntryRecord.h).
//
// Thread-safety: every method may be called from any thread; calls on one
// CacheStore are serialized by an internal mutex. Several CacheStore objects
// and several processes may use one directory at once (SQLite locking, one
// writer at a time, readers never block). Do not use a CacheStore across
// fork(): open a new one in the child.

#include <cstddef>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <atomic>
#include <cstdint>

#include "hotkernel/cache/Entry.h"
#include "hotkernel/cache/EntryKey.h"
#include "hotkernel/cache/EntryFilter.h"
#include "hotkernel/cache/VerifyReport.h"

namespace hotkernel::cache {

namespace detail {
class Database;
}

class CacheStore {
 public:
  // Version of the on-disk format (PRAGMA user_version); see cache/README.md.
  static constexpr int kFormatVersion = 3;
  // The database file inside the cache directory.
  static constexpr const char* kDatabaseFileName = "kernels.sqlite";

  // Opens the cache in `dir` for reading and writing, creating the directory
  // (mode 0700, missing parents too) and the database (mode 0600) if needed.
  // Refuses a directory that is a symlink, not a directory, not owned by the
  // current user, or writable by group/others; the same for the database file
  // and its -wal/-shm companions. Also refuses a corrupt or truncated database,
  // a file that is not a hotkernel cache, and a newer format version (never
  // overwrites any of them). `trust` says whether entries are signed; the
  // overload without it takes EntryTrust::fromConfig(dir)
  // (HOTKERNEL_CACHE_KEY_FILE), so every process configured with a key reads
  // and writes in signed mode.
  static std::unique_ptr<CacheStore> open(const std::string& dir);
  static std::unique_ptr<CacheStore> open(const std::string& dir, EntryTrust trust);

  // Opens an existing cache for reading only (the CLI's ls/show/verify, the
  // engine's HOTKERNEL_CACHE_PATH): never creates the directory or the
  // database and never writes to it (SQLite may create its -wal/-shm lock
  // files). Same checks as open(), except that the directory and its files may
  // also belong to root (Note [Read-only cache directories] in src/SafePath.h);
  // a directory this process cannot write opens as openBaked. Returns nullptr
  // when there is no cache in `dir` (no directory or no database file).
  static std::unique_ptr<CacheStore> openReadOnly(const std::string& dir);
  static std::unique_ptr<CacheStore> openReadOnly(const std::string& dir, EntryTrust trust);

  // Opens, for reading only, a cache nobody writes while it is open: an
  // image-baked directory. The database is opened immutable (SQLite takes no
  // locks and makes no -shm/-wal files), so it must hold no write-ahead log
  // that is not merged into it (refused, saying so); otherwise as openReadOnly.
  static std::unique_ptr<CacheStore> openBaked(const std::string& dir);
  static std::unique_ptr<CacheStore> openBaked(const std::string& dir, EntryTrust trust);

  // `dir` made absolute (relative to the working directory), trailing slashes removed.
  static std::string absoluteDirectory(const std::string& dir);
  // absoluteDirectory(dir) + "/" + kDatabaseFileName.
  static std::string databasePathFor(const std::string& dir);

  ~CacheStore();
  CacheStore(const CacheStore&) = delete;
  CacheStore& operator=(const CacheStore&) = delete;

  // Inserts or replaces the entry keyed by (fingerprint, op, variant) in one
  // transaction. Computes cubinSha256 (a value passed in is ignored) and sets
  // createdUnix when 0. Throws (and stores nothing) for an invalid entry:
  // fingerprint not matching fingerprintJson, unknown decision, "kernel"
  // without cubin or kernelName, "keep_aten" with a cubin, params/metrics not
  // JSON; and when the write fails (read-only store, disk full, lock timeout).
  // In signed mode the row is signed with the key; with a refused key it
  // throws and stores nothing.
  void put(const Entry& entry);

  // The entry with this key, only if it verifies: cubin SHA-256 and record
  // digest recomputed and compared, and in signed mode the signature. A
  // failing entry is not returned (nullopt) and is logged once per process
  // (Warn) with its key; an unsigned or badly signed one is also counted
  // (signatureRefusals).
  std::optional<Entry> get(const std::string& fingerprint, const std::string& op, const std::string& variant) const;

  // Every entry of one environment, each verified like get() (failing ones are
  // skipped and logged): what a process loads at start. Ordered by (op, variant).
  std::vector<Entry> listForFingerprint(const std::string& fingerprint) const;

  // Metadata of the entries matching `filter`, for display: `cubin` is left
  // empty (cubinBytes holds its size) and nothing is verified. Ordered by
  // (fingerprint, op, variant).
  std::vector<Entry> listMetadata(const EntryFilter& filter = {}) const;

  // Re-checks the entries matching `filter`: one report per entry (Ok ones
  // included; in signed mode Unsigned / BadSignature ones too), plus a
  // database-level report (empty key, Malformed) for damage
  // that SQLite's quick_check finds (run when the filter selects everything)
  // or that stops the scan. Committed writes that the database lost (a
  // damaged or removed -wal: Note [Commits lost with the WAL] in
  // cache/src/CommitLog.h) get one Lost report per key plus one Lost summary
  // for the database; a missing or unreadable commit log one Malformed report.
  std::vector<VerifyReport> verify(const EntryFilter& filter = {}) const;
  std::vector<VerifyReport> verifyAll() const { return verify(EntryFilter{}); }

  // Deletes the entries matching `filter`, returns how many. Refuses a filter
  // that selects everything (use removeAll()).
  size_t remove(const EntryFilter& filter);
  size_t removeAll();

  const std::string& directory() const { return dir_; }
  const std::string& databasePath() const { return dbPath_; }
  // <dir>/kernels.commits (Note [Commit log format, version 1] in cache/src/CommitLog.h).
  const std::string& commitLogPath() const { return commitLogPath_; }
  bool readOnly() const { return readOnly_; }
  const EntryTrust& trust() const { return trust_; }
  // Entries get / listForFingerprint refused in signed mode because they were
  // unsigned or badly signed, since the store was opened (each read counts).
  uint64_t signatureRefusals() const { return signatureRefusals_.load(std::memory_order_relaxed); }

 private:
  CacheStore(std::string dir, std::string dbPath, bool readOnly, std::unique_ptr<detail::Database> db,
             int formatVersion, std::string storeId, EntryTrust trust);
  enum class Access { ReadWrite, ReadOnly, Baked };
  static std::unique_ptr<CacheStore> openImpl(const std::string& dir, Access access, EntryTrust trust);
  // The result of verifying a row read for loading; logs and counts a refusal. Precondition: mu_ held.
  bool acceptForLoading(const VerifyReport& report) const;
  // Read-write open of a format-2 store: starts a missing commit log, warns
  // about lost commits, raises commit_seq above the log's numbers, compacts
  // a large log. Precondition: called before the store is shared.
  void reconcileCommitLog();
  // Precondition: mu_ held.
  size_t removeLocked(const EntryFilter& filter);
  // Appends to the commit log after a COMMIT; a failure is logged, never thrown
  // (the write itself succeeded). Precondition: mu_ held.
  void logCommit(int64_t seq, const char* kind, const std::vector<Entry>& keys) const;
  // Lost reports for the keys matching `filter` (empty when the store predates
  // the commit log). Precondition: mu_ held.
  std::vector<VerifyReport> lostReports(const EntryFilter& filter) const;

  const std::string dir_;            // absolute
  const std::string dbPath_;         // absolute
  const std::string commitLogPath_;  // absolute
  const bool readOnly_;
  const int formatVersion_;    // of the open database: 1 only for a read-only open of an old store
  const std::string storeId_;  // meta 'store_id'; empty for format 1
  const EntryTrust trust_;     // fixed at open: whether entries are signed, and with which key
  mutable std::atomic<uint64_t> signatureRefusals_{0};
  mutable std::mutex mu_;
  std::unique_ptr<detail::Database> db_;  // Guarded by mu_.
};

}  // namespace hotkernel::cache
