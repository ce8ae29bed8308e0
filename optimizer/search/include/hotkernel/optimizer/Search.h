#pragma once
// Tiered successive halving over a kernel family's parameter space, with a
// lineage tree of every evaluated candidate. Generic: a point is a map from
// dimension name to an integer value; the evaluator (compile, check, time) is
// a callback. No torch, no GPU.
//
// Note [Tiered successive halving]
// Round 0 evaluates a first population (the family's best guesses, then
// random valid points) at budget level 0, the cheapest measurement. Each
// following round
//   1. keeps the best of the population: initialPopulation / 2^round of them
//      (the halving), never fewer than minSurvivors, plus the best of each
//      niche (Note [Algorithm niches]); failed candidates never survive,
//   2. raises the budget level (up to maxBudgetLevel) and re-measures the
//      survivors at it, so a round's costs are compared at one level,
//   3. mutates every survivor into children on the current tier (one
//      dimension of the tier changed; a neighbouring value or any other one)
//      and measures them at the same level,
//   4. calls the round an improvement when a child beats the best survivor by
//      more than minRelativeImprovement.
// The tiers go from cheap, broad knobs to narrow ones: 0 launch geometry
// (threads, rows per CTA), 1 memory access (vector width, items per thread),
// 2 algorithm variant (register-resident, streaming, split rows), 3
// architecture-specific (clusters). After tierPatience rounds without
// improvement the search moves to the next tier (wrapping around, skipping
// empty tiers). It stops after maxRoundsWithoutImprovement rounds in a row
// without improvement, when maxEvaluations evaluator calls are spent, or when
// no new valid point can be found; and, checked first before every round,
// when a candidate's cost is at or below goodEnoughCost (e.g. 90% of the
// roofline: Note [Stopping a target's search] in TargetBudget.h) or when
// outOfTime() says the target's time budget is spent. The default patience (2 rounds x 4 tiers)
// lets every tier be tried once after the last improvement.
//
// Note [Algorithm niches]
// A new algorithm variant starts untuned: split rows with one CTA per row
// loses to a well-tuned register-resident kernel, and would be dropped
// before the architecture tier could give it the cluster that makes it the
// fastest. So the best candidate of every niche (every combination of the
// values of the tiers marked `niche`) survives each round in addition to the
// best overall, and keeps being mutated on every tier. The number of niches
// is the product of those tiers' value counts, so mark only small tiers.
//
// Note [Search determinism]
// Given the same space, options (seed included) and evaluator results, the
// search evaluates the same points in the same order and builds the same
// lineage: it draws from std::mt19937_64, whose sequence the standard fixes,
// through its own integer mapping (the standard distributions are not
// portable across standard libraries). The seed is an input: the optimizer
// passes a fresh random one and logs it, so a run can be replayed.
//
// Note [Mutations and validity]
// Validity predicates couple dimensions (e.g. threads * vec * items >= cols),
// so changing one dimension alone is often invalid. A mutation first tries
// single changes on the current tier; when those keep failing the predicate
// it also changes one more dimension of any tier. The point is checked
// against the space (every dimension present with an allowed value, nothing
// else, the predicate) before it is evaluated; invalid points are never
// evaluated and never enter the lineage. A point is evaluated as a new
// candidate at most once per search.

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace hotkernel {

// A parameter point: dimension name -> value.
using SearchPoint = std::map<std::string, int>;

// "items=4 threads=256 vec=8" (names in order).
std::string describePoint(const SearchPoint& point);

struct SearchDimension {
  std::string name;
  std::vector<int> values;  // allowed values, in a meaningful order (neighbours are adjacent)
};

struct SearchTier {
  std::string name;                         // "launch geometry", "memory access", "algorithm", "architecture"
  std::vector<SearchDimension> dimensions;  // may be empty: the tier is skipped
  // Candidates that differ in this tier's values belong to different niches
  // (Note [Algorithm niches]); typically set on the algorithm tier.
  bool niche = false;
};

struct SearchSpace {
  std::vector<SearchTier> tiers;  // index = tier number (Note [Tiered successive halving])
  // Extra validity (e.g. the family's guard for the variant); empty: every
  // point of the grid is valid. Must be deterministic and must not throw.
  std::function<bool(const SearchPoint&)> isValid;

  // Throws Error unless there is at least one dimension, names are non-empty
  // and unique across tiers, and every value list is non-empty without duplicates.
  void check() const;
  // Every dimension present with an allowed value, no other key, and isValid.
  bool contains(const SearchPoint& point) const;
  // Number of grid points (valid or not), as a double (it can be large).
  double gridSize() const;
  // Tier of a dimension; -1 if unknown.
  int tierOf(const std::string& dimension) const;
};

// What the evaluator reports for one candidate at one budget level.
// Converts implicitly from std::optional<double>, double and std::nullopt, so
// an evaluator may simply return a cost or std::nullopt.
struct Evaluation {
  std::optional<double> cost;  // lower is better (e.g. microseconds); nullopt: the candidate failed
  std::string failure;         // why it failed ("compile: ...", "correctness: smoke"); empty when ok

  Evaluation() = default;
  Evaluation(std::optional<double> c) : cost(c) {}  // NOLINT(google-explicit-constructor)
  Evaluation(double c) : cost(c) {}                 // NOLINT(google-explicit-constructor)
  Evaluation(std::nullopt_t) {}                     // NOLINT(google-explicit-constructor)
  static Evaluation failed(std::string reason) {
    Evaluation e;
    e.failure = std::move(reason);
    return e;
  }
};

// Evaluates `point` with the measurement effort of `budgetLevel` (0 cheapest,
// up to SearchOptions::maxBudgetLevel; e.g. pairs = 7 << level). Called on the
// search's thread, one call per evaluation. A cost that is not finite, or an
// exception, counts as a failure with the reason recorded.
using Evaluator = std::function<Evaluation(const SearchPoint& point, int budgetLevel)>;
// Evaluates a batch (e.g. compile all in parallel, then time one by one);
// returns one Evaluation per point, in order. Each point counts as one evaluation.
using BatchEvaluator = std::function<std::vector<Evaluation>(const std::vector<SearchPoint>& points, int budgetLevel)>;

enum class CandidateOrigin { Seed, Random, Mutation };
const char* toString(CandidateOrigin origin);

// One node of the lineage tree: one evaluated point.
struct Candidate {
  static constexpr int kNoParent = -1;

  int id = 0;                // index in SearchResult::lineage
  int parentId = kNoParent;  // the survivor it was mutated from; kNoParent for round 0
  CandidateOrigin origin = CandidateOrigin::Seed;
  int round = 0;          // round it was created in
  int tier = -1;          // tier it mutated; -1 for round 0
  std::string dimension;  // dimension of that tier it mutated; empty for round 0
  std::string mutation;   // "threads 256->512" or "threads 256->512, vec 4->8"; empty for round 0
  SearchPoint point;
  std::optional<double> cost;  // at budgetLevel; the latest measurement
  int budgetLevel = 0;         // level of `cost` (survivors are re-measured higher)
  int evaluations = 0;         // evaluator calls spent on this candidate
  std::string failure;         // non-empty iff it failed (cost is then nullopt)

  bool ok() const { return cost.has_value(); }
};

struct SearchOptions {
  uint64_t seed = 0;               // Note [Search determinism]
  std::vector<SearchPoint> seeds;  // best guesses, evaluated first (invalid ones are skipped)
  int initialPopulation = 16;      // seeds + random valid points in round 0
  int minSurvivors = 4;            // the halving stops at this many survivors
  int childrenPerSurvivor = 2;
  int maxBudgetLevel = 3;  // the level rises by one per round up to this
  int tierPatience = 2;    // rounds without improvement before moving to the next tier
  int maxRoundsWithoutImprovement = 8;
  int maxEvaluations = 200;             // evaluator calls in all (re-measurements included)
  double minRelativeImprovement = 0.0;  // a child must beat the best survivor's cost * (1 - this)
  int maxRandomAttempts = 1000;         // draws per random point or mutation before giving up on it
  double goodEnoughCost = 0;            // > 0: stop once a successful candidate costs at most this
  std::function<bool()> outOfTime;      // set: called before every round; true stops the search
};

enum class SearchStop {
  NoImprovement,     // maxRoundsWithoutImprovement rounds in a row without improvement
  EvaluationBudget,  // maxEvaluations spent
  Exhausted,         // no new valid point could be found (or the space has none)
  GoodEnough,        // a candidate reached goodEnoughCost
  OutOfTime,         // outOfTime() returned true
};
const char* toString(SearchStop stop);

struct SearchResult {
  std::vector<Candidate> lineage;  // lineage[i].id == i, in evaluation order
  int bestId = -1;                 // lowest cost among successful candidates at the highest budget level
                                   // any reached (costs of one level compare); -1: none succeeded
  int evaluations = 0;             // evaluator calls
  int rounds = 0;                  // rounds run (round 0 included)
  SearchStop stop = SearchStop::Exhausted;
  uint64_t seed = 0;
  int skippedSeeds = 0;  // SearchOptions::seeds not in the space

  const Candidate* best() const { return bestId >= 0 ? &lineage[static_cast<size_t>(bestId)] : nullptr; }
};

// Note [Which candidate is accepted]
// A tuner accepts the fastest candidate whose speed-up CI clears its
// threshold: among the candidates timed at the highest budget level at which
// any clears (costs of one level compare; a higher level's CI rests on more
// pairs), the one of lowest cost. The search's best (lowest cost at the
// highest level) is that candidate when its CI clears; when its median is
// the fastest but its pairs spread too wide to clear, a slower candidate whose
// CI does clear is accepted rather than ATen kept.
struct TimedCandidateCost {
  size_t index = 0;    // the caller's index of the candidate
  int level = 0;       // the budget level of its timing
  double cost = 0;     // its cost at that level
  bool clears = false;  // its speed-up CI clears the tuner's threshold
};
// The index (TimedCandidateCost::index) of the accepted candidate, or nullopt when none clears.
std::optional<size_t> acceptedCandidate(const std::vector<TimedCandidateCost>& timed);

// Called after each evaluation (of a new candidate or a re-measurement) with
// the candidate's updated node, e.g. to append it to the experiment log.
using SearchObserver = std::function<void(const Candidate& candidate)>;

// Runs the search (Note [Tiered successive halving]). Throws Error on an
// invalid space or options, or when the evaluator returns the wrong number of
// results; evaluator failures are recorded, never thrown.
SearchResult runSearch(const SearchSpace& space, const Evaluator& evaluate, const SearchOptions& options,
                       const SearchObserver& observer = {});
// The same with a batch evaluator: each round's new candidates (and each
// round's re-measurements) go to it as one batch; an exception from it fails
// the whole batch.
SearchResult runSearchBatched(const SearchSpace& space, const BatchEvaluator& evaluate, const SearchOptions& options,
                              const SearchObserver& observer = {});

}  // namespace hotkernel
