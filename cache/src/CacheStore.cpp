// Opens the cache database. Its byte format (tables, columns, pragmas,
// version rules) is Note [Cache database format, version 3] at the top of
// Schema.cpp; the record digest stored with each row is Note [Record digest,
// format v1] in EntryRecord.h, its signature Note [Entry signature, v1] there,
// the key Note [Cache key file] in EntryKey.h; the commit log beside the database is
// Note [Commit log format, version 1] in CommitLog.h. The reads are in
// CacheStoreReads.cpp, the writes in CacheStoreWrites.cpp, the commit log's
// checks in CacheStoreCommits.cpp.

#include "hotkernel/cache/CacheStore.h"

#include <sys/stat.h>

#include <utility>

#include "CommitLog.h"
#include "SafePath.h"
#include "Schema.h"
#include "Sqlite.h"
#include "StoreSql.h"
#include "hotkernel/runtime/Check.h"
#include "hotkernel/runtime/Logging.h"

namespace hotkernel::cache {
namespace {

using detail::Database;
using detail::metaText;

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

}  // namespace

std::string CacheStore::absoluteDirectory(const std::string& dir) { return detail::absolutePath(dir); }

std::string CacheStore::databasePathFor(const std::string& dir) {
  return detail::absolutePath(dir) + "/" + kDatabaseFileName;
}

std::unique_ptr<CacheStore> CacheStore::open(const std::string& dir) {
  return openImpl(dir, Access::ReadWrite, EntryTrust::fromConfig(dir));
}

std::unique_ptr<CacheStore> CacheStore::open(const std::string& dir, EntryTrust trust) {
  return openImpl(dir, Access::ReadWrite, std::move(trust));
}

std::unique_ptr<CacheStore> CacheStore::openReadOnly(const std::string& dir) {
  return openReadOnly(dir, EntryTrust::fromConfig(dir));
}

std::unique_ptr<CacheStore> CacheStore::openReadOnly(const std::string& dir, EntryTrust trust) {
  const std::string absDir = detail::absolutePath(dir);
  const bool exists = detail::checkReadableDirectory(absDir);
  return openImpl(dir, exists && !detail::directoryWritable(absDir) ? Access::Baked : Access::ReadOnly,
                  std::move(trust));
}

std::unique_ptr<CacheStore> CacheStore::openBaked(const std::string& dir) {
  return openImpl(dir, Access::Baked, EntryTrust::fromConfig(dir));
}

std::unique_ptr<CacheStore> CacheStore::openBaked(const std::string& dir, EntryTrust trust) {
  return openImpl(dir, Access::Baked, std::move(trust));
}

std::unique_ptr<CacheStore> CacheStore::openImpl(const std::string& dir, Access access, EntryTrust trust) {
  const bool readOnly = access != Access::ReadWrite;
  std::string absDir = detail::absolutePath(dir);
  std::string dbPath = absDir + "/" + kDatabaseFileName;
  // Note [Opening order]
  // Directory first (created 0700 if missing), then the database file, which
  // we create ourselves with 0600 so that SQLite never creates it with the
  // umask's mode (it gives -wal/-shm the mode of the database). Only then does
  // SQLite see the file, and it opens it with O_NOFOLLOW.
  // Note [Read-only cache directories]: a read-only open also accepts root's files.
  const auto checkFile = readOnly ? &detail::checkReadableFile : &detail::checkPrivateFile;
  if (readOnly) {
    if (!detail::checkReadableDirectory(absDir) || !detail::checkReadableFile(dbPath)) return nullptr;
  } else {
    detail::ensurePrivateDirectory(absDir);
    detail::ensurePrivateFile(dbPath);
  }
  const bool hasLog = checkFile(dbPath + "-wal");
  checkFile(dbPath + "-shm");
  checkFile(absDir + "/" + detail::kCommitLogFileName);
  struct stat logStat;
  if (access == Access::Baked && hasLog && ::stat((dbPath + "-wal").c_str(), &logStat) == 0 && logStat.st_size > 0) {
    HOTKERNEL_THROW("cache database ", dbPath, " has a write-ahead log not merged into it (", dbPath,
                    "-wal, ", logStat.st_size, " bytes), which an immutable open would not see; bake it only ",
                    "after every process that writes it has closed it (the last one merges the log)");
  }
  checkNotTruncated(dbPath);
  const Database::Mode mode = access == Access::Baked    ? Database::Mode::Immutable
                              : access == Access::ReadOnly ? Database::Mode::ReadOnly
                                                           : Database::Mode::ReadWrite;
  std::unique_ptr<Database> db = Database::open(dbPath, mode);
  const int formatVersion = detail::prepareSchema(*db, readOnly);
  std::string storeId = formatVersion >= 2 ? metaText(*db, "store_id") : std::string();
  std::unique_ptr<CacheStore> store(new CacheStore(std::move(absDir), std::move(dbPath), readOnly, std::move(db),
                                                   formatVersion, std::move(storeId), std::move(trust)));
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
                       int formatVersion, std::string storeId, EntryTrust trust)
    : dir_(std::move(dir)),
      dbPath_(std::move(dbPath)),
      commitLogPath_(dir_ + "/" + detail::kCommitLogFileName),
      readOnly_(readOnly),
      formatVersion_(formatVersion),
      storeId_(std::move(storeId)),
      trust_(std::move(trust)),
      db_(std::move(db)) {}

CacheStore::~CacheStore() = default;

}  // namespace hotkernel::cache
