#include "hotkernel/optimizer/Search.h"

#include <algorithm>
#include <cmath>
#include <exception>
#include <limits>
#include <random>
#include <set>
#include <utility>

#include "hotkernel/runtime/Check.h"
#include "hotkernel/runtime/Logging.h"

namespace hotkernel {
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

void SearchRun::evaluateInto(const std::vector<int>& ids, int level) {
  if (ids.empty()) return;
  std::vector<SearchPoint> points;
  points.reserve(ids.size());
  for (int id : ids) points.push_back(result_.lineage[static_cast<size_t>(id)].point);
  result_.evaluations += static_cast<int>(ids.size());

  std::vector<Evaluation> results;
  std::string thrown;
  try {
    results = evaluate_(points, level);
  } catch (const std::exception& e) {
    thrown = std::string("evaluator threw: ") + e.what();
  } catch (...) {
    thrown = "evaluator threw an unknown exception";
  }
  if (thrown.empty()) {
    HOTKERNEL_CHECK(results.size() == ids.size(), "the batch evaluator returned ", results.size(), " results for ",
                    ids.size(), " points");
  } else {
    HOTKERNEL_LOG(Debug) << "search: " << thrown;
    results.assign(ids.size(), Evaluation::failed(thrown));
  }

  for (size_t i = 0; i < ids.size(); ++i) {
    Candidate& c = result_.lineage[static_cast<size_t>(ids[i])];
    Evaluation& e = results[i];
    c.evaluations += 1;
    c.budgetLevel = level;
    if (e.cost && std::isfinite(*e.cost) && *e.cost >= 0) {
      c.cost = e.cost;
      c.failure.clear();
    } else {
      c.cost.reset();
      if (e.cost) {
        c.failure = "invalid cost " + std::to_string(*e.cost);
      } else {
        c.failure = e.failure.empty() ? "failed" : std::move(e.failure);
      }
    }
    if (observer_) observer_(c);
  }
}

std::vector<int> SearchRun::evaluateNew(std::vector<Pending> pending, int round, int level) {
  if (static_cast<int>(pending.size()) > remaining()) pending.resize(static_cast<size_t>(std::max(0, remaining())));
  std::vector<int> ids;
  for (Pending& p : pending) {
    Candidate c;
    c.id = static_cast<int>(result_.lineage.size());
    c.parentId = p.parentId;
    c.origin = p.origin;
    c.round = round;
    c.tier = p.tier;
    c.dimension = std::move(p.dimension);
    c.mutation = std::move(p.mutation);
    c.point = std::move(p.point);
    c.budgetLevel = level;
    seen_.insert(c.point);
    ids.push_back(c.id);
    result_.lineage.push_back(std::move(c));
  }
  evaluateInto(ids, level);
  return ids;
}

void SearchRun::remeasure(const std::vector<int>& ids, int level) {
  std::vector<int> todo;
  for (int id : ids) {
    if (static_cast<int>(todo.size()) >= remaining()) break;
    if (result_.lineage[static_cast<size_t>(id)].budgetLevel < level) todo.push_back(id);
  }
  evaluateInto(todo, level);
}

std::vector<int> SearchRun::okSortedByCost(const std::vector<int>& ids) const {
  std::vector<int> ok;
  for (int id : ids) {
    if (result_.lineage[static_cast<size_t>(id)].ok()) ok.push_back(id);
  }
  std::stable_sort(ok.begin(), ok.end(), [this](int a, int b) {
    return *result_.lineage[static_cast<size_t>(a)].cost < *result_.lineage[static_cast<size_t>(b)].cost;
  });
  return ok;
}

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

}  // namespace

std::string describePoint(const SearchPoint& point) {
  std::string out;
  for (const auto& [name, value] : point) {
    if (!out.empty()) out += ' ';
    out += name + "=" + std::to_string(value);
  }
  return out;
}

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

SearchResult runSearchBatched(const SearchSpace& space, const BatchEvaluator& evaluate, const SearchOptions& options,
                              const SearchObserver& observer) {
  space.check();
  checkOptions(options);
  HOTKERNEL_CHECK(static_cast<bool>(evaluate), "no evaluator");
  return SearchRun(space, evaluate, options, observer).run();
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

}  // namespace hotkernel
