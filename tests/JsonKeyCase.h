#pragma once
// The key-case check of the tests of every JSON document hotkernel writes for
// its users (docs/design/json-style.md): every key is snake_case,
// ^[a-z0-9_]+$, except the keys of objects that are maps of data (a family's
// parameter names, harness stage names), which the caller names by path.

#include <nlohmann/json.hpp>

#include <set>
#include <string>
#include <vector>

namespace hotkernel::jsoncase {

// Whether `key` matches ^[a-z0-9_]+$.
inline bool isSnakeCase(const std::string& key) {
  if (key.empty()) return false;
  for (char c : key) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) return false;
  }
  return true;
}

// The paths ("/timings/atenUs", "/variants/*/gpuNs") of the keys of `j` that
// are not snake_case. An array's elements share the path segment "*". The
// objects at the paths in `dataMaps` ("/params", "/ops/*/args") are maps of
// data: neither their keys nor their values are checked.
inline std::vector<std::string> nonSnakeCaseKeys(const nlohmann::json& j, const std::set<std::string>& dataMaps = {},
                                                 const std::string& path = "") {
  std::vector<std::string> out;
  if (dataMaps.count(path) != 0) return out;
  if (j.is_object()) {
    for (const auto& [key, value] : j.items()) {
      const std::string child = path + "/" + key;
      if (!isSnakeCase(key)) out.push_back(child);
      for (std::string& p : nonSnakeCaseKeys(value, dataMaps, child)) out.push_back(std::move(p));
    }
  } else if (j.is_array()) {
    for (const nlohmann::json& element : j) {
      for (std::string& p : nonSnakeCaseKeys(element, dataMaps, path + "/*")) out.push_back(std::move(p));
    }
  }
  return out;
}

}  // namespace hotkernel::jsoncase
