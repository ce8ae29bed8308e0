#include "StoreSql.h"

#include "hotkernel/runtime/Check.h"

namespace hotkernel::cache::detail {

int64_t metaInt(Database& db, const char* key) {
  Statement st(db, std::string("SELECT CAST(value AS INTEGER) FROM meta WHERE key = '") + key + "'", "read meta");
  if (!st.step()) {
    HOTKERNEL_THROW("cache database ", db.path(), " lacks its meta record '", key, "'");
  }
  return st.integer(0);
}

std::string metaText(Database& db, const char* key) {
  Statement st(db, std::string("SELECT value FROM meta WHERE key = '") + key + "'", "read meta");
  if (!st.step()) {
    HOTKERNEL_THROW("cache database ", db.path(), " lacks its meta record '", key, "'");
  }
  return st.text(0);
}

WhereClause whereFor(const EntryFilter& filter) {
  WhereClause w;
  auto add = [&w](const char* column, const std::optional<std::string>& value) {
    if (!value) return;
    w.sql += w.values.empty() ? " WHERE " : " AND ";
    w.sql += column;
    w.sql += " = ?" + std::to_string(w.values.size() + 1);
    w.values.push_back(*value);
  };
  add("fingerprint", filter.fingerprint);
  add("op", filter.op);
  add("variant", filter.variant);
  return w;
}

}  // namespace hotkernel::cache::detail
