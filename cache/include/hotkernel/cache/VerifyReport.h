#pragma once
// The outcome of re-checking one stored entry (CacheStore::verify).

#include <string>

namespace hotkernel::cache {

enum class VerifyStatus {
  Ok,            // cubin and record digests match, fields well formed
  HashMismatch,  // stored bytes differ from what put() wrote (cubin or metadata)
  Malformed,     // a field breaks the entry invariants, or the database itself is damaged
  Lost,          // a committed write the commit log records is missing from the database
                 // (Note [Commits lost with the WAL] in cache/src/CommitLog.h)
  // Signed mode only (a key is configured: Note [Cache key file] in EntryKey.h):
  Unsigned,      // the entry carries no signature
  BadSignature,  // its signature does not verify under the key (or the configured key was refused)
};

// "ok", "hash-mismatch", "malformed", "lost", "unsigned", "bad-signature"
const char* toString(VerifyStatus status);

struct VerifyReport {
  // All three are empty for a report about the database as a whole (PRAGMA quick_check,
  // the summary of lost commits, an unreadable commit log).
  std::string fingerprint;
  std::string op;
  std::string variant;
  VerifyStatus status = VerifyStatus::Ok;
  std::string detail;  // empty when Ok; otherwise what failed, for humans
};

}  // namespace hotkernel::cache
