#pragma once
// Helpers shared by the cache and CLI tests: a temporary directory, valid
// entries (CacheTestEntries.h), and raw SQLite access for tampering with a
// database behind the CacheStore's back.

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "../TempDir.h"
#include "CacheTestEntries.h"
#include "hotkernel/cache/CacheStore.h"
#include "hotkernel/cache/Entry.h"

namespace hotkernel::cache::test {

using TempDir = hotkernel::test::TempDir;  // Note [No std::filesystem::remove_all next to libtorch]

// Raw SQLite access, bypassing CacheStore (for tampering and inspection).
class RawDb {
 public:
  explicit RawDb(const std::string& dir) {
    std::string path = CacheStore::databasePathFor(dir);
    EXPECT_EQ(sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READWRITE, nullptr), SQLITE_OK) << path;
    sqlite3_busy_timeout(db_, 5000);
  }
  ~RawDb() { sqlite3_close(db_); }
  RawDb(const RawDb&) = delete;
  RawDb& operator=(const RawDb&) = delete;

  void exec(const std::string& sql) {
    char* err = nullptr;
    int rc = sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err);
    EXPECT_EQ(rc, SQLITE_OK) << sql << ": " << (err ? err : "");
    sqlite3_free(err);
  }
  int64_t queryInt(const std::string& sql) {
    sqlite3_stmt* st = nullptr;
    EXPECT_EQ(sqlite3_prepare_v2(db_, sql.c_str(), -1, &st, nullptr), SQLITE_OK) << sql;
    int64_t v = -1;
    if (st && sqlite3_step(st) == SQLITE_ROW) v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return v;
  }
  std::string queryText(const std::string& sql) {
    sqlite3_stmt* st = nullptr;
    EXPECT_EQ(sqlite3_prepare_v2(db_, sql.c_str(), -1, &st, nullptr), SQLITE_OK) << sql;
    std::string v;
    if (st && sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0)) {
      v = reinterpret_cast<const char*>(sqlite3_column_text(st, 0));
    }
    sqlite3_finalize(st);
    return v;
  }
  // Flips the bits of one byte of the stored cubin of (op, variant), in place
  // through the incremental blob API: exactly what bit rot or an edit does.
  void flipCubinByte(const std::string& op, const std::string& variant, int offset = 7) {
    int64_t rowid = queryInt("SELECT rowid FROM entries WHERE op = '" + op + "' AND variant = '" + variant + "'");
    ASSERT_GT(rowid, 0);
    sqlite3_blob* blob = nullptr;
    ASSERT_EQ(sqlite3_blob_open(db_, "main", "entries", "cubin", rowid, /*flags=*/1, &blob), SQLITE_OK);
    unsigned char byte = 0;
    ASSERT_EQ(sqlite3_blob_read(blob, &byte, 1, offset), SQLITE_OK);
    byte ^= 0xff;
    ASSERT_EQ(sqlite3_blob_write(blob, &byte, 1, offset), SQLITE_OK);
    sqlite3_blob_close(blob);
  }
  sqlite3* handle() { return db_; }

 private:
  sqlite3* db_ = nullptr;
};

inline mode_t modeOf(const std::string& path) {
  struct stat st;
  EXPECT_EQ(::lstat(path.c_str(), &st), 0) << path;
  return st.st_mode & 07777;
}

inline std::string readFile(const std::string& path) {
  std::string out;
  if (FILE* f = std::fopen(path.c_str(), "rb")) {
    char buf[65536];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) out.append(buf, n);
    std::fclose(f);
  }
  return out;
}

inline void writeFile(const std::string& path, const std::string& bytes) {
  FILE* f = std::fopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr) << path;
  std::fwrite(bytes.data(), 1, bytes.size(), f);
  std::fclose(f);
}

// Copies the files a store leaves on disk (database, -wal, commit log; not the
// -shm index, which SQLite rebuilds) from `from` into a new private directory
// `to`: the state a machine finds after a crash at this moment.
inline void copyStoreFiles(const std::string& from, const std::string& to) {
  ASSERT_EQ(::mkdir(to.c_str(), 0700), 0) << to;
  for (const char* name : {"kernels.sqlite", "kernels.sqlite-wal", "kernels.commits"}) {
    std::string src = from + "/" + name;
    if (::access(src.c_str(), F_OK) != 0) continue;
    std::string dst = to + "/" + name;
    writeFile(dst, readFile(src));
    ::chmod(dst.c_str(), 0600);
  }
}

// Puts `walOnly` while another connection holds a read snapshot, so the
// passive checkpoints after each put cannot copy them into the database file,
// then copies the store's files to `crashDir` (copyStoreFiles): there those
// commits exist only in the -wal.
inline void putWithCommitsOnlyInWal(const std::string& dir, const std::vector<Entry>& base,
                                    const std::vector<Entry>& walOnly, const std::string& crashDir) {
  auto store = CacheStore::open(dir);
  for (const Entry& e : base) store->put(e);
  RawDb reader(dir);
  reader.exec("BEGIN");
  EXPECT_EQ(reader.queryInt("SELECT count(*) FROM entries"), static_cast<int64_t>(base.size()));
  for (const Entry& e : walOnly) store->put(e);
  copyStoreFiles(dir, crashDir);
  reader.exec("COMMIT");
}

}  // namespace hotkernel::cache::test
