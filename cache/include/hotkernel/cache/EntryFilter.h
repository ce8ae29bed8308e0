#pragma once
// Selects cache entries by any combination of key parts (exact match).

#include <optional>
#include <string>

namespace hotkernel::cache {

struct EntryFilter {
  std::optional<std::string> fingerprint;
  std::optional<std::string> op;
  std::optional<std::string> variant;

  // True when no key part is set, i.e. the filter selects every entry.
  bool selectsAll() const { return !fingerprint && !op && !variant; }
};

}  // namespace hotkernel::cache
