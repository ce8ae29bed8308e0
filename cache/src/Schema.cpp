// Note [Cache database format, version 1]
// One SQLite 3 database file, <cache dir>/kernels.sqlite (mode 0600; the
// directory is 0700), with SQLite's -wal and -shm companions beside it.
//
//   PRAGMA application_id = 0x484B4341   -- "HKCA": this file is a hotkernel cache
//   PRAGMA user_version   = 1            -- the format version (CacheStore::kFormatVersion)
//   PRAGMA journal_mode   = WAL          -- persistent; readers never block the one writer
//   PRAGMA auto_vacuum    = INCREMENTAL  -- removals return freed pages to the file system
//
//   CREATE TABLE meta (                  -- bookkeeping, one row per key
//     key   TEXT PRIMARY KEY NOT NULL,   -- 'format_version' -> '1' (must equal user_version)
//     value TEXT NOT NULL                -- 'created_by'     -> 'hotkernel <version>' that created the file
//   );                                   -- 'created_unix'   -> seconds since the epoch
//
//   CREATE TABLE entries (               -- one cached decision per key
//     fingerprint      TEXT NOT NULL,    -- Fingerprint::key(): 16 hex digits
//     op               TEXT NOT NULL,    -- "aten::_softmax"
//     variant          TEXT NOT NULL,    -- canonical variant string
//     fingerprint_json TEXT NOT NULL,    -- Fingerprint::canonicalJson(), for display
//     decision         TEXT NOT NULL,    -- 'kernel' | 'keep_aten'
//     family           TEXT NOT NULL,    -- kernel family
//     params           TEXT NOT NULL,    -- JSON parameter point
//     kernel_name      TEXT NOT NULL,    -- entry symbol in the cubin ('' for keep_aten)
//     cubin_sha256     TEXT NOT NULL,    -- lowercase hex SHA-256 of cubin
//     metrics          TEXT NOT NULL,    -- JSON measurements
//     created_unix     INTEGER NOT NULL, -- seconds since the epoch
//     record_sha256    TEXT NOT NULL,    -- digest of all the above, Note [Record digest, format v1]
//     cubin            BLOB NOT NULL,    -- raw cubin (zero-length for keep_aten); last, so reading
//                                        -- the other columns never touches its overflow pages
//     PRIMARY KEY (fingerprint, op, variant)
//   );
//
// Every write is one BEGIN IMMEDIATE transaction (CacheStore::put/remove).
// Compatibility: a reader refuses user_version greater than its own format
// version. A change that older readers cannot ignore bumps the version; a
// later hotkernel then migrates older files here, in prepareSchema.

#include "Schema.h"

#include <ctime>
#include <string>

#include "Sqlite.h"
#include "hotkernel/Config.h"
#include "hotkernel/cache/CacheStore.h"
#include "hotkernel/runtime/Check.h"
#include "hotkernel/runtime/Logging.h"

namespace hotkernel::cache::detail {
namespace {

constexpr const char* kCreateV1 = R"sql(
CREATE TABLE meta (
  key   TEXT PRIMARY KEY NOT NULL,
  value TEXT NOT NULL
);
CREATE TABLE entries (
  fingerprint      TEXT NOT NULL,
  op               TEXT NOT NULL,
  variant          TEXT NOT NULL,
  fingerprint_json TEXT NOT NULL,
  decision         TEXT NOT NULL,
  family           TEXT NOT NULL,
  params           TEXT NOT NULL,
  kernel_name      TEXT NOT NULL,
  cubin_sha256     TEXT NOT NULL,
  metrics          TEXT NOT NULL,
  created_unix     INTEGER NOT NULL,
  record_sha256    TEXT NOT NULL,
  cubin            BLOB NOT NULL,
  PRIMARY KEY (fingerprint, op, variant)
);
)sql";

struct Header {
  int64_t applicationId;
  int64_t userVersion;
  int64_t schemaObjects;
};

Header readHeader(Database& db) {
  // The first read of the file: a file that is not a database, or a truncated
  // one, fails here with SQLITE_NOTADB / SQLITE_CORRUPT. One statement, so
  // one snapshot: another process may be creating the schema right now.
  Statement st(db,
               "SELECT (SELECT application_id FROM pragma_application_id), "
               "(SELECT user_version FROM pragma_user_version), (SELECT count(*) FROM sqlite_master)",
               "read header");
  if (!st.step()) {
    HOTKERNEL_THROW("cache database ", db.path(), ": reading the header returned no row");
  }
  Header h;
  h.applicationId = st.integer(0);
  h.userVersion = st.integer(1);
  h.schemaObjects = st.integer(2);
  return h;
}

// Throws unless `h` describes a cache this hotkernel can use, or an empty database.
void checkHeader(const Database& db, const Header& h) {
  if (h.userVersion > CacheStore::kFormatVersion) {
    HOTKERNEL_THROW("cache database ", db.path(), " has format version ", h.userVersion,
                    ", newer than this hotkernel (" HOTKERNEL_VERSION ") understands (", CacheStore::kFormatVersion,
                    "); use a newer hotkernel or another HOTKERNEL_CACHE_DIR. The file was left untouched.");
  }
  bool empty = h.userVersion == 0 && h.applicationId == 0 && h.schemaObjects == 0;
  if (!empty && h.applicationId != kApplicationId) {
    HOTKERNEL_THROW("cache database ", db.path(), " is not a hotkernel cache (application_id ", h.applicationId,
                    ", user_version ", h.userVersion, "); the file was left untouched");
  }
  if (h.userVersion == 0 && !empty) {
    HOTKERNEL_THROW("cache database ", db.path(),
                    " is a hotkernel cache without a format version; remove it to start an empty cache");
  }
}

void checkMeta(Database& db) {
  Statement st(db, "SELECT value FROM meta WHERE key = 'format_version'", "read meta");
  if (!st.step()) {
    HOTKERNEL_THROW("cache database ", db.path(), " lacks its format_version record; remove it to start afresh");
  }
  std::string recorded = st.text(0);
  if (recorded != std::to_string(CacheStore::kFormatVersion)) {
    HOTKERNEL_THROW("cache database ", db.path(), " records format version '", recorded, "' in meta but ",
                    CacheStore::kFormatVersion, " in its header; remove it to start afresh");
  }
  // Fails (SQLITE_ERROR "no such table") when the table is missing.
  db.queryInt("SELECT count(*) FROM entries WHERE 0", "check entries table");
}

void switchToWal(Database& db) {
  // Note [WAL mode]
  // WAL lets readers (every serving process at start, the CLI) proceed while
  // one writer commits, and a crash mid-commit leaves the previous state. The
  // mode is stored in the file, so this is a no-op after the first open.
  Statement st(db, "PRAGMA journal_mode = WAL", "switch to WAL mode");
  std::string mode = st.step() ? st.text(0) : std::string();
  if (mode != "wal") {
    HOTKERNEL_LOG_ONCE(Warn, "cache-no-wal:" + db.path())
        << "cache database " << db.path() << " stays in journal mode '" << mode
        << "' (WAL unavailable on this file system); concurrent readers will wait for writers";
  }
}

void createV1(Database& db) {
  db.exec(kCreateV1, "create schema");
  Statement meta(db, "INSERT INTO meta (key, value) VALUES (?1, ?2)", "write meta");
  const std::pair<const char*, std::string> rows[] = {
      {"format_version", std::to_string(CacheStore::kFormatVersion)},
      {"created_by", "hotkernel " HOTKERNEL_VERSION},
      {"created_unix", std::to_string(static_cast<int64_t>(std::time(nullptr)))},
  };
  for (const auto& [key, value] : rows) {
    meta.bindText(1, key);
    meta.bindText(2, value);
    meta.step();
    meta.reset();
  }
  db.exec("PRAGMA application_id = " + std::to_string(kApplicationId), "write application_id");
  db.exec("PRAGMA user_version = " + std::to_string(CacheStore::kFormatVersion), "write format version");
}

}  // namespace

void prepareSchema(Database& db, bool readOnly) {
  Header h = readHeader(db);
  checkHeader(db, h);
  if (readOnly) {
    if (h.userVersion == 0) {
      HOTKERNEL_THROW("cache database ", db.path(),
                      " is empty (its first open was interrupted?); open it read-write once or remove it");
    }
    checkMeta(db);
    return;
  }
  // auto_vacuum only takes effect before the file's first page is written,
  // which the switch to WAL does; on an existing file it changes nothing.
  if (h.userVersion == 0) db.exec("PRAGMA auto_vacuum = INCREMENTAL", "set auto_vacuum");
  switchToWal(db);
  db.exec("PRAGMA synchronous = NORMAL", "set synchronous");  // enough for WAL: commits stay atomic
  if (h.userVersion == 0) {
    WriteTransaction tx(db);
    // Another process may have created the schema since readHeader.
    Header again = readHeader(db);
    checkHeader(db, again);
    if (again.userVersion == 0) createV1(db);
    tx.commit();
  }
  checkMeta(db);
}

}  // namespace hotkernel::cache::detail
