// Note [Cache database format, version 3]
// One SQLite 3 database file, <cache dir>/kernels.sqlite (mode 0600; the
// directory is 0700), with SQLite's -wal and -shm companions beside it, and
// the commit log <cache dir>/kernels.commits (Note [Commit log format,
// version 1] in CommitLog.h).
//
//   PRAGMA application_id = 0x484B4341   -- "HKCA": this file is a hotkernel cache
//   PRAGMA user_version   = 3            -- the format version (CacheStore::kFormatVersion)
//   PRAGMA journal_mode   = WAL          -- persistent; readers never block the one writer
//   PRAGMA auto_vacuum    = INCREMENTAL  -- removals return freed pages to the file system
//
//   CREATE TABLE meta (                  -- bookkeeping, one row per key
//     key   TEXT PRIMARY KEY NOT NULL,   -- 'format_version' -> '3' (must equal user_version)
//     value TEXT NOT NULL                -- 'created_by'     -> 'hotkernel <version>' that created the file
//   );                                   -- 'created_unix'   -> seconds since the epoch
//                                        -- 'store_id'       -> 32 random hex digits, names this database
//                                        --                     in the commit log
//                                        -- 'commit_seq'     -> decimal number of the last write
//                                        --                     transaction (Note [Commits lost with the WAL])
//
//   CREATE TABLE entries (               -- one cached decision per key
//     fingerprint      TEXT NOT NULL,    -- Fingerprint::key(): 16 hex digits
//     op               TEXT NOT NULL,    -- "aten::_softmax"
//     variant          TEXT NOT NULL,    -- canonical variant string
//     fingerprint_json TEXT NOT NULL,    -- Fingerprint::canonicalJson(), for display
//     decision         TEXT NOT NULL,    -- 'kernel' | 'keep_aten' | 'aten_backend' (Note [Decision values])
//     family           TEXT NOT NULL,    -- kernel family
//     params           TEXT NOT NULL,    -- JSON parameter point
//     kernel_name      TEXT NOT NULL,    -- entry symbol in the cubin ('' for keep_aten, aten_backend)
//     cubin_sha256     TEXT NOT NULL,    -- lowercase hex SHA-256 of cubin
//     metrics          TEXT NOT NULL,    -- JSON measurements
//     created_unix     INTEGER NOT NULL, -- seconds since the epoch
//     record_sha256    TEXT NOT NULL,    -- digest of the columns above, Note [Record digest, format v1]
//     commit_seq       INTEGER NOT NULL, -- meta 'commit_seq' of the transaction that wrote the row
//                                        -- (0: written before format 2)
//     signature        TEXT NOT NULL,    -- 'hmac-sha256-v1:<hex>' when put() had a key, else ''
//                                        -- (Note [Entry signature, v1] in EntryRecord.h; '' for rows
//                                        -- written before format 3)
//     cubin            BLOB NOT NULL,    -- raw cubin (zero-length for keep_aten, aten_backend); last, so reading
//                                        -- the other columns never touches its overflow pages
//     PRIMARY KEY (fingerprint, op, variant)
//   );
//
// Every write is one BEGIN IMMEDIATE transaction (CacheStore::put/remove) that
// increments meta 'commit_seq' and stamps the rows it writes with it.
// Compatibility: a reader refuses user_version greater than its own format
// version. A change that older readers cannot ignore bumps the version; a
// later hotkernel then migrates older files here, in prepareSchema.
// Version 1 (no commit_seq column, no 'store_id' / 'commit_seq' meta rows, no
// commit log) and version 2 (no signature column) are migrated by the first
// read-write open (migrateToV3), in one transaction, their rows unsigned; a
// read-only open reads them as they are (version 1 without the commit checks,
// both with every signature '').
// Version 3 adds the signature column: a version-2 hotkernel would write rows
// without it, so the version is bumped rather than the column added silently.
//
// Note [Decision values]
// 'kernel': launch the cubin (family, params, kernel_name, a cubin required);
// 'keep_aten': the measured ATen kernel stays (no cubin); 'aten_backend': run
// the one of ATen's own implementations that params names (the attention
// family's choice: family and params required, no cubin, no kernel name).
// 'aten_backend' came without a version bump: a reader that does not know it
// verifies such a row as malformed and loads nothing from it, which is what it
// must do, while every other row of the file stays readable.

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

constexpr const char* kCreateMeta = R"sql(
CREATE TABLE meta (
  key   TEXT PRIMARY KEY NOT NULL,
  value TEXT NOT NULL
);
)sql";

// The entries table of format 3, under `name` (migrateToV3 builds it beside the old one).
std::string createEntriesV3(const std::string& name) {
  return "CREATE TABLE " + name + R"sql( (
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
  commit_seq       INTEGER NOT NULL,
  signature        TEXT NOT NULL,
  cubin            BLOB NOT NULL,
  PRIMARY KEY (fingerprint, op, variant)
);
)sql";
}

constexpr const char* kEntryColumnsV1 =
    "fingerprint, op, variant, fingerprint_json, decision, family, params, kernel_name, cubin_sha256, metrics, "
    "created_unix, record_sha256";

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

void checkMeta(Database& db, int64_t userVersion) {
  Statement st(db, "SELECT value FROM meta WHERE key = 'format_version'", "read meta");
  if (!st.step()) {
    HOTKERNEL_THROW("cache database ", db.path(), " lacks its format_version record; remove it to start afresh");
  }
  std::string recorded = st.text(0);
  if (recorded != std::to_string(userVersion)) {
    HOTKERNEL_THROW("cache database ", db.path(), " records format version '", recorded, "' in meta but ",
                    userVersion, " in its header; remove it to start afresh");
  }
  // Fails (SQLITE_ERROR "no such table" / "no such column") when the table is missing or too old.
  db.queryInt(userVersion >= 3   ? "SELECT count(signature) FROM entries WHERE 0"
              : userVersion == 2 ? "SELECT count(commit_seq) FROM entries WHERE 0"
                                 : "SELECT count(*) FROM entries WHERE 0",
              "check entries table");
  if (userVersion >= 2) {
    Statement ids(db, "SELECT count(*) FROM meta WHERE key IN ('store_id', 'commit_seq')", "read meta");
    if (!ids.step() || ids.integer(0) != 2) {
      HOTKERNEL_THROW("cache database ", db.path(), " lacks its store_id or commit_seq record; remove it to start afresh");
    }
  }
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

// The meta rows format 2 added: a fresh store id, no commit yet.
void writeCommitMeta(Database& db) {
  db.exec("INSERT OR REPLACE INTO meta (key, value) VALUES ('store_id', lower(hex(randomblob(16)))), "
          "('commit_seq', '0')",
          "write meta");
}

void writeFormatVersion(Database& db) {
  db.exec("INSERT OR REPLACE INTO meta (key, value) VALUES ('format_version', '3')", "write meta");
  db.exec("PRAGMA user_version = 3", "write format version");
}

void createV3(Database& db) {
  db.exec(kCreateMeta, "create schema");
  db.exec(createEntriesV3("entries"), "create schema");
  Statement meta(db, "INSERT INTO meta (key, value) VALUES (?1, ?2)", "write meta");
  const std::pair<const char*, std::string> rows[] = {
      {"created_by", "hotkernel " HOTKERNEL_VERSION},
      {"created_unix", std::to_string(static_cast<int64_t>(std::time(nullptr)))},
  };
  for (const auto& [key, value] : rows) {
    meta.bindText(1, key);
    meta.bindText(2, value);
    meta.step();
    meta.reset();
  }
  writeCommitMeta(db);
  writeFormatVersion(db);
  db.exec("PRAGMA application_id = " + std::to_string(kApplicationId), "write application_id");
}

// Rebuilds entries of format `from` (1 or 2) as format 3: the new columns sit
// before cubin (an added column would land after it), rows from format 1
// stamped commit 0, every row unsigned. Precondition: inside a write transaction.
void migrateToV3(Database& db, int64_t from) {
  checkMeta(db, from);
  db.exec(createEntriesV3("entries_v3"), "migrate to format 3");
  const std::string commitSeq = from >= 2 ? "commit_seq" : "0";
  db.exec(std::string("INSERT INTO entries_v3 (") + kEntryColumnsV1 + ", commit_seq, signature, cubin) SELECT " +
              kEntryColumnsV1 + ", " + commitSeq + ", '', cubin FROM entries",
          "migrate to format 3");
  db.exec("DROP TABLE entries; ALTER TABLE entries_v3 RENAME TO entries", "migrate to format 3");
  if (from < 2) writeCommitMeta(db);
  writeFormatVersion(db);
  HOTKERNEL_LOG(Info) << "cache database " << db.path() << " migrated from format " << from
                      << " to 3 (its entries are unsigned)";
}

}  // namespace

int prepareSchema(Database& db, bool readOnly) {
  Header h = readHeader(db);
  checkHeader(db, h);
  if (readOnly) {
    if (h.userVersion == 0) {
      HOTKERNEL_THROW("cache database ", db.path(),
                      " is empty (its first open was interrupted?); open it read-write once or remove it");
    }
    checkMeta(db, h.userVersion);
    return static_cast<int>(h.userVersion);
  }
  // auto_vacuum only takes effect before the file's first page is written,
  // which the switch to WAL does; on an existing file it changes nothing.
  if (h.userVersion == 0) db.exec("PRAGMA auto_vacuum = INCREMENTAL", "set auto_vacuum");
  switchToWal(db);
  db.exec("PRAGMA synchronous = NORMAL", "set synchronous");  // enough for WAL: commits stay atomic
  if (h.userVersion < CacheStore::kFormatVersion) {
    WriteTransaction tx(db);
    // Another process may have created or migrated the schema since readHeader.
    Header again = readHeader(db);
    checkHeader(db, again);
    if (again.userVersion == 0) createV3(db);
    if (again.userVersion == 1 || again.userVersion == 2) migrateToV3(db, again.userVersion);
    tx.commit();
  }
  checkMeta(db, CacheStore::kFormatVersion);
  return CacheStore::kFormatVersion;
}

}  // namespace hotkernel::cache::detail
