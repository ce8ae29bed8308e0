// The search space of Search.h: its checks, membership, size, and a point's description.

#include <algorithm>
#include <set>

#include "hotkernel/optimizer/Search.h"
#include "hotkernel/runtime/Check.h"

namespace hotkernel {

std::string describePoint(const SearchPoint& point) {
  std::string out;
  for (const auto& [name, value] : point) {
    if (!out.empty()) out += ' ';
    out += name + "=" + std::to_string(value);
  }
  return out;
}

void SearchSpace::check() const {
  std::set<std::string> names;
  for (const SearchTier& tier : tiers) {
    for (const SearchDimension& d : tier.dimensions) {
      HOTKERNEL_CHECK(!d.name.empty(), "a dimension of tier '", tier.name, "' has no name");
      HOTKERNEL_CHECK(names.insert(d.name).second, "dimension '", d.name, "' is declared twice");
      HOTKERNEL_CHECK(!d.values.empty(), "dimension '", d.name, "' has no values");
      std::set<int> values(d.values.begin(), d.values.end());
      HOTKERNEL_CHECK(values.size() == d.values.size(), "dimension '", d.name, "' lists a value twice");
    }
  }
  HOTKERNEL_CHECK(!names.empty(), "the search space has no dimension");
}

bool SearchSpace::contains(const SearchPoint& point) const {
  size_t dims = 0;
  for (const SearchTier& tier : tiers) {
    for (const SearchDimension& d : tier.dimensions) {
      auto it = point.find(d.name);
      if (it == point.end()) return false;
      if (std::find(d.values.begin(), d.values.end(), it->second) == d.values.end()) return false;
      ++dims;
    }
  }
  if (point.size() != dims) return false;
  return !isValid || isValid(point);
}

double SearchSpace::gridSize() const {
  double n = 1;
  for (const SearchTier& tier : tiers) {
    for (const SearchDimension& d : tier.dimensions) n *= static_cast<double>(d.values.size());
  }
  return n;
}

int SearchSpace::tierOf(const std::string& dimension) const {
  for (size_t t = 0; t < tiers.size(); ++t) {
    for (const SearchDimension& d : tiers[t].dimensions) {
      if (d.name == dimension) return static_cast<int>(t);
    }
  }
  return -1;
}

}  // namespace hotkernel
