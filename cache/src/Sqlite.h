#pragma once
// A thin RAII layer over the SQLite C API, for this module only. Every failure
// becomes hotkernel::Error with the database path, the operation and SQLite's
// own message, plus a hint when the file is damaged.
//
// None of these classes lock: CacheStore serializes all use of one Database.

#include <cstdint>
#include <memory>
#include <string>

struct sqlite3;
struct sqlite3_stmt;

namespace hotkernel::cache::detail {

class Statement;

class Database {
 public:
  enum class Mode {
    ReadWrite,
    ReadOnly,   // the file must exist; the connection is also query_only
    Immutable,  // ReadOnly, and SQLite takes no locks and makes no -shm/-wal files: nobody writes the file
  };
  // Opens `path` (never following a symlink) and sets busy_timeout.
  static std::unique_ptr<Database> open(const std::string& path, Mode mode);
  ~Database();
  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;

  // Runs SQL without results (may hold several statements).
  void exec(const std::string& sql, const char* what);
  // The single integer a statement like "PRAGMA user_version" returns.
  int64_t queryInt(const std::string& sql, const char* what);
  // Rows changed by the last INSERT/UPDATE/DELETE.
  int64_t changes() const;
  // A passive checkpoint: copies committed -wal frames into the database file
  // as far as no reader's snapshot needs them, never waiting on a lock. True
  // when every frame of the -wal is now in the database file; false when some
  // remain, another connection holds the checkpoint lock, or it failed.
  bool checkpointPassive();

  // Throws Error for SQLite result code `rc` during `what`.
  [[noreturn]] void fail(int rc, const char* what) const;

  sqlite3* handle() const { return db_; }
  const std::string& path() const { return path_; }

 private:
  Database(sqlite3* db, std::string path) : db_(db), path_(std::move(path)) {}
  sqlite3* db_;
  std::string path_;
};

class Statement {
 public:
  Statement(Database& db, const std::string& sql, const char* what);
  ~Statement();
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  // Parameters are 1-based, like SQLite's.
  void bindText(int index, const std::string& text);
  void bindBlob(int index, const std::string& bytes);
  void bindInt(int index, int64_t value);

  // Advances; true while a row is available, false when done.
  bool step();
  // Ready to run again; bindings are kept (rebind what changes).
  void reset();

  // Columns are 0-based, like SQLite's.
  std::string text(int column) const;
  std::string blob(int column) const;
  int64_t integer(int column) const;

 private:
  Database& db_;
  sqlite3_stmt* stmt_ = nullptr;
  const char* what_;
};

// BEGIN IMMEDIATE on construction (takes the write lock now, waiting up to
// busy_timeout, so the transaction cannot fail later on a lock upgrade);
// rolls back on destruction unless commit() succeeded.
class WriteTransaction {
 public:
  explicit WriteTransaction(Database& db);
  ~WriteTransaction();
  WriteTransaction(const WriteTransaction&) = delete;
  WriteTransaction& operator=(const WriteTransaction&) = delete;
  void commit();

 private:
  Database& db_;
  bool done_ = false;
};

}  // namespace hotkernel::cache::detail
