// How the search draws new points: random valid points, mutations of a
// survivor on a tier (Note [Mutations and validity] in Search.h), the next
// tier with dimensions.

#include <algorithm>
#include <cstddef>

#include "SearchRun.h"

namespace hotkernel::detail {

std::optional<SearchPoint> SearchRun::randomPoint() {
  for (int attempt = 0; attempt < options_.maxRandomAttempts; ++attempt) {
    SearchPoint p;
    for (const SearchTier& tier : space_.tiers) {
      for (const SearchDimension& d : tier.dimensions) p[d.name] = d.values[randomIndex(d.values.size())];
    }
    if (!seen_.count(p) && space_.contains(p)) return p;
  }
  return std::nullopt;
}

std::optional<Pending> SearchRun::mutate(const Candidate& parent, int tier) {
  // Every single change on the tier that gives a new valid point (Note [Mutations and validity]).
  struct Change {
    const SearchDimension* dim;
    int value;
    bool neighbour;
  };
  std::vector<Change> changes;
  for (const SearchDimension& d : space_.tiers[static_cast<size_t>(tier)].dimensions) {
    const int current = parent.point.at(d.name);
    const auto at = std::find(d.values.begin(), d.values.end(), current) - d.values.begin();
    for (size_t i = 0; i < d.values.size(); ++i) {
      if (d.values[i] == current) continue;
      SearchPoint p = parent.point;
      p[d.name] = d.values[i];
      if (seen_.count(p) || !space_.contains(p)) continue;
      const auto distance = static_cast<ptrdiff_t>(i) - at;
      changes.push_back({&d, d.values[i], distance == 1 || distance == -1});
    }
  }
  auto describe = [&parent](const SearchDimension& d, int value) {
    return d.name + " " + std::to_string(parent.point.at(d.name)) + "->" + std::to_string(value);
  };
  Pending out;
  out.origin = CandidateOrigin::Mutation;
  out.parentId = parent.id;
  out.tier = tier;
  if (!changes.empty()) {
    // A neighbouring value half of the time (local refinement), any value otherwise (jumps out of local optima).
    std::vector<const Change*> neighbours;
    for (const Change& c : changes) {
      if (c.neighbour) neighbours.push_back(&c);
    }
    const Change& c = !neighbours.empty() && randomIndex(2) == 0 ? *neighbours[randomIndex(neighbours.size())]
                                                                 : changes[randomIndex(changes.size())];
    out.point = parent.point;
    out.point[c.dim->name] = c.value;
    out.dimension = c.dim->name;
    out.mutation = describe(*c.dim, c.value);
    return out;
  }

  // No single change works: change one dimension of the tier and one more of any tier.
  std::vector<const SearchDimension*> tierDims, allDims;
  for (size_t t = 0; t < space_.tiers.size(); ++t) {
    for (const SearchDimension& d : space_.tiers[t].dimensions) {
      if (d.values.size() < 2) continue;
      allDims.push_back(&d);
      if (static_cast<int>(t) == tier) tierDims.push_back(&d);
    }
  }
  if (tierDims.empty() || allDims.size() < 2) return std::nullopt;
  auto otherValue = [this, &parent](const SearchDimension& d) {
    const int current = parent.point.at(d.name);
    int v = current;
    while (v == current) v = d.values[randomIndex(d.values.size())];
    return v;
  };
  for (int attempt = 0; attempt < options_.maxRandomAttempts; ++attempt) {
    const SearchDimension& first = *tierDims[randomIndex(tierDims.size())];
    const SearchDimension* second = &first;
    while (second == &first) second = allDims[randomIndex(allDims.size())];
    SearchPoint p = parent.point;
    const int a = otherValue(first);
    const int b = otherValue(*second);
    p[first.name] = a;
    p[second->name] = b;
    if (seen_.count(p) || !space_.contains(p)) continue;
    out.point = std::move(p);
    out.dimension = first.name;
    out.mutation = describe(first, a) + ", " + describe(*second, b);
    return out;
  }
  return std::nullopt;
}

int SearchRun::nextTier(int tier) const {
  const int n = static_cast<int>(space_.tiers.size());
  for (int step = 1; step <= n; ++step) {
    const int t = (tier + step) % n;
    if (!space_.tiers[static_cast<size_t>(t)].dimensions.empty()) return t;
  }
  return tier;
}

}  // namespace hotkernel::detail
