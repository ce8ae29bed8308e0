#pragma once
// Note [Cache tiers]
// A process reads kernels from its own cache (HOTKERNEL_CACHE_DIR, the one it
// writes) and then from the read-only caches listed in HOTKERNEL_CACHE_PATH,
// in that order: for each (op, variant) of a fingerprint the first tier that
// holds an entry wins, whatever its decision, so a local keep_aten overrides a
// baked kernel and a later tier never adds a second entry for a variant. Each
// read-only tier is opened with CacheStore::openReadOnly (root's files are
// accepted there, a directory the process cannot write is opened immutable:
// Note [Read-only cache directories] in src/SafePath.h) and with the same
// trust as the own cache (HOTKERNEL_CACHE_KEY_FILE: its entries must be signed
// with the key too). A tier that is refused or holds no cache is skipped with
// one log line; the others still load. Entries are never copied between tiers.

#include <memory>
#include <string>
#include <vector>

#include "hotkernel/cache/CacheStore.h"
#include "hotkernel/cache/Entry.h"

namespace hotkernel::cache {

// Opens the caches of `dirs` for reading, in order; a directory that is
// refused or holds no cache is logged once and left out.
std::vector<std::unique_ptr<CacheStore>> openReadOnlyTiers(const std::vector<std::string>& dirs);

// The verified entries of `fingerprint` over `own` (may be null) and then
// `tiers`, the first tier's entry for each (op, variant) only (Note [Cache
// tiers]). A tier whose read fails is logged and skipped.
std::vector<Entry> entriesOverTiers(const CacheStore* own, const std::vector<std::unique_ptr<CacheStore>>& tiers,
                                    const std::string& fingerprint);

}  // namespace hotkernel::cache
