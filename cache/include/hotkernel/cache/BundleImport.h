#pragma once
// Importing a decoded bundle's entries into a cache (`hotkernel cache import`):
// each entry goes through CacheStore::put, so it is stored with its own
// digests and, in signed mode, signed with the importing store's key.
//
// Note [Importing a bundle is idempotent]
// An entry whose (fingerprint, op, variant) the cache already holds with the
// same record (the record digest of Note [Record digest, format v1] covers
// every field and the cubin's SHA-256) is left alone, so importing a bundle a
// second time writes nothing; when every entry is unchanged the cache is not
// even opened for writing. A local entry that differs is replaced unless it is
// newer (a larger created_unix: tuned here after the bundle was made), which
// is kept. A local entry that fails its checks (damaged, or unsigned / badly
// signed under the configured key) is replaced. Each put is its own
// transaction: a failed write (disk full) leaves the entries put before it,
// and importing again finishes the job.

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "hotkernel/cache/Entry.h"
#include "hotkernel/cache/EntryKey.h"

namespace hotkernel::cache {

enum class ImportAction {
  Add,        // the cache has no entry with this key
  Replace,    // it has one that differs and is not newer, or one that fails its checks
  Unchanged,  // it has this very entry
  KeepLocal,  // it has a different, newer one
};
const char* toString(ImportAction action);  // "added", "replaced", "unchanged", "kept"

struct ImportCounts {
  size_t added = 0;
  size_t replaced = 0;
  size_t unchanged = 0;
  size_t kept = 0;

  size_t written() const { return added + replaced; }
};

// What importing `incoming` does to a cache whose entry with its key is
// `local` (nullopt: none); `localFailsChecks`: the cache holds a row with
// this key that does not verify (CacheStore::get refused it).
ImportAction importActionFor(const Entry& incoming, const std::optional<Entry>& local, bool localFailsChecks);

// Imports `entries` (verified: decodeBundle's) into the cache in `dir`
// (created if missing) under `trust`, as Note [Importing a bundle is
// idempotent] says. Throws Error when the cache cannot be opened or a write
// fails.
ImportCounts importEntries(const std::string& dir, const EntryTrust& trust, const std::vector<Entry>& entries);

}  // namespace hotkernel::cache
