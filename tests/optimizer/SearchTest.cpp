// Tiered successive halving on a synthetic cost model with several local
// optima: convergence, lineage, failures, budget, validity, determinism.

#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <stdexcept>

#include "hotkernel/optimizer/Search.h"
#include "hotkernel/runtime/Check.h"

namespace hotkernel {
namespace {

// A softmax-like space: 6 * 6 * 4 * 10 * 3 * 3 * 4 = 51840 grid points.
//   variant 0 register-resident (items > 0), 1 streaming and 2 split rows (items == 0);
//   clusters > 1 only with split rows; at least 32 threads per row.
SearchSpace syntheticSpace() {
  SearchSpace s;
  s.tiers = {
      {"launch geometry", {{"threads", {32, 64, 128, 256, 512, 1024}}, {"rowsPerCta", {1, 2, 4, 8, 16, 32}}}},
      {"memory access", {{"vec", {1, 2, 4, 8}}, {"items", {0, 1, 2, 3, 4, 5, 6, 8, 12, 16}}, {"unroll", {1, 2, 4}}}},
      {"algorithm", {{"variant", {0, 1, 2}}}, /*niche=*/true},
      {"architecture", {{"cluster", {1, 2, 4, 8}}}}};
  s.isValid = [](const SearchPoint& p) {
    if (p.at("threads") / p.at("rowsPerCta") < 32) return false;
    if ((p.at("variant") == 0) != (p.at("items") > 0)) return false;
    if (p.at("cluster") > 1 && p.at("variant") != 2) return false;
    return true;
  };
  return s;
}

// Several local optima:
//  - threads has two basins, 128 (local, +8) and 512 (global);
//  - vec 8 is best only with >= 256 threads, vec 4 below (a second basin);
//  - register-resident (best 100 at items 4) beats split rows with one CTA per row (105),
//    but split rows with a 2-CTA cluster is the global optimum (97): tier 2 and 3 together.
double syntheticCost(const SearchPoint& p) {
  const double t = std::log2(p.at("threads"));
  const double r = std::log2(p.at("rowsPerCta"));
  const double v = std::log2(p.at("vec"));
  double cost = 100.0;
  cost += std::min(3.0 * (t - 9) * (t - 9), 8.0 + 3.0 * (t - 7) * (t - 7));
  cost += 2.0 * (r - 1) * (r - 1);
  cost += p.at("threads") >= 256 ? 4.0 * (3 - v) : 2.0 + 5.0 * std::abs(2 - v);
  cost += p.at("unroll") == 2 ? 0.0 : 1.0;
  switch (p.at("variant")) {
    case 0: {
      const double i = std::log2(p.at("items"));
      cost += 3.0 * (i - 2) * (i - 2);
      break;
    }
    case 1:
      cost += 15.0;
      break;
    default: {
      const int c = p.at("cluster");
      cost += 5.0 + (c == 2 ? -8.0 : c == 4 ? -4.0 : c == 8 ? -2.0 : 0.0);
      break;
    }
  }
  return cost;
}

// Every valid point of `space` (a small space: enumerated).
std::vector<SearchPoint> enumerate(const SearchSpace& space) {
  std::vector<const SearchDimension*> dims;
  for (const SearchTier& t : space.tiers) {
    for (const SearchDimension& d : t.dimensions) dims.push_back(&d);
  }
  std::vector<SearchPoint> out;
  std::vector<size_t> index(dims.size(), 0);
  while (true) {
    SearchPoint p;
    for (size_t i = 0; i < dims.size(); ++i) p[dims[i]->name] = dims[i]->values[index[i]];
    if (space.contains(p)) out.push_back(p);
    size_t i = 0;
    while (i < dims.size() && ++index[i] == dims[i]->values.size()) index[i++] = 0;
    if (i == dims.size()) break;
  }
  return out;
}

double exhaustiveOptimum(const SearchSpace& space) {
  double best = INFINITY;
  for (const SearchPoint& p : enumerate(space)) best = std::min(best, syntheticCost(p));
  return best;
}

SearchPoint point(int threads, int rowsPerCta, int vec, int items, int variant, int cluster, int unroll = 2) {
  return {{"threads", threads}, {"rowsPerCta", rowsPerCta}, {"vec", vec},      {"items", items},
          {"variant", variant}, {"cluster", cluster},       {"unroll", unroll}};
}

// The family's best guesses: reasonable, but in the local basins.
std::vector<SearchPoint> familyGuesses() {
  return {point(128, 1, 4, 4, 0, 1), point(256, 1, 8, 8, 0, 1), point(128, 1, 8, 0, 1, 1)};
}

TEST(SearchTest, GivenSyntheticSpaceWhenEnumeratedThenOptimumIsSplitRowsWithCluster) {
  SearchSpace space = syntheticSpace();
  EXPECT_DOUBLE_EQ(space.gridSize(), 51840);
  EXPECT_EQ(enumerate(space).size(), 3528u);
  EXPECT_DOUBLE_EQ(exhaustiveOptimum(space), 97.0);
  EXPECT_DOUBLE_EQ(syntheticCost(point(512, 2, 8, 0, 2, 2)), 97.0);
  EXPECT_DOUBLE_EQ(syntheticCost(point(512, 2, 8, 4, 0, 1)), 100.0);  // best register-resident: a local optimum
  EXPECT_DOUBLE_EQ(syntheticCost(point(128, 2, 4, 4, 0, 1)), 110.0);  // the 128-thread basin
}

TEST(SearchTest, GivenLocalOptimaWhenSearchedThenWithinTwoPercentOfOptimumWithFewEvaluations) {
  SearchSpace space = syntheticSpace();
  const size_t valid = enumerate(space).size();
  const double optimum = exhaustiveOptimum(space);
  int exact = 0;
  int totalEvaluations = 0;
  const int kSeeds = 40;
  for (uint64_t seed = 1; seed <= kSeeds; ++seed) {
    SearchOptions options;
    options.seed = seed * 0x9E3779B97F4A7C15ull;
    options.seeds = familyGuesses();
    SearchResult r = runSearch(
        space, [](const SearchPoint& p, int) -> std::optional<double> { return syntheticCost(p); }, options);
    ASSERT_NE(r.best(), nullptr) << "seed " << seed;
    const double found = syntheticCost(r.best()->point);
    EXPECT_LE(found, optimum * 1.02) << "seed " << seed << ": " << describePoint(r.best()->point);
    EXPECT_DOUBLE_EQ(*r.best()->cost, found);
    EXPECT_LE(r.evaluations, options.maxEvaluations);
    // Far fewer evaluations than enumerating the valid points (3528): less than a tenth.
    EXPECT_LT(r.evaluations * 10, static_cast<int>(valid)) << "seed " << seed;
    exact += found == optimum ? 1 : 0;
    totalEvaluations += r.evaluations;
  }
  // The global optimum itself, not only a point within 2%, in most runs.
  EXPECT_GE(exact, kSeeds * 3 / 4) << "exact optimum in " << exact << " of " << kSeeds << " runs";
  RecordProperty("valid_points", static_cast<int>(valid));
  RecordProperty("mean_evaluations", totalEvaluations / kSeeds);
  RecordProperty("exact_optimum_runs", exact);
}

TEST(SearchTest, GivenFailingCandidatesWhenSearchedThenRecordedWithReasonAndNeverBest) {
  SearchSpace space = syntheticSpace();
  // The global optimum and every streaming point fail (e.g. compile error, wrong results).
  auto evaluator = [](const SearchPoint& p, int) -> Evaluation {
    if (p == point(512, 2, 8, 0, 2, 2)) return Evaluation::failed("correctness: sweep");
    if (p.at("variant") == 1) return Evaluation::failed("compile: too many registers");
    return syntheticCost(p);
  };
  SearchOptions options;
  options.seed = 7;
  options.seeds = familyGuesses();  // the third guess is streaming: it fails
  options.seeds.push_back(point(512, 2, 8, 0, 2, 2));
  SearchResult r = runSearch(space, evaluator, options);
  ASSERT_NE(r.best(), nullptr);
  EXPECT_TRUE(r.best()->ok());
  EXPECT_NE(r.best()->point, point(512, 2, 8, 0, 2, 2));
  EXPECT_NE(r.best()->point.at("variant"), 1);
  int failed = 0;
  for (const Candidate& c : r.lineage) {
    if (c.ok()) continue;
    ++failed;
    EXPECT_FALSE(c.failure.empty()) << c.id;
    EXPECT_FALSE(c.cost.has_value());
    // A failed candidate is never a parent: it never survives.
    for (const Candidate& child : r.lineage) EXPECT_NE(child.parentId, c.id) << describePoint(c.point);
  }
  EXPECT_GE(failed, 2);
  EXPECT_EQ(r.lineage[3].failure, "correctness: sweep");  // the 4th seed
  EXPECT_EQ(r.lineage[2].failure, "compile: too many registers");
}

TEST(SearchTest, GivenSearchWhenDoneThenLineageIsConsistentTree) {
  SearchSpace space = syntheticSpace();
  SearchOptions options;
  options.seed = 42;
  options.seeds = familyGuesses();
  SearchResult r = runSearch(
      space, [](const SearchPoint& p, int) -> std::optional<double> { return syntheticCost(p); }, options);
  ASSERT_FALSE(r.lineage.empty());
  std::set<SearchPoint> points;
  std::set<int> tiersMutated;
  int roots = 0;
  int evaluations = 0;
  for (size_t i = 0; i < r.lineage.size(); ++i) {
    const Candidate& c = r.lineage[i];
    EXPECT_EQ(c.id, static_cast<int>(i));
    EXPECT_TRUE(points.insert(c.point).second) << "point evaluated as two candidates: " << describePoint(c.point);
    evaluations += c.evaluations;
    if (c.parentId == Candidate::kNoParent) {
      ++roots;
      EXPECT_EQ(c.round, 0);
      EXPECT_NE(c.origin, CandidateOrigin::Mutation);
      EXPECT_EQ(c.tier, -1);
      EXPECT_TRUE(c.mutation.empty());
      continue;
    }
    // The parent exists, came first, and differs in the mutated dimension of the recorded tier.
    ASSERT_GE(c.parentId, 0);
    ASSERT_LT(c.parentId, c.id);
    const Candidate& parent = r.lineage[static_cast<size_t>(c.parentId)];
    EXPECT_LT(parent.round, c.round);
    EXPECT_EQ(c.origin, CandidateOrigin::Mutation);
    EXPECT_EQ(space.tierOf(c.dimension), c.tier);
    EXPECT_NE(parent.point.at(c.dimension), c.point.at(c.dimension));
    EXPECT_EQ(c.mutation.rfind(c.dimension + " " + std::to_string(parent.point.at(c.dimension)) + "->", 0), 0u)
        << c.mutation;
    tiersMutated.insert(c.tier);
  }
  EXPECT_EQ(roots, options.initialPopulation);
  EXPECT_EQ(evaluations, r.evaluations);  // re-measurements counted on their candidate
  EXPECT_GE(tiersMutated.size(), 3u) << "the search should move through the tiers";
  EXPECT_EQ(r.lineage[0].origin, CandidateOrigin::Seed);
  EXPECT_EQ(r.lineage[0].point, familyGuesses()[0]);
  EXPECT_EQ(r.lineage[3].origin, CandidateOrigin::Random);
  EXPECT_EQ(r.stop, SearchStop::NoImprovement);
}

TEST(SearchTest, GivenEvaluationBudgetWhenSearchedThenNeverExceeded) {
  SearchSpace space = syntheticSpace();
  for (int budget : {0, 1, 5, 16, 17, 30, 57}) {
    int calls = 0;
    SearchOptions options;
    options.seed = 3;
    options.maxEvaluations = budget;
    SearchResult r = runSearch(
        space,
        [&calls](const SearchPoint& p, int) -> std::optional<double> {
          ++calls;
          return syntheticCost(p);
        },
        options);
    EXPECT_EQ(calls, r.evaluations) << "budget " << budget;
    EXPECT_EQ(calls, budget) << "budget " << budget;  // this space never runs out of points first
    EXPECT_EQ(r.stop, SearchStop::EvaluationBudget) << "budget " << budget;
    EXPECT_EQ(r.best() == nullptr, budget == 0);
  }
}

TEST(SearchTest, GivenGoodEnoughCostWhenACandidateReachesItThenSearchStopsBeforeTheNextRound) {
  SearchSpace space = syntheticSpace();
  SearchOptions options;
  options.seed = 11;
  options.seeds = familyGuesses();
  SearchResult full = runSearch(
      space, [](const SearchPoint& p, int) -> std::optional<double> { return syntheticCost(p); }, options);
  ASSERT_NE(full.stop, SearchStop::GoodEnough);

  // 115 is reached in round 0 by the seeds (the best guess costs 108): nothing past round 0 runs.
  options.goodEnoughCost = 115;
  SearchResult r = runSearch(
      space, [](const SearchPoint& p, int) -> std::optional<double> { return syntheticCost(p); }, options);
  EXPECT_EQ(r.stop, SearchStop::GoodEnough);
  EXPECT_STREQ(toString(r.stop), "good_enough");
  EXPECT_EQ(r.rounds, 1);
  EXPECT_EQ(r.evaluations, options.initialPopulation);
  ASSERT_NE(r.best(), nullptr);
  EXPECT_LE(*r.best()->cost, 115);
  EXPECT_LT(r.evaluations, full.evaluations);
}

TEST(SearchTest, GivenOutOfTimeAfterTwoChecksWhenSearchedThenStopsWithOutOfTime) {
  SearchSpace space = syntheticSpace();
  SearchOptions options;
  options.seed = 5;
  int checks = 0;
  options.outOfTime = [&checks] { return ++checks > 2; };
  SearchResult r = runSearch(
      space, [](const SearchPoint& p, int) -> std::optional<double> { return syntheticCost(p); }, options);
  EXPECT_EQ(r.stop, SearchStop::OutOfTime);
  EXPECT_STREQ(toString(r.stop), "out_of_time");
  EXPECT_EQ(checks, 3);    // checked before round 1, round 2, and (true) before round 3
  EXPECT_EQ(r.rounds, 3);  // round 0 and the two rounds the clock allowed
  EXPECT_NE(r.best(), nullptr);
  options.goodEnoughCost = -1;
  EXPECT_THROW(runSearch(space, [](const SearchPoint& p, int) -> std::optional<double> { return syntheticCost(p); },
                         options),
               Error);
}

TEST(SearchTest, GivenValidityPredicateWhenSearchedThenInvalidPointsNeverEvaluated) {
  SearchSpace space = syntheticSpace();
  int evaluated = 0;
  auto evaluator = [&space, &evaluated](const SearchPoint& p, int) -> std::optional<double> {
    ++evaluated;
    if (!space.contains(p)) throw std::logic_error("invalid point evaluated: " + describePoint(p));
    return syntheticCost(p);
  };
  SearchOptions options;
  options.seed = 11;
  options.seeds = familyGuesses();
  options.seeds.push_back(point(32, 2, 8, 4, 0, 1));   // 16 threads per row: invalid
  options.seeds.push_back(point(256, 1, 8, 0, 0, 1));  // register-resident without items: invalid
  options.seeds.push_back({{"threads", 256}});         // incomplete
  options.seeds.push_back(point(256, 1, 3, 4, 0, 1));  // vec 3 is not an allowed value
  options.seeds.push_back(familyGuesses()[0]);         // duplicate
  SearchResult r = runSearch(space, evaluator, options);
  EXPECT_EQ(r.skippedSeeds, 5);
  EXPECT_GT(evaluated, 0);
  for (const Candidate& c : r.lineage) {
    EXPECT_TRUE(c.ok()) << c.failure;  // the evaluator would have failed (thrown) on an invalid point
    EXPECT_TRUE(space.contains(c.point));
  }
}

TEST(SearchTest, GivenSameSeedWhenSearchedTwiceThenSameLineageAndOtherSeedDiffers) {
  SearchSpace space = syntheticSpace();
  auto run = [&space](uint64_t seed) {
    SearchOptions options;
    options.seed = seed;
    return runSearch(
        space, [](const SearchPoint& p, int) -> std::optional<double> { return syntheticCost(p); }, options);
  };
  SearchResult a = run(123456789), b = run(123456789), c = run(987654321);
  ASSERT_EQ(a.lineage.size(), b.lineage.size());
  for (size_t i = 0; i < a.lineage.size(); ++i) {
    EXPECT_EQ(a.lineage[i].point, b.lineage[i].point);
    EXPECT_EQ(a.lineage[i].parentId, b.lineage[i].parentId);
    EXPECT_EQ(a.lineage[i].mutation, b.lineage[i].mutation);
  }
  EXPECT_EQ(a.seed, 123456789u);
  EXPECT_EQ(a.bestId, b.bestId);
  bool differs = a.lineage.size() != c.lineage.size();
  for (size_t i = 0; !differs && i < a.lineage.size(); ++i) differs = a.lineage[i].point != c.lineage[i].point;
  EXPECT_TRUE(differs);
}

TEST(SearchTest, GivenRisingRoundsWhenSearchedThenSurvivorsRemeasuredAtHigherBudgetLevels) {
  SearchSpace space = syntheticSpace();
  std::vector<int> levels;
  SearchOptions options;
  options.seed = 5;
  options.maxBudgetLevel = 2;
  std::vector<std::pair<int, int>> observed;  // (candidate id, level) per observer call
  SearchResult r = runSearch(
      space,
      [&levels](const SearchPoint& p, int level) -> std::optional<double> {
        levels.push_back(level);
        return syntheticCost(p);
      },
      options, [&observed](const Candidate& c) { observed.emplace_back(c.id, c.budgetLevel); });
  ASSERT_FALSE(levels.empty());
  EXPECT_EQ(levels.front(), 0);
  EXPECT_EQ(*std::max_element(levels.begin(), levels.end()), 2);
  EXPECT_TRUE(std::is_sorted(levels.begin(), levels.end()));  // the level only rises
  EXPECT_EQ(observed.size(), static_cast<size_t>(r.evaluations));
  // The best was measured at the top level, and some candidate more than once.
  EXPECT_EQ(r.best()->budgetLevel, 2);
  bool remeasured = false;
  for (const Candidate& c : r.lineage) remeasured = remeasured || c.evaluations > 1;
  EXPECT_TRUE(remeasured);
}

TEST(SearchTest, GivenThrowingOrNonFiniteEvaluatorWhenSearchedThenRecordedAsFailures) {
  SearchSpace space = syntheticSpace();
  auto evaluator = [](const SearchPoint& p, int) -> std::optional<double> {
    if (p.at("variant") == 1) throw Error("nvrtc: out of memory", false);
    if (p.at("variant") == 2) return NAN;
    return syntheticCost(p);
  };
  SearchOptions options;
  options.seed = 9;
  options.seeds = familyGuesses();
  SearchResult r = runSearch(space, evaluator, options);
  ASSERT_NE(r.best(), nullptr);
  EXPECT_EQ(r.best()->point.at("variant"), 0);
  bool sawThrow = false, sawNan = false;
  for (const Candidate& c : r.lineage) {
    if (c.point.at("variant") == 0) continue;
    EXPECT_FALSE(c.ok());
    sawThrow = sawThrow || c.failure.find("nvrtc: out of memory") != std::string::npos;
    sawNan = sawNan || c.failure.find("invalid cost") != std::string::npos;
  }
  EXPECT_TRUE(sawThrow);
  EXPECT_TRUE(sawNan);
}

TEST(SearchTest, GivenEverythingFailsWhenSearchedThenNoBestAndStopsWithinBudget) {
  SearchSpace space = syntheticSpace();
  SearchOptions options;
  options.seed = 1;
  options.maxEvaluations = 100;
  SearchResult r = runSearch(
      space, [](const SearchPoint&, int) -> std::optional<double> { return std::nullopt; }, options);
  EXPECT_EQ(r.best(), nullptr);
  EXPECT_EQ(r.evaluations, 100);
  for (const Candidate& c : r.lineage) {
    EXPECT_EQ(c.parentId, Candidate::kNoParent);  // nothing survives to be mutated: fresh random points
    EXPECT_EQ(c.failure, "failed");
  }
}

TEST(SearchTest, GivenTinySpaceWhenSearchedThenExhaustsWithoutRepeatingPoints) {
  SearchSpace space;
  space.tiers = {{"launch geometry", {{"threads", {64, 128, 256}}}}, {"memory access", {{"vec", {1, 2}}}}};
  int calls = 0;
  SearchOptions options;
  options.seed = 2;
  SearchResult r = runSearch(
      space,
      [&calls](const SearchPoint& p, int) -> std::optional<double> {
        ++calls;
        return 1000.0 / p.at("threads") + p.at("vec");
      },
      options);
  std::set<SearchPoint> points;
  for (const Candidate& c : r.lineage) points.insert(c.point);
  EXPECT_EQ(points.size(), r.lineage.size());
  EXPECT_EQ(r.lineage.size(), 6u);  // the whole grid, each point once
  ASSERT_NE(r.best(), nullptr);
  EXPECT_EQ(r.best()->point, (SearchPoint{{"threads", 256}, {"vec", 1}}));
  EXPECT_EQ(r.stop, SearchStop::Exhausted);
}

TEST(SearchTest, GivenBatchEvaluatorWhenSearchedThenBatchesPerRoundAndWrongSizeIsError) {
  SearchSpace space = syntheticSpace();
  std::vector<size_t> batches;
  SearchOptions options;
  options.seed = 4;
  options.initialPopulation = 8;
  SearchResult r = runSearchBatched(
      space,
      [&batches](const std::vector<SearchPoint>& points, int) {
        batches.push_back(points.size());
        std::vector<Evaluation> out;
        for (const SearchPoint& p : points) out.push_back(syntheticCost(p));
        return out;
      },
      options);
  ASSERT_FALSE(batches.empty());
  EXPECT_EQ(batches.front(), 8u);
  size_t total = 0;
  for (size_t b : batches) total += b;
  EXPECT_EQ(total, static_cast<size_t>(r.evaluations));

  EXPECT_THROW(runSearchBatched(
                   space, [](const std::vector<SearchPoint>&, int) { return std::vector<Evaluation>{}; }, options),
               Error);
}

TEST(SearchTest, GivenBadSpaceOrOptionsWhenSearchedThenError) {
  auto eval = [](const SearchPoint&, int) -> std::optional<double> { return 1.0; };
  SearchSpace empty;
  EXPECT_THROW(runSearch(empty, eval, SearchOptions{}), Error);
  SearchSpace twice;
  twice.tiers = {{"a", {{"x", {1, 2}}}}, {"b", {{"x", {3}}}}};
  EXPECT_THROW(runSearch(twice, eval, SearchOptions{}), Error);
  SearchSpace noValues;
  noValues.tiers = {{"a", {{"x", {}}}}};
  EXPECT_THROW(runSearch(noValues, eval, SearchOptions{}), Error);
  SearchOptions bad;
  bad.initialPopulation = 0;
  EXPECT_THROW(runSearch(syntheticSpace(), eval, bad), Error);
}

TEST(SearchTest, GivenEvaluationConversionsThenCostOrFailure) {
  Evaluation fromDouble = 2.5;
  Evaluation fromOptional = std::optional<double>(3.0);
  Evaluation fromNullopt = std::nullopt;
  EXPECT_EQ(fromDouble.cost, 2.5);
  EXPECT_EQ(fromOptional.cost, 3.0);
  EXPECT_FALSE(fromNullopt.cost.has_value());
  Evaluation failed = Evaluation::failed("compile: x");
  EXPECT_FALSE(failed.cost.has_value());
  EXPECT_EQ(failed.failure, "compile: x");
}

TEST(SearchTest, GivenPointWhenDescribedThenNamesInOrder) {
  EXPECT_EQ(describePoint({{"vec", 8}, {"items", 4}, {"threads", 256}}), "items=4 threads=256 vec=8");
  EXPECT_EQ(describePoint({}), "");
}

}  // namespace
}  // namespace hotkernel

namespace hotkernel {
namespace {

// Note [Which candidate is accepted].
TEST(AcceptedCandidateTest, GivenTimedCandidatesWhenChoosingThenTheFastestThatClearsAtTheHighestLevelWhereAnyDoes) {
  EXPECT_EQ(acceptedCandidate({}), std::nullopt);
  EXPECT_EQ(acceptedCandidate({{0, 2, 10.0, false}, {1, 2, 12.0, false}}), std::nullopt);
  // The search's best (lowest cost at the top level) clears: it is accepted.
  EXPECT_EQ(acceptedCandidate({{0, 2, 10.0, true}, {1, 2, 12.0, true}, {2, 1, 9.0, true}}), std::optional<size_t>(0));
  // The best's CI does not clear (pairs spread wide); a slower candidate of that level clears: it, not ATen.
  EXPECT_EQ(acceptedCandidate({{0, 0, 70.6, false}, {1, 0, 71.4, false}, {2, 0, 74.7, true}, {3, 0, 88.3, false}}),
            std::optional<size_t>(2));
  // A clearing candidate re-measured at a higher level wins over a cheaper one cleared at a lower level only.
  EXPECT_EQ(acceptedCandidate({{4, 0, 8.0, true}, {5, 1, 9.5, true}, {6, 1, 9.0, false}}), std::optional<size_t>(5));
}

}  // namespace
}  // namespace hotkernel
