#pragma once
// The on-disk format of the cache database: creation and version checks.
// The format itself is documented at the top of Schema.cpp and in cache/README.md.

#include <cstdint>

namespace hotkernel::cache::detail {

class Database;

// PRAGMA application_id of a hotkernel cache: "HKCA".
inline constexpr int32_t kApplicationId = 0x484B4341;

// Makes `db` a usable cache or throws Error, and returns its format version.
// Read-write: creates the schema in an empty database or migrates an older
// format to CacheStore::kFormatVersion, switches it to WAL mode. Read-only:
// accepts formats 1, 2 and 3 as they are. Both modes refuse a newer format
// version, a database that is not a hotkernel cache, and one whose
// bookkeeping is inconsistent. Never modifies a database it refuses.
int prepareSchema(Database& db, bool readOnly);

}  // namespace hotkernel::cache::detail
