#pragma once
// The commit log: a plain file beside the database that records every
// committed write, so that commits lost with a damaged write-ahead log are
// noticed and named (Note [Commits lost with the WAL]).
//
// Note [Commits lost with the WAL]
// A commit lives only in kernels.sqlite-wal until a checkpoint copies it into
// kernels.sqlite. When the -wal file is damaged (a flipped bit, a truncation,
// deletion, a crash of the machine before its pages reached the disk),
// SQLite's recovery replays the frames up to the first one whose checksum
// fails and silently drops every later commit: the database opens, its
// quick_check says ok, and the entries are simply gone. Nothing inside the
// database can tell, since the evidence would live in the same lost frames.
//
// So every write transaction takes the next commit number (meta 'commit_seq',
// stored in the same transaction) and stamps it on the rows it writes
// (entries.commit_seq); after COMMIT it appends one line per key it changed to
// <dir>/kernels.commits. A commit the log records is lost when the database
// no longer reflects it: a "put" of key K at commit s needs a row K with
// commit_seq >= s, a "remove" of K at s needs no row K or one with
// commit_seq > s. Anything else is reported by CacheStore::verify as
// VerifyStatus::Lost, with the key and the commit numbers.
//
// Why this cannot raise false alarms: the line is appended only after COMMIT
// returned, so a writer killed in between leaves the log behind the database
// (never flagged); a verifier reads the log before it reads the database, so
// every line it sees belongs to a commit that its later database snapshot
// must contain. Commit numbers are never reused: a read-write open raises
// meta 'commit_seq' to the highest number the log holds for this store, so
// after a loss new commits get numbers above the lost ones, and a lost key
// stays reported until it is written again (or removed).
//
// Besides, every put asks for a passive checkpoint (CacheStore::put), so a
// commit normally stays in the -wal only while a reader holds an older
// snapshot; the log is what reports the commits that were lost anyway.
//
// What the log does not cover: damage to the log itself (a bad line is
// skipped, so that commit is simply not checked) and a deleted log (a
// read-write open starts a new one and logs a warning). Lines carry the
// store's random id (meta 'store_id'): a log left behind by a database that
// was deleted and created anew is ignored, not taken as losses.
//
// Note [Commit log format, version 1]
// A text file, mode 0600, appended to under flock(LOCK_EX):
//
//   hotkernel-commit-log 1\n                        -- header, the first line
//   <16 hex digits> <JSON object>\n                 -- one line per committed key
//
// The 16 hex digits are the first 16 of the SHA-256 of the JSON text; a line
// whose digits do not match (torn by a kill, damaged) is skipped. The object:
//   {"store":"<meta store_id>","seq":<commit number>,"kind":"put"|"remove",
//    "fingerprint":"...","op":"...","variant":"..."}
// A writer killed mid-append leaves a line without its newline; the next
// appender first ends it with "\n", so the damage stays in that one line.
// A file whose header names another version is not read (no check is made).
// Compaction (at a read-write open, past kCompactAtBytes) rewrites the file
// through a temporary file and rename(), keeping only lines that are not yet
// settled in the checkpointed database file; appenders re-open the file when
// the name no longer points to the inode they locked.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace hotkernel::cache::detail {

inline constexpr const char* kCommitLogFileName = "kernels.commits";
inline constexpr const char* kCommitLogHeader = "hotkernel-commit-log 1";
// A read-write open compacts a log larger than this.
inline constexpr size_t kCompactAtBytes = 256 * 1024;

struct CommitRecord {
  std::string store;  // meta 'store_id' of the database that committed it
  int64_t seq = 0;    // commit number (meta 'commit_seq' after the commit)
  std::string kind;   // "put" or "remove"
  std::string fingerprint;
  std::string op;
  std::string variant;
};

struct CommitLogContents {
  bool exists = false;
  bool readable = false;  // exists and has a header of this version
  std::vector<CommitRecord> records;
  size_t damagedLines = 0;  // lines skipped: digest mismatch, not JSON, missing fields
  std::string problem;      // why the file could not be read, when !readable and exists
};

// One line of the format above, with its newline.
std::string encodeCommitRecord(const CommitRecord& record);

// Appends `records` in one write, under the file lock. Creates the file (0600)
// with its header if it is missing or empty. Throws Error on failure.
void appendCommitRecords(const std::string& path, const std::vector<CommitRecord>& records);

// Reads the whole log. Never throws for damage; a missing file gives exists = false.
CommitLogContents readCommitLog(const std::string& path);

// Rewrites the log under the file lock (appenders wait), keeping the readable
// records for which `keep` is true; damaged lines are dropped. Returns how
// many records were dropped. Throws Error on failure (the old log stays).
size_t compactCommitLog(const std::string& path, const std::function<bool(const CommitRecord&)>& keep);

}  // namespace hotkernel::cache::detail
