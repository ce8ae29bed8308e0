#pragma once
// The on-disk format of the cache database: creation and version checks.
// The format itself is documented at the top of Schema.cpp and in cache/README.md.

#include <cstdint>

namespace hotkernel::cache::detail {

class Database;

// PRAGMA application_id of a hotkernel cache: "HKCA".
inline constexpr int32_t kApplicationId = 0x484B4341;

// Makes `db` a usable cache of format CacheStore::kFormatVersion or throws
// Error. Read-write: creates the schema in an empty database, switches it to
// WAL mode. Both modes refuse a newer format version, a database that is not
// a hotkernel cache, and one whose bookkeeping is inconsistent. Never
// modifies a database it refuses.
void prepareSchema(Database& db, bool readOnly);

}  // namespace hotkernel::cache::detail
