#include "hotkernel/optimizer/FamilyTuner.h"

#include <tbb/parallel_for.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <optional>
#include <random>
#include <set>

#include "hotkernel/optimizer/Benchmark.h"
#include "hotkernel/optimizer/TargetBudget.h"
#include "hotkernel/runtime/Check.h"
#include "hotkernel/runtime/Nvrtc.h"

namespace hotkernel {

SearchPoint FamilyPoint::toSearchPoint() const {
  return SearchPoint{{"threads", threads}, {"rowsPerCta", rowsPerCta}, {"vec", vec}, {"items", items},
                     {"cluster", cluster},  {"variant", variant}};
}

FamilyPoint FamilyPoint::fromSearchPoint(const SearchPoint& pt) {
  FamilyPoint p;
  p.threads = pt.at("threads");
  p.rowsPerCta = pt.at("rowsPerCta");
  p.vec = pt.at("vec");
  p.items = pt.at("items");
  auto cluster = pt.find("cluster");
  p.cluster = cluster == pt.end() ? 1 : cluster->second;
  auto variant = pt.find("variant");
  p.variant = variant == pt.end() ? 0 : variant->second;
  return p;
}

namespace {

// The candidate against the original kernel, both on the benchmark's stream;
// nullopt when a launch of the candidate failed (Note [Launch failures while
// timing]).
std::optional<Comparison> timeAgainstOriginal(const FamilyTuneSpec& spec, const Plan& plan, int device, int pairs,
                                              const std::function<bool()>& yieldPoint) {
  BenchmarkOptions bo;
  bo.pairs = pairs;
  bo.beforePair = yieldPoint;
  bool launchFailed = false;
  Comparison c = benchmarkInterleaved(
      [&] { spec.atenCall(); },
      [&] {
        if (launchFailed) return;  // no more launches: the timing is thrown away
        launchFailed = !(spec.planCall ? spec.planCall(plan) : spec.candidateCall(*plan.launcher));
      },
      device, bo);
  if (launchFailed) return std::nullopt;
  return c;
}

}  // namespace

// Note [Family search]
// The family's points for this variant form a tiered space (0: threads and
// rows per CTA, 1: vector width, 2: items per thread, 0 = streaming, a niche
// so each algorithm keeps its best; 3: CTAs of a cluster per row and the
// family's other kernel at that geometry (FamilyPoint::variant), single
// values for families or GPUs without them). runSearchBatched
// seeds it with the family's best guesses and runs successive halving with a
// lineage tree. Each new batch is compiled in parallel (TBB); a candidate
// passes the five-stage harness once, and is then timed against the original
// kernel with more interleaved pairs at each budget level. The winner is
// accepted only if its speed-up CI at the highest level it reached clears
// minSpeedup.
//
// Note [Launch failures while timing]
// A candidate that passed the harness can still fail to launch while it is
// timed (the plan's launcher, not the harness's, runs there: a refused
// cluster, a resource the driver will not give at that moment). That drops
// the candidate, logged with stage "launch", and the search goes on with the
// others. (It used to throw out of the batch evaluator, and the search fails
// every point of a batch whose evaluator throws: the batch's other candidates,
// timed or not, were lost with it.) Once a launch failed, the pairs left
// launch only the original kernel and their timing is discarded.
TuneOutcome tuneFamily(const FamilyTuneSpec& spec, int device, const std::string& arch, const TunerOptions& options,
                       double& bestSpeedup, double* bestUsOut) {
  TuneOutcome outcome;
  outcome.arch = arch;
  bestSpeedup = 0;
  nlohmann::json candidatesLog = nlohmann::json::array();

  auto valuesOf = [&](int FamilyPoint::*field) {
    std::vector<int> vals;
    for (const FamilyPoint& p : spec.validPoints) vals.push_back(p.*field);
    std::sort(vals.begin(), vals.end());
    vals.erase(std::unique(vals.begin(), vals.end()), vals.end());
    return vals;
  };
  SearchSpace space;
  space.tiers = {
      SearchTier{"launch geometry", {{"threads", valuesOf(&FamilyPoint::threads)},
                                     {"rowsPerCta", valuesOf(&FamilyPoint::rowsPerCta)}}, false},
      SearchTier{"memory access", {{"vec", valuesOf(&FamilyPoint::vec)}}, false},
      SearchTier{"algorithm", {{"items", valuesOf(&FamilyPoint::items)}}, true},
      SearchTier{"architecture",
                 {{"cluster", valuesOf(&FamilyPoint::cluster)}, {"variant", valuesOf(&FamilyPoint::variant)}},
                 false},
  };
  std::set<SearchPoint> validPoints;
  for (const FamilyPoint& p : spec.validPoints) validPoints.insert(p.toSearchPoint());
  space.isValid = [&validPoints](const SearchPoint& pt) { return validPoints.count(pt) > 0; };

  struct Measured {
    std::string cubin;
    double compileSeconds = 0;
    std::optional<HarnessReport> harness;
    std::optional<Comparison> comparison;
    int level = -1;
  };
  std::map<SearchPoint, Measured> measured;
  static const int kPairsPerLevel[] = {9, 15, 31};
  // Note [Interrupted tuning]
  // The caller's yield point returns false when the tuning must stop (the
  // worker is stopping). The harness and the benchmark then end early and
  // throw, and the search turns a throwing evaluator into a failed batch and
  // goes on: without more, an interrupted search would end as if every
  // candidate had failed, and the runtime would store "keep ATen" for a
  // variant that was never fully tuned. So the first false is remembered: the
  // evaluator does no more work, the search stops before its next round, and
  // tuneFamily throws "tuning interrupted" (nothing is stored).
  bool interrupted = false;
  std::function<bool()> yieldPoint;
  if (options.yieldPoint) {
    yieldPoint = [&] {
      if (interrupted) return false;
      interrupted = !options.yieldPoint();
      return !interrupted;
    };
  }
  auto evaluate = [&](const std::vector<SearchPoint>& batch, int level) {
    if (interrupted) return std::vector<Evaluation>(batch.size(), Evaluation::failed("interrupted"));
    // Compile what is new, in parallel.
    std::vector<SearchPoint> fresh;
    for (const SearchPoint& pt : batch) {
      if (!measured.count(pt) && std::find(fresh.begin(), fresh.end(), pt) == fresh.end()) fresh.push_back(pt);
    }
    std::vector<Measured> compiledNow(fresh.size());
    std::vector<std::string> errors(fresh.size());
    tbb::parallel_for(size_t(0), fresh.size(), [&](size_t i) {
      const auto t0 = std::chrono::steady_clock::now();
      try {
        compiledNow[i].cubin =
            compileToCubin(spec.source, spec.program, arch, spec.compileOptions(FamilyPoint::fromSearchPoint(fresh[i])))
                .cubin;
      } catch (const std::exception& e) {
        errors[i] = e.what();
      }
      compiledNow[i].compileSeconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    });
    std::map<SearchPoint, std::string> compileErrors;
    for (size_t i = 0; i < fresh.size(); ++i) {
      measured[fresh[i]] = compiledNow[i];
      if (!errors[i].empty()) compileErrors[fresh[i]] = errors[i];
    }
    std::vector<Evaluation> results;
    for (const SearchPoint& pt : batch) {
      Measured& m = measured[pt];
      if (compileErrors.count(pt) || m.cubin.empty()) {
        results.push_back(Evaluation::failed("compile: " + compileErrors[pt].substr(0, 300)));
        continue;
      }
      const FamilyPoint point = FamilyPoint::fromSearchPoint(pt);
      if (!m.harness) {
        HarnessOptions ho;
        ho.yieldPoint = yieldPoint;
        m.harness = runHarness(spec.harnessSpec, spec.candidate(point, m.cubin), spec.dtype, spec.rows, spec.cols,
                               device, ho);
      }
      if (!m.harness->passed) {
        const StageResult* f = m.harness->failure();
        HOTKERNEL_CHECK(f->detail != "interrupted", "tuning interrupted");
        results.push_back(Evaluation::failed(std::string("harness ") + toString(f->stage) + ": " + f->detail));
        continue;
      }
      const Plan plan = spec.makePlan(point, m.cubin);
      std::optional<Comparison> timed = timeAgainstOriginal(
          spec, plan, device, std::min(options.pairs, kPairsPerLevel[std::min(level, 2)]), yieldPoint);
      if (!timed) {  // Note [Launch failures while timing]
        m.comparison.reset();
        results.push_back(Evaluation::failed("launch: the candidate failed to launch while timed"));
        continue;
      }
      m.comparison = std::move(timed);
      m.level = level;
      results.push_back(Evaluation(m.comparison->candidate.median));
    }
    return results;
  };

  SearchOptions so;
  so.seed = (static_cast<uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}();
  for (const FamilyPoint& p : spec.seeds) so.seeds.push_back(p.toSearchPoint());
  so.initialPopulation = std::max<int>(static_cast<int>(so.seeds.size()), 8);
  so.maxEvaluations = options.searchEvaluations;
  so.maxBudgetLevel = 2;
  if (options.clock) options.clock->applyTo(so);  // Note [Stopping a target's search]
  so.outOfTime = [&interrupted, budget = so.outOfTime] { return interrupted || (budget && budget()); };
  SearchResult search = runSearchBatched(space, evaluate, so);
  HOTKERNEL_CHECK(!interrupted, "tuning interrupted");  // Note [Interrupted tuning]

  const Candidate* best = search.best();
  for (const Candidate& c : search.lineage) {
    const Measured& m = measured[c.point];
    const FamilyPoint point = FamilyPoint::fromSearchPoint(c.point);
    nlohmann::json log = {{"params", spec.paramsJson(point)},
                          {"candidateId", c.id},
                          {"origin", toString(c.origin)},
                          {"round", c.round},
                          {"compileSeconds", m.compileSeconds}};
    if (c.parentId != Candidate::kNoParent) log["parentId"] = c.parentId;
    if (!c.mutation.empty()) log["mutation"] = c.mutation;
    if (m.harness) {
      nlohmann::json stages = nlohmann::json::object();
      for (const StageResult& sr : m.harness->stages) stages[toString(sr.stage)] = sr.passed ? "pass" : "fail: " + sr.detail;
      log["stages"] = stages;
      log["harnessSeed"] = std::to_string(m.harness->seed);
      log["maxAbsError"] = m.harness->maxAbsError;
    }
    if (!c.ok()) {
      log["stage"] = c.failure.rfind("compile", 0) == 0  ? "compile"
                     : c.failure.rfind("launch", 0) == 0 ? "launch"
                                                         : "harness";
      log["error"] = c.failure.substr(0, 2000);
    } else if (m.comparison) {
      const Comparison& cmp = *m.comparison;
      log["stage"] = "benchmark";
      log["atenUs"] = cmp.baseline.median;
      log["kernelUs"] = cmp.candidate.median;
      log["speedup"] = cmp.speedup.median;
      log["speedupCi"] = {cmp.speedup.low, cmp.speedup.high};
      log["pairs"] = cmp.speedup.n;
      log["budgetLevel"] = m.level;
      const bool accept = best && &c == best && cmp.clears(options.minSpeedup);
      log["accepted"] = accept;
      if (accept) {
        bestSpeedup = cmp.speedup.median;
        outcome.accepted = true;
        outcome.family = spec.family;
        outcome.paramsJson = spec.paramsJson(point);
        outcome.kernelName = spec.kernelName;
        outcome.cubin = m.cubin;
        outcome.metrics = {{"speedup", cmp.speedup.median},
                           {"speedupCi", {cmp.speedup.low, cmp.speedup.high}},
                           {"atenUs", cmp.baseline.median},
                           {"kernelUs", cmp.candidate.median},
                           {"maxAbsError", m.harness->maxAbsError},
                           {"pairs", cmp.speedup.n}};
        if (spec.harnessSpec.tolerance) {
          outcome.metrics["tolerance"] = spec.harnessSpec.tolerance(spec.dtype, spec.cols);
        }
      }
    }
    candidatesLog.push_back(log);
  }
  outcome.metrics["search"] = {{"seed", std::to_string(search.seed)},
                               {"evaluations", search.evaluations},
                               {"rounds", search.rounds},
                               {"stop", toString(search.stop)},
                               {"validPoints", spec.validPoints.size()}};
  outcome.metrics["candidates"] = candidatesLog;
  const double bestUs = best && best->ok() ? *best->cost : 0.0;
  if (bestUsOut) *bestUsOut = bestUs;
  if (options.clock) outcome.metrics["target"] = options.clock->summary(bestUs, targetStopOf(search.stop));
  return outcome;
}

}  // namespace hotkernel
