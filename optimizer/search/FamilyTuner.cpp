#include "hotkernel/optimizer/FamilyTuner.h"

#include <tbb/parallel_for.h>

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAGeneratorImpl.h>

#include <algorithm>
#include <chrono>
#include <limits>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <tuple>

#include "hotkernel/optimizer/Benchmark.h"
#include "hotkernel/optimizer/SlicedInput.h"
#include "hotkernel/optimizer/TargetBudget.h"
#include "hotkernel/optimizer/TuningRows.h"
#include "hotkernel/runtime/Check.h"
#include "hotkernel/runtime/ExitGate.h"
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

// Note [Timed outputs are checked]
// The harness sees a candidate's first launches of a fresh module; the
// timing sees the many that follow, on the plan's own module. A kernel that
// counts its launches in a `__device__` variable and returns early after N,
// or keeps the result of an earlier call and returns it again, passes the
// harness and is timed doing no work. So the timed calls are checked too:
//  - the candidate's calls rotate over spec.timedInputs (at least two inputs
//    with distinct contents, at distinct addresses), call k on input k mod n,
//    the last call on input 1 whatever k is, so that the first call (input 0)
//    and the last read different data;
//  - every call writes fresh outputs, as a served call would (allocated
//    like the dispatcher allocates them, in the caching allocator's blocks,
//    which may still hold an earlier call's results), but the first and the
//    last call write outputs of their own, pre-filled with NaN outside the
//    timed region (Benchmark's beforeCandidate, before the L2 flush and the
//    start event), kept until the measurement ends;
//  - after the measurement, both are compared with the reference for their
//    input (checkOutputs: the harness's bounds and invariants); a mismatch
//    rejects the candidate ("timed: the first / last timed launch ...").
// The original kernel rotates over the same inputs, so both sides read the
// same data. Agent kernels with writable global data are refused before they
// run at all (Note [Agent kernels hold no state] in CubinSections.h).
TimedCandidate timeAndCheckCandidate(const FamilyTuneSpec& spec, const Plan& plan, int device, int pairs,
                                     const std::function<bool()>& yieldPoint) {
  HOTKERNEL_CHECK(spec.timedInputs.size() >= 2, "the timed calls of ", spec.family,
                  " need at least two inputs, got ", spec.timedInputs.size());
  const RowOpSpec harnessSpec = generalForm(spec.harnessSpec);
  const size_t n = spec.timedInputs.size();
  TimedCandidate result;
  BenchmarkOptions bo;
  bo.pairs = pairs;
  bo.beforePair = yieldPoint;
  bool launchFailed = false;
  size_t next = 0;               // the input of the candidate's next call
  bool checkedCall = false;      // whether the next call writes `firstOuts` / `lastOuts`
  std::vector<at::Tensor> firstOuts, lastOuts;
  size_t lastInput = 1;
  auto prefilled = [&](const TimedInput& input) {
    std::vector<at::Tensor> outs = allocateOutputs(harnessSpec, input.in);
    for (at::Tensor& o : outs) {
      if (o.scalar_type() == at::kLong) {
        o.fill_(std::numeric_limits<int64_t>::min());
      } else {
        o.fill_(std::numeric_limits<float>::quiet_NaN());
      }
    }
    return outs;
  };
  bo.beforeCandidate = [&](int call, bool last) {
    next = last ? 1 : static_cast<size_t>(call) % n;
    checkedCall = call == 0 || last;
    if (call == 0) firstOuts = prefilled(spec.timedInputs[0]);
    if (last) {
      lastInput = next;
      lastOuts = prefilled(spec.timedInputs[next]);
    }
  };
  size_t atenNext = 0;
  result.comparison = benchmarkInterleaved(
      [&] { spec.atenCall(spec.timedInputs[atenNext++ % n]); },
      [&] {
        if (launchFailed) return;  // no more launches: the timing is thrown away
        const TimedInput& input = spec.timedInputs[next];
        const std::vector<at::Tensor> outs = !checkedCall         ? allocateOutputs(harnessSpec, input.in)
                                             : lastOuts.empty() ? firstOuts
                                                                : lastOuts;
        checkedCall = false;
        if (spec.planCall) {
          launchFailed = !spec.planCall(plan, input, outs);
        } else {
          launchFailed = !plan.launcher->launchArgs(harnessSpec.kernelArgs(input.in, input.args, outs),
                                                    at::cuda::getCurrentCUDAStream(device).stream());
        }
      },
      device, bo);
  if (launchFailed) {  // Note [Launch failures while timing]
    result.comparison.reset();
    result.failure = "launch: the candidate failed to launch while timed";
    return result;
  }
  HOTKERNEL_CHECK(!firstOuts.empty() && !lastOuts.empty(), "the benchmark made no checked call of the candidate");
  for (const auto& [name, input, outs] :
       {std::tuple<const char*, size_t, const std::vector<at::Tensor>*>{"first", 0, &firstOuts},
        {"last", lastInput, &lastOuts}}) {
    const TimedInput& in = spec.timedInputs[input];
    const std::string why = checkOutputs(harnessSpec, spec.dtype, in.in, in.args, *outs, yieldPoint);
    HOTKERNEL_CHECK(why != "interrupted", "tuning interrupted");
    if (!why.empty()) {
      result.comparison.reset();
      result.failure = std::string("timed: the ") + name + " timed launch (input " + std::to_string(input) +
                       " of " + std::to_string(n) + ") is wrong: " + why;
      return result;
    }
  }
  return result;
}

at::Generator timingGenerator(int device) {
  at::Generator gen = at::cuda::detail::getDefaultCUDAGenerator(device).clone();
  gen.set_current_seed((static_cast<uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}());
  return gen;
}

AtenReference atenReferenceOfSpec(const RowOpSpec& spec) {
  const RowOpSpec general = generalForm(spec);
  AtenReference reference;
  reference.timedArgs = [makeArgs = general.makeArgs](const at::Tensor& in, at::Generator& gen) {
    return makeArgs(in.size(0), in.size(1), dtypeOfTensor(in), gen);
  };
  reference.call = [references = general.references](const TimedInput& t) { (void)references(t.in, t.args); };
  return reference;
}

std::vector<TimedInput> drawTimedInputs(const RowOpSpec& spec, kernels::DType dtype, int64_t rows, int64_t cols,
                                        int device, const std::function<at::Tensor(int64_t k)>& draw,
                                        const std::function<bool()>& yieldPoint, int count) {
  HOTKERNEL_CHECK(count >= 2, "the timed calls need at least two inputs");
  const RowOpSpec general = generalForm(spec);
  at::Generator gen = timingGenerator(device);
  std::vector<TimedInput> inputs;
  for (int i = 0; i < count; ++i) {
    TimedInput t;
    t.in = buildInRowSlices(
        rows, cols, scalarTypeOf(dtype), device, [&](int64_t, int64_t k) { return draw(k); }, yieldPoint);
    HOTKERNEL_CHECK(t.in.defined(), "tuning interrupted");
    t.args = general.makeArgs(rows, cols, dtype, gen);
    inputs.push_back(std::move(t));
  }
  return inputs;
}

void chooseTuningRows(FamilyTuneSpec& spec, int device, int rowBuffers, const TunerOptions& options,
                      int timedBuffers) {
  int maxRowsPerCta = 1;
  for (const FamilyPoint& p : spec.validPoints) maxRowsPerCta = std::max(maxRowsPerCta, p.rowsPerCta);
  const cudaDeviceProp* prop = at::cuda::getDeviceProperties(device);
  chooseTuningRows(spec, device, rowBuffers, fillRows(prop->multiProcessorCount, maxRowsPerCta), options,
                   timedBuffers);
}

void chooseTuningRows(FamilyTuneSpec& spec, int device, int rowBuffers, int64_t fillRows,
                      const TunerOptions& options, int timedBuffers) {
  HOTKERNEL_CHECK(timedBuffers >= 0 && timedBuffers <= rowBuffers, "timed buffers ", timedBuffers,
                  " of a row of ", rowBuffers);
  const cudaDeviceProp* prop = at::cuda::getDeviceProperties(device);
  const int64_t rowBytes = spec.cols * static_cast<int64_t>(kernels::elementSize(spec.dtype));
  TuningMemory memory;
  memory.bytesPerRow = rowBuffers * rowBytes;
  memory.fixedBytes = 2 * static_cast<int64_t>(prop->l2CacheSize);
  memory.timedBytesPerRow = timedBuffers * rowBytes;
  const TuningRowCounts rows =
      tuningRowsWithinCap(spec.family, spec.rows, spec.cols, fillRows, memory, options.memoryCapBytes);
  spec.variantRows = rows.timed < spec.rows ? spec.rows : 0;
  spec.rows = rows.timed;
  spec.harnessRows = rows.harness < rows.timed ? rows.harness : 0;
}

int64_t middleDimFillRows(int64_t inner, const std::vector<FamilyPoint>& valid, int smCount) {
  int64_t widestTile = 1;
  for (const FamilyPoint& p : valid) {
    const int64_t tx = p.threads / std::max(p.rowsPerCta, 1);
    widestTile = std::max<int64_t>(widestTile, tx * p.vec);
  }
  return fillRowsOfCtas(smCount, (inner + widestTile - 1) / widestTile);
}

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
  outcome.metrics.arch = arch;
  bestSpeedup = 0;

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
      // Note [Ordered exit] (runtime/ExitGate.h): once the process exits, no new
      // compile starts, so the exit waits at most for the ones running.
      if (ExitGate::process().exiting()) {
        errors[i] = "interrupted: the process is exiting";
        return;
      }
      try {
        compiledNow[i].cubin =
            compileToCubin(spec.source, spec.program, arch, spec.compileOptions(FamilyPoint::fromSearchPoint(fresh[i])))
                .cubin;
      } catch (const std::exception& e) {
        errors[i] = e.what();
      } catch (...) {  // nothing may leave a TBB task (Note [Background failures are contained])
        errors[i] = "unknown error";
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
        m.harness = runHarness(spec.harnessSpec, spec.candidate(point, m.cubin), spec.dtype,
                               spec.harnessRowCount(), spec.cols, device, ho);
      }
      if (!m.harness->passed) {
        const StageResult* f = m.harness->failure();
        HOTKERNEL_CHECK(f->detail != "interrupted", "tuning interrupted");
        results.push_back(Evaluation::failed(std::string("harness ") + toString(f->stage) + ": " + f->detail));
        continue;
      }
      const Plan plan = spec.makePlan(point, m.cubin);
      TimedCandidate timed = timeAndCheckCandidate(
          spec, plan, device, std::min(options.pairs, kPairsPerLevel[std::min(level, 2)]), yieldPoint);
      if (!timed.comparison) {  // Notes [Launch failures while timing], [Timed outputs are checked]
        m.comparison.reset();
        results.push_back(Evaluation::failed(timed.failure));
        continue;
      }
      m.comparison = std::move(timed.comparison);
      m.level = level;
      results.push_back(Evaluation(m.comparison->candidate.median));
    }
    return results;
  };

  // The search's costs are the tuned rows' times; the target's roofline is
  // for all of the variant's rows (Note [Tuning on a row subset]).
  const double rowScale =
      spec.variantRows > spec.rows ? static_cast<double>(spec.variantRows) / static_cast<double>(spec.rows) : 1.0;
  SearchOptions so;
  so.seed = (static_cast<uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}();
  for (const FamilyPoint& p : spec.seeds) so.seeds.push_back(p.toSearchPoint());
  so.initialPopulation = std::max<int>(static_cast<int>(so.seeds.size()), 8);
  so.maxEvaluations = options.searchEvaluations;
  so.maxBudgetLevel = 2;
  if (options.clock) {
    options.clock->applyTo(so);  // Note [Stopping a target's search]
    so.goodEnoughCost /= rowScale;
  }
  so.outOfTime = [&interrupted, budget = so.outOfTime] { return interrupted || (budget && budget()); };
  SearchResult search = runSearchBatched(space, evaluate, so);
  HOTKERNEL_CHECK(!interrupted, "tuning interrupted");  // Note [Interrupted tuning]

  const Candidate* best = search.best();
  // Note [Which candidate is accepted] (Search.h).
  std::vector<TimedCandidateCost> timed;
  for (size_t i = 0; i < search.lineage.size(); ++i) {
    const Candidate& c = search.lineage[i];
    const Measured& m = measured[c.point];
    if (!c.ok() || !m.comparison) continue;
    timed.push_back({i, c.budgetLevel, *c.cost, m.comparison->clears(options.minSpeedup)});
  }
  const std::optional<size_t> accepted = acceptedCandidate(timed);
  for (const Candidate& c : search.lineage) {
    const Measured& m = measured[c.point];
    const FamilyPoint point = FamilyPoint::fromSearchPoint(c.point);
    CandidateRecord record;
    record.params = spec.paramsJson(point);
    record.candidateId = c.id;
    record.origin = toString(c.origin);
    record.round = c.round;
    record.compileSeconds = m.compileSeconds;
    if (c.parentId != Candidate::kNoParent) record.parentId = c.parentId;
    record.mutation = c.mutation;
    if (m.harness) {
      record.stages.emplace();
      for (const StageResult& sr : m.harness->stages) (*record.stages)[toString(sr.stage)] = {sr.passed, sr.detail};
      record.harnessSeed = m.harness->seed;
      record.maxAbsError = m.harness->maxAbsError;
    }
    if (!c.ok()) {
      record.stage = c.failure.rfind("compile", 0) == 0  ? "compile"
                     : c.failure.rfind("launch", 0) == 0 ? "launch"
                     : c.failure.rfind("timed", 0) == 0  ? "timed"
                                                         : "harness";
      record.error = c.failure.substr(0, 2000);
    } else if (m.comparison) {
      const Comparison& cmp = *m.comparison;
      record.stage = "benchmark";
      record.atenUs = cmp.baseline.median;
      record.kernelUs = cmp.candidate.median;
      record.speedup = cmp.speedup.median;
      record.speedupCi = ConfidenceInterval{cmp.speedup.low, cmp.speedup.high};
      record.pairs = cmp.speedup.n;
      record.budgetLevel = m.level;
      const bool accept = accepted && &c == &search.lineage[*accepted];
      record.accepted = accept;
      record.clears = cmp.clears(options.minSpeedup);
      if (accept) {
        bestSpeedup = cmp.speedup.median;
        outcome.accepted = true;
        outcome.family = spec.family;
        outcome.paramsJson = spec.paramsJson(point);
        outcome.kernelName = spec.kernelName;
        outcome.cubin = m.cubin;
        outcome.metrics.kernel = KernelMetrics::of(cmp, m.harness->maxAbsError);
        if (spec.harnessSpec.tolerance) {
          outcome.metrics.kernel->tolerance = spec.harnessSpec.tolerance(spec.dtype, spec.cols);
        }
      }
    }
    outcome.metrics.candidates.push_back(std::move(record));
  }
  outcome.metrics.search = SearchSummary{search.seed, search.evaluations, search.rounds, search.stop,
                                         spec.validPoints.size()};
  const double bestUs = best && best->ok() ? *best->cost * rowScale : 0.0;
  if (spec.variantRows > spec.rows) outcome.metrics.tunedRows = spec.rows;
  if (spec.harnessRows > 0) outcome.metrics.harnessRows = spec.harnessRows;
  if (bestUsOut) *bestUsOut = bestUs;
  // The target's best is what it will run: the accepted candidate's time when one is (Note [Which candidate is
  // accepted]: not always the fastest median), else the fastest correct one's.
  const double targetUs = accepted ? *search.lineage[*accepted].cost * rowScale : bestUs;
  if (options.clock) outcome.metrics.target = options.clock->summary(targetUs, targetStopOf(search.stop));
  return outcome;
}

}  // namespace hotkernel
