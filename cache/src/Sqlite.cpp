#include "Sqlite.h"

#include <sqlite3.h>

#include "hotkernel/runtime/Check.h"
#include "hotkernel/runtime/Logging.h"

namespace hotkernel::cache::detail {
namespace {

// Note [Busy timeout]
// Several processes share one cache; SQLite allows one writer at a time and,
// in WAL mode, readers alongside it. A writer that finds the lock taken waits
// up to this long before put() fails. Writes are one small transaction each,
// so the wait is normally milliseconds; the generous bound only matters when
// a whole fleet of workers starts at once against a shared cache.
constexpr int kBusyTimeoutMs = 15000;

bool isDamage(int rc) {
  int primary = rc & 0xff;
  return primary == SQLITE_CORRUPT || primary == SQLITE_NOTADB;
}

}  // namespace

namespace {

// `path` as an SQLite URI file name: the characters a URI gives a meaning escaped.
std::string uriOf(const std::string& path) {
  std::string out = "file:";
  for (const char c : path) {
    if (c == '%' || c == '?' || c == '#') {
      static const char kHex[] = "0123456789ABCDEF";
      out += '%';
      out += kHex[(static_cast<unsigned char>(c) >> 4) & 0xf];
      out += kHex[static_cast<unsigned char>(c) & 0xf];
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

std::unique_ptr<Database> Database::open(const std::string& path, Mode mode) {
  sqlite3* db = nullptr;
  const bool readOnly = mode != Mode::ReadWrite;
  int flags = SQLITE_OPEN_NOFOLLOW | SQLITE_OPEN_NOMUTEX;
  flags |= readOnly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE;  // never CREATE: see SafePath
  int rc = mode == Mode::Immutable
               ? sqlite3_open_v2((uriOf(path) + "?immutable=1").c_str(), &db, flags | SQLITE_OPEN_URI, nullptr)
               : sqlite3_open_v2(path.c_str(), &db, flags, nullptr);
  std::unique_ptr<Database> out(new Database(db, path));  // closes db even when open failed
  if (rc != SQLITE_OK) out->fail(rc, "open");
  sqlite3_extended_result_codes(db, 1);
  rc = sqlite3_busy_timeout(db, kBusyTimeoutMs);
  if (rc != SQLITE_OK) out->fail(rc, "set busy_timeout");
  if (readOnly) out->exec("PRAGMA query_only = ON", "set query_only");
  return out;
}

Database::~Database() {
  // Statements are always finalized by their owners first, so close cannot be busy.
  int rc = sqlite3_close(db_);
  if (rc != SQLITE_OK) {
    HOTKERNEL_LOG(Warn) << "closing cache database " << path_ << " failed: " << sqlite3_errstr(rc);
  }
}

void Database::fail(int rc, const char* what) const {
  std::string message = db_ ? sqlite3_errmsg(db_) : sqlite3_errstr(rc);
  if (isDamage(rc)) {
    HOTKERNEL_THROW("cache database ", path_, " is damaged or not a hotkernel cache (", what, ": ", message,
                    ", sqlite code ", rc, "); remove it to start an empty cache");
  }
  if ((rc & 0xff) == SQLITE_READONLY) {
    HOTKERNEL_THROW("cache database ", path_, ": ", what, " failed: ", message, " (sqlite code ", rc,
                    "); the cache directory or database file is not writable by this user");
  }
  HOTKERNEL_THROW("cache database ", path_, ": ", what, " failed: ", message, " (sqlite code ", rc, ")");
}

void Database::exec(const std::string& sql, const char* what) {
  int rc = sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, nullptr);
  if (rc != SQLITE_OK) fail(rc, what);
}

int64_t Database::queryInt(const std::string& sql, const char* what) {
  Statement st(*this, sql, what);
  if (!st.step()) {
    HOTKERNEL_THROW("cache database ", path_, ": ", what, " returned no row");
  }
  return st.integer(0);
}

int64_t Database::changes() const { return sqlite3_changes(db_); }

bool Database::checkpointPassive() {
  int frames = -1;
  int copied = -1;
  int rc = sqlite3_wal_checkpoint_v2(db_, nullptr, SQLITE_CHECKPOINT_PASSIVE, &frames, &copied);
  return rc == SQLITE_OK && frames >= 0 && frames == copied;
}

Statement::Statement(Database& db, const std::string& sql, const char* what) : db_(db), what_(what) {
  int rc = sqlite3_prepare_v2(db.handle(), sql.c_str(), static_cast<int>(sql.size()), &stmt_, nullptr);
  if (rc != SQLITE_OK) db_.fail(rc, what_);
}

Statement::~Statement() { sqlite3_finalize(stmt_); }

void Statement::bindText(int index, const std::string& text) {
  int rc = sqlite3_bind_text(stmt_, index, text.data(), static_cast<int>(text.size()), SQLITE_TRANSIENT);
  if (rc != SQLITE_OK) db_.fail(rc, what_);
}

void Statement::bindBlob(int index, const std::string& bytes) {
  // Zero-length blob, not NULL, for an empty string (sqlite3_bind_blob with a null pointer binds NULL).
  int rc = bytes.empty() ? sqlite3_bind_zeroblob(stmt_, index, 0)
                         : sqlite3_bind_blob64(stmt_, index, bytes.data(), bytes.size(), SQLITE_TRANSIENT);
  if (rc != SQLITE_OK) db_.fail(rc, what_);
}

void Statement::bindInt(int index, int64_t value) {
  int rc = sqlite3_bind_int64(stmt_, index, value);
  if (rc != SQLITE_OK) db_.fail(rc, what_);
}

bool Statement::step() {
  int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  db_.fail(rc, what_);
}

void Statement::reset() { sqlite3_reset(stmt_); }

std::string Statement::text(int column) const {
  const unsigned char* p = sqlite3_column_text(stmt_, column);
  int n = sqlite3_column_bytes(stmt_, column);
  return p ? std::string(reinterpret_cast<const char*>(p), static_cast<size_t>(n)) : std::string();
}

std::string Statement::blob(int column) const {
  const void* p = sqlite3_column_blob(stmt_, column);
  int n = sqlite3_column_bytes(stmt_, column);
  return p ? std::string(static_cast<const char*>(p), static_cast<size_t>(n)) : std::string();
}

int64_t Statement::integer(int column) const { return sqlite3_column_int64(stmt_, column); }

WriteTransaction::WriteTransaction(Database& db) : db_(db) { db_.exec("BEGIN IMMEDIATE", "begin write transaction"); }

WriteTransaction::~WriteTransaction() {
  // After a failed COMMIT (e.g. disk full) SQLite may already have rolled back.
  if (!done_ && !sqlite3_get_autocommit(db_.handle())) {
    sqlite3_exec(db_.handle(), "ROLLBACK", nullptr, nullptr, nullptr);
  }
}

void WriteTransaction::commit() {
  db_.exec("COMMIT", "commit");
  done_ = true;
}

}  // namespace hotkernel::cache::detail
