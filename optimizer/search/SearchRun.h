#pragma once
// Internal to the search (Search.h): the state of one runSearchBatched call,
// shared by the files that make it up: the walk over the space (Search.cpp:
// rounds, halving, niches, stops), how new points are drawn (SearchMutation.cpp)
// and how batches go to the evaluator and into the lineage (SearchEvaluation.cpp).

#include <cstdint>
#include <limits>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "hotkernel/optimizer/Search.h"
#include "hotkernel/runtime/Check.h"

namespace hotkernel::detail {

// A new point waiting to be evaluated, with its place in the lineage.
struct Pending {
  SearchPoint point;
  CandidateOrigin origin = CandidateOrigin::Random;
  int parentId = Candidate::kNoParent;
  int tier = -1;
  std::string dimension;
  std::string mutation;

  static Pending root(SearchPoint point, CandidateOrigin origin) {
    Pending p;
    p.point = std::move(point);
    p.origin = origin;
    return p;
  }
};

// One search; the state of runSearchBatched.
class SearchRun {
 public:
  SearchRun(const SearchSpace& space, const BatchEvaluator& evaluate, const SearchOptions& options,
            const SearchObserver& observer)
      : space_(space), evaluate_(evaluate), options_(options), observer_(observer), rng_(options.seed) {
    result_.seed = options.seed;
  }

  SearchResult run();

 private:
  int remaining() const { return options_.maxEvaluations - result_.evaluations; }

  // Uniform in [0, n) from rng_ by rejection (Note [Search determinism]).
  size_t randomIndex(size_t n) {
    HOTKERNEL_INTERNAL_ASSERT(n > 0);
    const uint64_t range = static_cast<uint64_t>(n);
    const uint64_t limit = std::numeric_limits<uint64_t>::max() - std::numeric_limits<uint64_t>::max() % range;
    uint64_t x = rng_();
    while (x >= limit) x = rng_();
    return static_cast<size_t>(x % range);
  }

  std::optional<SearchPoint> randomPoint();
  // The values of the niche tiers' dimensions (Note [Algorithm niches]); empty when no tier is a niche.
  std::vector<int> nicheOf(const SearchPoint& point) const {
    std::vector<int> key;
    for (const SearchTier& tier : space_.tiers) {
      if (!tier.niche) continue;
      for (const SearchDimension& d : tier.dimensions) key.push_back(point.at(d.name));
    }
    return key;
  }
  std::optional<Pending> mutate(const Candidate& parent, int tier);
  int nextTier(int tier) const;

  // Appends and evaluates new candidates at `level` (as many as the budget allows).
  std::vector<int> evaluateNew(std::vector<Pending> pending, int round, int level);
  // Re-measures existing candidates at `level` (as many as the budget allows, in the given order).
  void remeasure(const std::vector<int>& ids, int level);
  // Runs the evaluator on `points` and stores the results into the nodes `ids`.
  void evaluateInto(const std::vector<int>& ids, int level);

  std::vector<int> okSortedByCost(const std::vector<int>& ids) const;
  // A successful candidate costs at most goodEnoughCost (when set).
  bool goodEnough() const {
    if (options_.goodEnoughCost <= 0) return false;
    for (const Candidate& c : result_.lineage) {
      if (c.ok() && *c.cost <= options_.goodEnoughCost) return true;
    }
    return false;
  }

  const SearchSpace& space_;
  const BatchEvaluator& evaluate_;
  const SearchOptions& options_;
  const SearchObserver& observer_;
  std::mt19937_64 rng_;
  SearchResult result_;
  std::set<SearchPoint> seen_;  // every point that has a node in the lineage
};

}  // namespace hotkernel::detail
