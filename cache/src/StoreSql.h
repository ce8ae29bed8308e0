#pragma once
// What the store's reads, writes and commit-log checks share (internal to
// cache/src): the meta table's values and the WHERE clause of an EntryFilter.

#include <cstdint>
#include <string>
#include <vector>

#include "Sqlite.h"
#include "hotkernel/cache/EntryFilter.h"

namespace hotkernel::cache::detail {

// The meta record `key` as an integer or as text; throws Error naming the
// database when it is missing.
int64_t metaInt(Database& db, const char* key);
std::string metaText(Database& db, const char* key);

// " WHERE a = ?1 AND b = ?2" for the parts of `filter` that are set.
struct WhereClause {
  std::string sql;
  std::vector<std::string> values;
  void bind(Statement& st) const {
    for (size_t i = 0; i < values.size(); ++i) st.bindText(static_cast<int>(i + 1), values[i]);
  }
};

WhereClause whereFor(const EntryFilter& filter);

}  // namespace hotkernel::cache::detail
