#include "hotkernel/optimizer/Search.h"

#include <algorithm>
#include <cmath>
#include <exception>
#include <limits>
#include <set>
#include <utility>

#include "SearchRun.h"
#include "hotkernel/runtime/Check.h"

namespace hotkernel {
namespace detail {

SearchResult SearchRun::run() {
  // Round 0: the seeds, then random valid points.
  std::vector<Pending> first;
  std::set<SearchPoint> seedPoints;
  for (const SearchPoint& s : options_.seeds) {
    if (!space_.contains(s) || seedPoints.count(s)) {
      ++result_.skippedSeeds;
      continue;
    }
    seedPoints.insert(s);
    first.push_back(Pending::root(s, CandidateOrigin::Seed));
  }
  // Adds random valid points not evaluated yet and not already in `into`, up to `target`.
  auto addRandom = [this](std::vector<Pending>& into, size_t target) {
    std::set<SearchPoint> queued;
    for (const Pending& p : into) queued.insert(p.point);
    while (into.size() < target) {
      std::optional<SearchPoint> p;
      for (int tries = 0; tries < 4 && (!p || queued.count(*p)); ++tries) p = randomPoint();
      if (!p || queued.count(*p)) return;
      queued.insert(*p);
      into.push_back(Pending::root(std::move(*p), CandidateOrigin::Random));
    }
  };
  addRandom(first, static_cast<size_t>(options_.initialPopulation));
  std::vector<int> population = evaluateNew(std::move(first), 0, 0);
  result_.rounds = 1;
  if (population.empty()) {
    result_.stop = remaining() <= 0 ? SearchStop::EvaluationBudget : SearchStop::Exhausted;
    return std::move(result_);
  }

  int tier = nextTier(static_cast<int>(space_.tiers.size()) - 1);  // the first tier with dimensions
  int stalled = 0;                                                 // rounds in a row without improvement
  int tierStalled = 0;                                             // of those, on the current tier
  int barren = 0;                                                  // rounds in a row that found no new point at all
  const int tierCount = static_cast<int>(space_.tiers.size());
  while (true) {
    if (goodEnough()) {
      result_.stop = SearchStop::GoodEnough;
      break;
    }
    if (options_.outOfTime && options_.outOfTime()) {
      result_.stop = SearchStop::OutOfTime;
      break;
    }
    if (remaining() <= 0) {
      result_.stop = SearchStop::EvaluationBudget;
      break;
    }
    if (stalled >= options_.maxRoundsWithoutImprovement) {
      result_.stop = SearchStop::NoImprovement;
      break;
    }
    if (barren >= tierCount) {
      result_.stop = SearchStop::Exhausted;
      break;
    }
    const int round = result_.rounds;
    const int level = std::min(round, options_.maxBudgetLevel);

    // 1-2. The best survive (halving down to minSurvivors) and are re-measured at this round's level, best first.
    std::vector<int> ok = okSortedByCost(population);
    const int halved = round < 31 ? (options_.initialPopulation + (1 << round) - 1) >> round : 1;
    const size_t keep = std::min(ok.size(), static_cast<size_t>(std::max(options_.minSurvivors, halved)));
    std::vector<int> survivors(ok.begin(), ok.begin() + static_cast<ptrdiff_t>(keep));
    // The best of every niche survives too (Note [Algorithm niches]); `ok` is sorted, so the first seen is the best.
    std::set<std::vector<int>> niches;
    for (size_t i = 0; i < ok.size(); ++i) {
      if (niches.insert(nicheOf(result_.lineage[static_cast<size_t>(ok[i])].point)).second && i >= keep) {
        survivors.push_back(ok[i]);
      }
    }
    remeasure(survivors, level);
    survivors = okSortedByCost(survivors);
    std::vector<int> measured;  // survivors whose cost is at this level
    for (int id : survivors) {
      if (result_.lineage[static_cast<size_t>(id)].budgetLevel == level) measured.push_back(id);
    }
    const double baseline = measured.empty() ? std::numeric_limits<double>::infinity()
                                             : *result_.lineage[static_cast<size_t>(measured.front())].cost;

    // 3. Children on the current tier; a fresh random population when nothing survived.
    std::vector<Pending> children;
    if (survivors.empty()) {
      addRandom(children, static_cast<size_t>(options_.initialPopulation));
    } else {
      for (int id : survivors) {
        for (int k = 0; k < options_.childrenPerSurvivor; ++k) {
          std::optional<Pending> child = mutate(result_.lineage[static_cast<size_t>(id)], tier);
          if (!child) break;
          seen_.insert(child->point);  // so siblings differ; evaluateNew inserts it again
          children.push_back(std::move(*child));
        }
      }
    }
    // Children the budget cut off were reserved in seen_ but never evaluated: release them.
    if (static_cast<int>(children.size()) > remaining()) {
      for (size_t i = static_cast<size_t>(std::max(0, remaining())); i < children.size(); ++i) {
        seen_.erase(children[i].point);
      }
    }
    std::vector<int> born = evaluateNew(std::move(children), round, level);
    result_.rounds += 1;

    // 4. Improvement: a child beat the best survivor at this level.
    bool improved = false;
    for (int id : born) {
      const Candidate& c = result_.lineage[static_cast<size_t>(id)];
      if (c.ok() && *c.cost < baseline * (1.0 - options_.minRelativeImprovement)) improved = true;
    }
    barren = born.empty() ? barren + 1 : 0;
    if (improved) {
      stalled = 0;
      tierStalled = 0;
    } else {
      ++stalled;
      ++tierStalled;
      // A tier that cannot produce a new point is done at once.
      if (tierStalled >= options_.tierPatience || born.empty()) {
        tier = nextTier(tier);
        tierStalled = 0;
      }
    }
    population = survivors;
    population.insert(population.end(), born.begin(), born.end());
  }

  // The best candidate measured at the highest level any successful candidate reached.
  int bestLevel = -1;
  for (const Candidate& c : result_.lineage) {
    if (c.ok()) bestLevel = std::max(bestLevel, c.budgetLevel);
  }
  for (const Candidate& c : result_.lineage) {
    if (!c.ok() || c.budgetLevel != bestLevel) continue;
    if (result_.bestId < 0 || *c.cost < *result_.lineage[static_cast<size_t>(result_.bestId)].cost) {
      result_.bestId = c.id;
    }
  }
  return std::move(result_);
}

}  // namespace detail

namespace {

void checkOptions(const SearchOptions& o) {
  HOTKERNEL_CHECK(o.initialPopulation >= 1, "initialPopulation must be >= 1, got ", o.initialPopulation);
  HOTKERNEL_CHECK(o.minSurvivors >= 1, "minSurvivors must be >= 1, got ", o.minSurvivors);
  HOTKERNEL_CHECK(o.childrenPerSurvivor >= 1, "childrenPerSurvivor must be >= 1, got ", o.childrenPerSurvivor);
  HOTKERNEL_CHECK(o.maxBudgetLevel >= 0, "maxBudgetLevel must be >= 0, got ", o.maxBudgetLevel);
  HOTKERNEL_CHECK(o.tierPatience >= 1, "tierPatience must be >= 1, got ", o.tierPatience);
  HOTKERNEL_CHECK(o.maxRoundsWithoutImprovement >= 1, "maxRoundsWithoutImprovement must be >= 1, got ",
                  o.maxRoundsWithoutImprovement);
  HOTKERNEL_CHECK(o.maxEvaluations >= 0, "maxEvaluations must be >= 0, got ", o.maxEvaluations);
  HOTKERNEL_CHECK(o.minRelativeImprovement >= 0 && o.minRelativeImprovement < 1,
                  "minRelativeImprovement must be in [0, 1), got ", o.minRelativeImprovement);
  HOTKERNEL_CHECK(o.maxRandomAttempts >= 1, "maxRandomAttempts must be >= 1, got ", o.maxRandomAttempts);
  HOTKERNEL_CHECK(std::isfinite(o.goodEnoughCost) && o.goodEnoughCost >= 0,
                  "goodEnoughCost must be finite and >= 0, got ", o.goodEnoughCost);
}

}  // namespace

const char* toString(CandidateOrigin origin) {
  switch (origin) {
    case CandidateOrigin::Seed:
      return "seed";
    case CandidateOrigin::Random:
      return "random";
    case CandidateOrigin::Mutation:
      return "mutation";
  }
  return "unknown";
}

const char* toString(SearchStop stop) {
  switch (stop) {
    case SearchStop::NoImprovement:
      return "no_improvement";
    case SearchStop::EvaluationBudget:
      return "evaluation_budget";
    case SearchStop::GoodEnough:
      return "good_enough";
    case SearchStop::OutOfTime:
      return "out_of_time";
    case SearchStop::Exhausted:
      return "exhausted";
  }
  return "unknown";
}

SearchResult runSearchBatched(const SearchSpace& space, const BatchEvaluator& evaluate, const SearchOptions& options,
                              const SearchObserver& observer) {
  space.check();
  checkOptions(options);
  HOTKERNEL_CHECK(static_cast<bool>(evaluate), "no evaluator");
  return detail::SearchRun(space, evaluate, options, observer).run();
}

SearchResult runSearch(const SearchSpace& space, const Evaluator& evaluate, const SearchOptions& options,
                       const SearchObserver& observer) {
  HOTKERNEL_CHECK(static_cast<bool>(evaluate), "no evaluator");
  // One call per point; an exception fails only its own point.
  BatchEvaluator batch = [&evaluate](const std::vector<SearchPoint>& points, int level) {
    std::vector<Evaluation> out;
    out.reserve(points.size());
    for (const SearchPoint& p : points) {
      try {
        out.push_back(evaluate(p, level));
      } catch (const std::exception& e) {
        out.push_back(Evaluation::failed(std::string("evaluator threw: ") + e.what()));
      } catch (...) {
        out.push_back(Evaluation::failed("evaluator threw an unknown exception"));
      }
    }
    return out;
  };
  return runSearchBatched(space, batch, options, observer);
}

std::optional<size_t> acceptedCandidate(const std::vector<TimedCandidateCost>& timed) {
  const TimedCandidateCost* chosen = nullptr;
  for (const TimedCandidateCost& t : timed) {
    if (!t.clears) continue;
    if (!chosen || t.level > chosen->level || (t.level == chosen->level && t.cost < chosen->cost)) chosen = &t;
  }
  if (!chosen) return std::nullopt;
  return chosen->index;
}

}  // namespace hotkernel
