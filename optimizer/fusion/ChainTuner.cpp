#include "hotkernel/optimizer/ChainTuner.h"

#include <tbb/parallel_for.h>

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAGeneratorImpl.h>
#include <c10/cuda/CUDAGraphsC10Utils.h>
#include <c10/cuda/CUDAGuard.h>

#include <algorithm>
#include <chrono>
#include <limits>
#include <optional>

#include "hotkernel/chain/ChainEntry.h"
#include "hotkernel/chain/ChainParameterSpace.h"
#include "hotkernel/chain/ChainPlan.h"
#include "hotkernel/optimizer/Benchmark.h"
#include "hotkernel/optimizer/ChainHarness.h"
#include "hotkernel/optimizer/ChainLayoutValues.h"
#include "hotkernel/optimizer/FamilyTuner.h"
#include "hotkernel/optimizer/TargetBudget.h"
#include "hotkernel/optimizer/TunerScope.h"
#include "hotkernel/runtime/Check.h"
#include "hotkernel/runtime/CudaDriver.h"
#include "hotkernel/runtime/ExitGate.h"
#include "hotkernel/runtime/Nvrtc.h"

namespace hotkernel {
namespace {

using chain::ChainKernelParams;
using chain::ChainPlan;
using chain::ChainVariant;

constexpr int kFirstPairs = 9;  // the first timing of every candidate
constexpr size_t kFinalists = 3;  // timed again with options.pairs

struct ChainCandidate {
  ChainKernelParams params;
  std::string cubin;
  std::string error;  // compile or load failure
  double compileSeconds = 0;
  std::optional<ChainPlan> plan;
  std::optional<HarnessReport> harness;
  std::optional<Comparison> comparison;
  int level = -1;
  std::string failure;  // "launch: ..." / "timed: ..."
};

struct Timed {
  std::optional<Comparison> comparison;
  std::string failure;
};

// Each output's memory in the variant's layout (Note [Chain values in a layout]).
std::vector<at::Tensor> emptyOutputs(const ChainVariant& v, bool nanFilled) {
  std::vector<at::Tensor> outs;
  size_t arg = chainFirstOutputArg(v.ir);
  for (int o : v.ir.outputs()) {
    const chain::Node& n = v.ir.node(o);
    outs.push_back(at::empty({chainArgumentElements(v.ir, v.layout, arg++, v.rows, v.cols)},
                             at::TensorOptions().dtype(chainScalarType(n.dtype)).device(at::kCUDA, v.device)));
    if (nanFilled) outs.back().fill_(std::numeric_limits<float>::quiet_NaN());
  }
  return outs;
}

// The outputs' [rows, extent] values, read through their views over `memory`.
std::vector<at::Tensor> outputValues(const ChainVariant& v, const std::vector<at::Tensor>& memory) {
  std::vector<at::Tensor> values;
  size_t arg = chainFirstOutputArg(v.ir);
  for (size_t o = 0; o < memory.size(); ++o) {
    const chain::Node& n = v.ir.node(v.ir.outputs()[o]);
    values.push_back(chainValueOf(n, chainArgumentView(v.ir, v.layout, arg++, memory[o], v.rows, v.cols), v.rows, v.cols));
  }
  return values;
}

std::vector<void*> pointersOf(const std::vector<at::Tensor>& outs) {
  std::vector<void*> p;
  for (const at::Tensor& t : outs) p.push_back(t.mutable_data_ptr());
  return p;
}

// The plan timed against the chain run by ATen (Note [Chain tuning]): its
// calls rotate over `inputs` (memory in the variant's layout; call k on
// input k mod n, the last on input 1), ATen's on the same memory's views;
// the first and the last write NaN-filled outputs of their own that are
// compared with ATen's afterwards.
Timed timeCandidate(const ChainPlan& plan, const std::vector<std::vector<ChainReferenceInput>>& inputs, int pairs,
                    double bound, const std::function<bool()>& yieldPoint) {
  const ChainVariant& v = plan.variant;
  const size_t n = inputs.size();
  const int64_t split = chainColumnSplit(v.layout);  // Note [Chain values in a group view]
  std::vector<std::vector<chain::ChainInputValue>> values;
  std::vector<std::vector<ChainReferenceInput>> views;
  for (const auto& in : inputs) {
    values.push_back(chainInputValues(in));
    views.push_back(chainInputViews(v.ir, v.layout, in, v.rows, v.cols));
  }
  BenchmarkOptions bo;
  bo.pairs = pairs;
  bo.beforePair = yieldPoint;
  bool launchFailed = false, checkedCall = false;
  size_t next = 0, lastInput = 1, atenNext = 0;
  std::vector<at::Tensor> firstOuts, lastOuts;
  bo.beforeCandidate = [&](int call, bool last) {
    next = last ? 1 : static_cast<size_t>(call) % n;
    checkedCall = call == 0 || last;
    if (call == 0) firstOuts = emptyOutputs(v, true);
    if (last) {
      lastInput = next;
      lastOuts = emptyOutputs(v, true);
    }
  };
  Timed result;
  result.comparison = benchmarkInterleaved(
      [&] { (void)runChainWithAten(v.ir, views[atenNext++ % n], v.rows, v.cols, split); },
      [&] {
        if (launchFailed) return;
        const std::vector<at::Tensor> outs = !checkedCall ? emptyOutputs(v, false) : lastOuts.empty() ? firstOuts : lastOuts;
        checkedCall = false;
        launchFailed = !chain::launchChainPlan(plan, values[next], pointersOf(outs),
                                               at::cuda::getCurrentCUDAStream(v.device).stream());
      },
      v.device, bo);
  if (launchFailed) {
    result.comparison.reset();
    result.failure = "launch: the candidate failed to launch while timed";
    return result;
  }
  HOTKERNEL_CHECK(!firstOuts.empty() && !lastOuts.empty(), "the benchmark made no checked call of the candidate");
  for (const auto& [name, input, outs] : {std::tuple<const char*, size_t, const std::vector<at::Tensor>*>{
                                              "first", 0, &firstOuts},
                                          {"last", lastInput, &lastOuts}}) {
    const std::string why = compareChainOutputs(outputValues(v, *outs), chainAtenValues(v.ir, v.layout, inputs[input], v.rows, v.cols), bound);
    if (!why.empty()) {
      result.comparison.reset();
      result.failure = std::string("timed: the ") + name + " timed launch (input " + std::to_string(input) +
                       ") is wrong: " + why;
      return result;
    }
  }
  return result;
}

// The GPU memory one tuning holds at most: every node of a check's ATen run
// materialized as a Full float32 value (the widest), the harness's and the
// timing's inputs and outputs about as much again, the buffers of the
// variant's layout (each argument's span, a strided view's reaching past its
// rows: Note [Chain values in a layout]) four times over (two timed draws,
// a harness draw and its copy or snapshot), and the flush buffer.
int64_t memoryNeeded(const ChainVariant& v, int device) {
  const int64_t full = v.rows * v.cols * 4;
  const int64_t l2 = at::cuda::getDeviceProperties(device)->l2CacheSize;
  int64_t spans = 0;
  const std::vector<int> args = chain::chainTensorArgs(v.ir);
  for (size_t k = 0; k < args.size(); ++k) {
    spans += chainArgumentElements(v.ir, v.layout, k, v.rows, v.cols) *
             static_cast<int64_t>(kernels::elementSize(v.ir.node(args[k]).dtype));
  }
  return 2 * static_cast<int64_t>(v.ir.size()) * full + 4 * spans + 2 * l2;
}

CandidateRecord recordOf(size_t id, const ChainCandidate& c) {
  CandidateRecord r;
  r.candidateId = static_cast<int64_t>(id);
  r.origin = "grid";
  r.round = 0;
  r.params = chain::chainParamsToJson(c.params);
  r.kernelName = chain::kChainKernelName;
  r.compileSeconds = c.compileSeconds;
  if (c.harness) {
    r.stages.emplace();
    for (const StageResult& s : c.harness->stages) (*r.stages)[toString(s.stage)] = {s.passed, s.detail};
    r.harnessSeed = c.harness->seed;
    r.maxAbsError = c.harness->maxAbsError;
  }
  if (!c.error.empty()) {
    r.stage = "compile";
    r.error = c.error.substr(0, 2000);
  } else if (c.harness && !c.harness->passed) {
    r.stage = "harness";
    const StageResult* f = c.harness->failure();
    r.error = (std::string(toString(f->stage)) + ": " + f->detail).substr(0, 2000);
  } else if (!c.failure.empty()) {
    r.stage = c.failure.rfind("launch", 0) == 0 ? "launch" : "timed";
    r.error = c.failure.substr(0, 2000);
  } else if (c.comparison) {
    const Comparison& cmp = *c.comparison;
    r.stage = "benchmark";
    r.atenUs = cmp.baseline.median;
    r.kernelUs = cmp.candidate.median;
    r.speedup = cmp.speedup.median;
    r.speedupCi = ConfidenceInterval{cmp.speedup.low, cmp.speedup.high};
    r.pairs = cmp.speedup.n;
    r.budgetLevel = c.level;
    r.accepted = false;
  }
  return r;
}

// Compiles candidates[from..] with NVRTC in parallel; a failure is the candidate's error.
void compileCandidates(const ChainVariant& v, const std::string& arch, std::vector<ChainCandidate>& candidates,
                       size_t from) {
  tbb::parallel_for(from, candidates.size(), [&](size_t i) {
    ChainCandidate& c = candidates[i];
    const auto t0 = std::chrono::steady_clock::now();
    if (ExitGate::process().exiting()) {  // Note [Ordered exit]: no new compile once the process exits
      c.error = "interrupted: the process is exiting";
      return;
    }
    try {
      c.cubin = compileToCubin(chain::generateChainSource(v.ir, c.params, v.layout), "hk_chain.cu", arch,
                               chain::chainCompileOptions())
                    .cubin;
    } catch (const std::exception& e) {
      c.error = e.what();
    } catch (...) {  // nothing may leave a TBB task (Note [Background failures are contained])
      c.error = "unknown error";
    }
    c.compileSeconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  });
}

}  // namespace

TuneOutcome tuneChain(const ChainVariant& v, const TunerOptions& options) {
  HOTKERNEL_CHECK(nvrtcAvailable(), "NVRTC is unavailable");
  const std::string variant = chain::chainVariantString(v);
  std::vector<ChainKernelParams> space = chain::chainParameterSpace(v.ir, v.rows, v.cols, v.layout);
  const std::string arch = queryDevice(v.device).nvrtcArch();
  // Note [Rows split over a cluster]: thread-block clusters are sm_90's; an older GPU tunes the other points.
  if (!chain::chainArchHasClusters(arch)) {
    space.erase(std::remove_if(space.begin(), space.end(), [](const ChainKernelParams& p) { return p.cluster > 1; }),
                space.end());
  }
  HOTKERNEL_CHECK(!space.empty(), "no chain kernel point serves ", variant);
  TunerScope scope(v.device);
  const int64_t needed = memoryNeeded(v, v.device);
  HOTKERNEL_CHECK(options.memoryCapBytes <= 0 || needed <= options.memoryCapBytes, "tuning ", variant, " needs ",
                  needed, " bytes of GPU memory, over the cap of ", options.memoryCapBytes);
  // Note [Interrupted tuning]: the first stop is remembered; nothing more runs and nothing is stored.
  bool interrupted = false;
  std::function<bool()> yieldPoint;
  if (options.yieldPoint) {
    yieldPoint = [&] {
      if (interrupted) return false;
      interrupted = !options.yieldPoint();
      return !interrupted;
    };
  }
  const size_t count = std::min(space.size(), static_cast<size_t>(std::max(1, options.searchEvaluations)));
  std::vector<ChainCandidate> candidates(count);
  const std::vector<ChainKernelParams> first = chain::firstChainPoints(space, count, v.ir, options.chainEagerRounding);
  for (size_t i = 0; i < count; ++i) candidates[i].params = first[i];
  compileCandidates(v, arch, candidates, 0);

  const double bound = chainTolerance(v.ir);
  at::Generator gen = timingGenerator(v.device);
  std::vector<std::vector<ChainReferenceInput>> timedInputs;
  for (ChainDraw d : {ChainDraw::Uniform, ChainDraw::Normal}) {
    HOTKERNEL_CHECK(!yieldPoint || yieldPoint(), "tuning interrupted");
    timedInputs.push_back(drawChainMemory(v.ir, v.layout, v.rows, v.cols, d, gen));
  }
  SearchStop stop = count < space.size() ? SearchStop::EvaluationBudget : SearchStop::Exhausted;
  int evaluations = 0;
  auto evaluate = [&](size_t from) {
    for (size_t i = from; i < candidates.size(); ++i) {
      ChainCandidate& c = candidates[i];
      if (!c.error.empty()) continue;
      if (options.clock && options.clock->budgetSpent()) {
        stop = SearchStop::OutOfTime;
        return;
      }
      ++evaluations;
      try {
        c.plan = chain::makeChainPlan(v, chain::chainEntryParams(v, c.params).dump(), c.cubin);
      } catch (const std::exception& e) {
        c.error = std::string("load: ") + e.what();
        continue;
      }
      HarnessOptions ho;
      ho.yieldPoint = yieldPoint;
      c.harness = runChainHarness(*c.plan, ho);
      HOTKERNEL_CHECK(!interrupted, "tuning interrupted");
      if (!c.harness->passed) continue;
      Timed t = timeCandidate(*c.plan, timedInputs, std::min(options.pairs, kFirstPairs), bound, yieldPoint);
      HOTKERNEL_CHECK(!interrupted, "tuning interrupted");
      c.comparison = std::move(t.comparison);
      c.failure = t.failure;
      c.level = 0;
    }
  };
  evaluate(0);
  // Note [ATen rounding in a fused kernel]: when no point passed the harness, the same points rounding
  // every 16-bit value as ATen does (unless they did already: Note [Eager rounding on request]).
  const bool anyPassed = std::any_of(candidates.begin(), candidates.end(),
                                     [](const ChainCandidate& c) { return c.harness && c.harness->passed; });
  if (!anyPassed && !options.chainEagerRounding && stop != SearchStop::OutOfTime &&
      chain::atenRoundingApplies(v.ir)) {
    const size_t first = candidates.size();
    for (size_t i = 0; i < count; ++i) {
      ChainCandidate c;
      c.params = space[i];
      c.params.atenRounding = true;
      candidates.push_back(std::move(c));
    }
    HOTKERNEL_CHECK(!yieldPoint || yieldPoint(), "tuning interrupted");
    compileCandidates(v, arch, candidates, first);
    evaluate(first);
  }
  // The fastest few, timed again with the full pairs.
  std::vector<ChainCandidate*> timed;
  for (ChainCandidate& c : candidates) {
    if (c.comparison) timed.push_back(&c);
  }
  std::sort(timed.begin(), timed.end(), [](const ChainCandidate* a, const ChainCandidate* b) {
    return a->comparison->candidate.median < b->comparison->candidate.median;
  });
  if (timed.size() > kFinalists) timed.resize(kFinalists);
  ChainCandidate* best = nullptr;
  if (options.pairs > kFirstPairs) {
    for (ChainCandidate* c : timed) {
      Timed t = timeCandidate(*c->plan, timedInputs, options.pairs, bound, yieldPoint);
      HOTKERNEL_CHECK(!interrupted, "tuning interrupted");
      c->comparison = std::move(t.comparison);
      c->failure = t.failure;
      c->level = 2;
    }
  }
  for (ChainCandidate* c : timed) {
    if (c->comparison && (!best || c->comparison->candidate.median < best->comparison->candidate.median)) best = c;
  }
  // Note [Which candidate is accepted] (Search.h): the finalists' re-timing is the highest level.
  std::vector<TimedCandidateCost> costs;
  for (size_t i = 0; i < candidates.size(); ++i) {
    const ChainCandidate& c = candidates[i];
    if (!c.comparison) continue;
    costs.push_back({i, c.level, c.comparison->candidate.median, c.comparison->clears(options.minSpeedup)});
  }
  const std::optional<size_t> accepted = acceptedCandidate(costs);

  TuneOutcome outcome;
  outcome.metrics.arch = arch;
  for (size_t i = 0; i < candidates.size(); ++i) {
    CandidateRecord r = recordOf(i, candidates[i]);
    ChainCandidate& c = candidates[i];
    if (c.comparison) r.clears = c.comparison->clears(options.minSpeedup);
    if (accepted && i == *accepted) {
      r.accepted = true;
      outcome.accepted = true;
      outcome.family = chain::kChainFamily;
      outcome.paramsJson = chain::chainEntryParams(v, c.params);
      outcome.kernelName = chain::kChainKernelName;
      outcome.cubin = c.cubin;
      outcome.metrics.kernel = KernelMetrics::of(*c.comparison, c.harness->maxAbsError);
      outcome.metrics.kernel->tolerance = bound;
    }
    outcome.metrics.candidates.push_back(std::move(r));
  }
  outcome.metrics.search = SearchSummary{0, evaluations, 2, stop, space.size()};
  if (options.clock) {
    // What it will run: the accepted candidate's time when one is, else the fastest correct one's.
    const double bestUs = accepted ? candidates[*accepted].comparison->candidate.median
                          : best  ? best->comparison->candidate.median
                                  : 0.0;
    outcome.metrics.target = options.clock->summary(bestUs, targetStopOf(stop));
  }
  return outcome;
}

}  // namespace hotkernel
