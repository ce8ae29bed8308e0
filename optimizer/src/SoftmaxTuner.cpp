#include "hotkernel/optimizer/SoftmaxTuner.h"

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAGeneratorImpl.h>
#include <ATen/ops/_log_softmax_cuda_dispatch.h>
#include <ATen/ops/_softmax_cuda_dispatch.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAGraphsC10Utils.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <set>
#include <cmath>
#include <limits>
#include <random>

#include "hotkernel/optimizer/AgentTask.h"
#include "hotkernel/optimizer/Benchmark.h"
#include "hotkernel/optimizer/ExternalAgent.h"
#include "hotkernel/optimizer/SandboxCompile.h"
#include "hotkernel/optimizer/SandboxRun.h"
#include "hotkernel/optimizer/Search.h"
#include "hotkernel/optimizer/Harness.h"
#include "hotkernel/optimizer/PlanFactory.h"
#include "hotkernel/runtime/Check.h"
#include "hotkernel/runtime/CudaDriver.h"
#include "hotkernel/runtime/Logging.h"
#include "hotkernel/runtime/Nvrtc.h"

namespace hotkernel {
namespace {

using kernels::DType;
using kernels::SoftmaxFamily;
using kernels::SoftmaxOp;
using kernels::SoftmaxParams;
using kernels::SoftmaxVariant;

// The candidate against the original kernel, both on the benchmark's stream,
// each call allocating its output like a dispatcher call would.
Comparison timeAgainstAten(const KernelLauncher& launcher, const at::Tensor& in, int device, int pairs,
                           const std::function<bool()>& yieldPoint, SoftmaxOp op = SoftmaxOp::Softmax) {
  BenchmarkOptions bo;
  bo.pairs = pairs;
  bo.beforePair = yieldPoint;
  const int64_t rows = in.size(0), cols = in.size(1);
  return benchmarkInterleaved(
      [&] {
        if (op == SoftmaxOp::LogSoftmax) {
          (void)at::cuda::_log_softmax(in, -1, false);
        } else {
          (void)at::cuda::_softmax(in, -1, false);
        }
      },
      [&] {
        at::Tensor out = at::empty_like(in);
        HOTKERNEL_CHECK(launcher.launch({in.const_data_ptr(), out.mutable_data_ptr(), rows, cols},
                                        at::cuda::getCurrentCUDAStream(device).stream()),
                        "launch failed");
      },
      device, bo);
}

}  // namespace

RowOpSpec softmaxSpec(SoftmaxOp op) {
  RowOpSpec spec;
  if (op == SoftmaxOp::Softmax) {
    spec.op = "aten::_softmax";
    spec.reference = [](const at::Tensor& in) { return at::cuda::_softmax(in, -1, false); };
    spec.reference64 = [](const at::Tensor& in64) { return at::cuda::_softmax(in64, -1, false); };
    spec.tolerance = [](DType d, int64_t cols) { return SoftmaxFamily::tolerance(d, cols); };
    return spec;
  }
  // log_softmax's outputs are unbounded: an elementwise bound, absolute +
  // relative (Note [Log-softmax tolerance]), through the general form.
  spec.op = "aten::_log_softmax";
  spec.outputs = {RowOpOutput{"out", false, [](const at::Tensor&, const std::vector<at::Tensor>& refs, DType d) {
                                const SoftmaxFamily::Bound b = SoftmaxFamily::logSoftmaxTolerance(d);
                                // Non-finite references (NaN rows, -inf entries) must match exactly: bound 0.
                                return refs[0].to(at::kFloat).abs().nan_to_num_(0.0, 0.0, 0.0).mul_(b.relative).add_(
                                    b.absolute);
                              }}};
  spec.makeArgs = [](int64_t, int64_t, DType, at::Generator&) { return RowOpArgs{}; };
  spec.references = [](const at::Tensor& in, const RowOpArgs&) {
    return std::vector<at::Tensor>{at::cuda::_log_softmax(in, -1, false)};
  };
  spec.references64 = [](const at::Tensor& in64, const RowOpArgs&) { return at::cuda::_log_softmax(in64, -1, false); };
  spec.kernelArgs = [](const at::Tensor& in, const RowOpArgs&, const std::vector<at::Tensor>& outs) {
    return KernelArgs()
        .pointer(in.const_data_ptr())
        .pointer(outs[0].mutable_data_ptr())
        .int64(in.size(0))
        .int64(in.size(1));
  };
  return spec;
}

HarnessCandidate softmaxCandidate(DType dtype, const SoftmaxParams& p, const std::string& cubin) {
  HarnessCandidate c;
  c.cubin = cubin;
  c.kernelName = SoftmaxFamily::kKernelName;
  c.description = std::string(SoftmaxFamily::kName) + "[" + p.describe() + "]";
  c.geometry = [dtype, p](int64_t rows, int64_t cols) {
    const kernels::LaunchGeometry g = SoftmaxFamily::launchGeometry(SoftmaxVariant{dtype, rows, cols}, p);
    return LaunchGeometry{g.gridX, g.blockX, g.sharedBytes};
  };
  c.acceptsShape = [dtype, p](int64_t rows, int64_t cols) {
    const SoftmaxVariant v{dtype, rows, cols};
    return SoftmaxFamily::guardVariant(v) && SoftmaxFamily::guardParams(v, p);
  };
  c.acceptsPointers = [dtype, p](const void* in, const void* out) {
    return in != out && SoftmaxFamily::guardPointers(in, out, dtype, p);
  };
  c.alignment = SoftmaxFamily::requiredAlignment(dtype, p);
  return c;
}

namespace {

// Note [External agent rounds]
// After the family's points, the agent gets the task (with the best kernel so
// far and feedback on its last reply) and proposes a source. Every reply goes
// through: validation (ExternalAgent), compile in the sandbox helper, a first
// run in the sandbox-run helper (a fault or hang there cannot touch this
// process's CUDA context), the five-stage harness, then the benchmark; the
// stage it failed at is the next round's feedback.
void askAgent(const SoftmaxVariant& v, int device, const std::string& arch, const TunerOptions& options,
              TuneOutcome& outcome, double& bestSpeedup, nlohmann::json& candidatesLog) {
  AgentTask task = makeSoftmaxAgentTask(v, arch);
  // A cluster point's source needs its cluster launch, which the agent's
  // launch format cannot express: the agent then gets no best source.
  if (outcome.accepted && outcome.family == SoftmaxFamily::kName && outcome.params.cluster == 1) {
    AgentBest best;
    best.origin = "family";
    best.kernel.source = specializeSource(
        SoftmaxFamily::source(), definesFromOptions(SoftmaxFamily::compileOptions(v.dtype, outcome.params)));
    best.kernel.kernelName = SoftmaxFamily::kKernelName;
    best.kernel.launch.block = outcome.params.threads;
    best.kernel.launch.rowsPerBlock = outcome.params.rowsPerCta;
    best.timing = {outcome.metrics.value("atenUs", 0.0), outcome.metrics.value("kernelUs", 0.0), bestSpeedup};
    task.best = best;
  }
  const RowOpSpec spec = softmaxSpec();
  const auto opts = at::TensorOptions().dtype(scalarTypeOf(v.dtype)).device(at::kCUDA, device);
  for (int round = 1; round <= options.agentRounds; ++round) {
    if (options.yieldPoint) HOTKERNEL_CHECK(options.yieldPoint(), "tuning interrupted");
    task.attempt = round;
    nlohmann::json log = {{"origin", "agent"}, {"attempt", round}, {"candidateId", 100000 + round}};
    AgentFeedback fb;
    auto finish = [&](AgentStage stage, const std::string& error, const std::string& compileLog = "") {
      fb.stage = stage;
      fb.error = error;
      fb.log = compileLog;
      log["stage"] = agentStageName(stage);
      if (!error.empty()) log["error"] = error.substr(0, 2000);
      candidatesLog.push_back(log);
      task.lastAttempt = fb;
    };
    std::string why;
    AgentFailure failure = AgentFailure::None;
    std::optional<AgentReply> reply = options.agent->propose(task, &why, &failure);
    if (!reply) {
      finish(agentFailureStage(failure), why);
      continue;
    }
    fb.reply = *reply;
    log["params"] = {{"launch", reply->launch.toJson()}};
    log["kernelName"] = reply->kernelName;
    SandboxCompileRequest req;
    req.source = reply->source;
    req.arch = arch;
    SandboxCompileResult compiled = sandboxCompile(req);
    log["compileSeconds"] = compiled.compileSeconds;
    if (!compiled.compiled()) {
      finish(AgentStage::Compile, compiled.error, compiled.log);
      continue;
    }
    const kernels::LaunchGeometry g = reply->launch.geometry(v.rows);
    SandboxRunRequest run{compiled.cubin, reply->kernelName, LaunchGeometry{g.gridX, g.blockX, g.sharedBytes},
                          v.rows, v.cols, static_cast<int>(kernels::elementSize(v.dtype)),
                          v.dtype == DType::Float16, device};
    SandboxRunResult sandboxed = sandboxRun(run);
    if (!sandboxed.ok) {
      finish(AgentStage::Load, "first run in the sandbox process failed: " + sandboxed.error);
      continue;
    }
    HarnessCandidate hc;
    hc.cubin = compiled.cubin;
    hc.kernelName = reply->kernelName;
    hc.description = "agent[" + reply->kernelName + "]";
    const AgentLaunch launch = reply->launch;
    hc.geometry = [launch](int64_t rows, int64_t) {
      const kernels::LaunchGeometry lg = launch.geometry(rows);
      return LaunchGeometry{lg.gridX, lg.blockX, lg.sharedBytes};
    };
    // The ABI promises the variant's cols and 1..rows rows, 16-byte aligned, no overlap.
    const int64_t maxRows = v.rows, onlyCols = v.cols;
    hc.acceptsShape = [maxRows, onlyCols](int64_t rows, int64_t cols) {
      return cols == onlyCols && rows >= 1 && rows <= maxRows;
    };
    hc.acceptsPointers = [](const void* in, const void* out) {
      return in != out && reinterpret_cast<uintptr_t>(in) % 16 == 0 && reinterpret_cast<uintptr_t>(out) % 16 == 0;
    };
    hc.alignment = 16;
    HarnessOptions ho;
    ho.yieldPoint = options.yieldPoint;
    HarnessReport h = runHarness(spec, hc, v.dtype, v.rows, v.cols, device, ho);
    nlohmann::json stages = nlohmann::json::object();
    for (const StageResult& sr : h.stages) stages[toString(sr.stage)] = sr.passed ? "pass" : "fail: " + sr.detail;
    log["stages"] = stages;
    if (!h.passed) {
      finish(AgentStage::Correctness,
             std::string(toString(h.failure()->stage)) + " stage: " + h.failure()->detail);
      continue;
    }
    try {
      std::shared_ptr<CudaKernelLauncher> launcher =
          CudaKernelLauncher::load(device, compiled.cubin, reply->kernelName, hc.geometry(v.rows, v.cols), 16,
                                   hc.description);
      const at::Tensor in = at::randn({v.rows, v.cols}, opts.dtype(at::kFloat)).mul_(4.0).to(opts.dtype());
      Comparison cmp = timeAgainstAten(*launcher, in, device, options.pairs, options.yieldPoint);
      fb.passed = true;
      fb.timing = AgentTiming{cmp.baseline.median, cmp.candidate.median, cmp.speedup.median};
      log["atenUs"] = cmp.baseline.median;
      log["kernelUs"] = cmp.candidate.median;
      log["speedup"] = cmp.speedup.median;
      log["speedupCi"] = {cmp.speedup.low, cmp.speedup.high};
      const bool accept = cmp.clears(options.minSpeedup);
      log["accepted"] = accept;
      if (accept && cmp.speedup.median > bestSpeedup) {
        bestSpeedup = cmp.speedup.median;
        outcome.accepted = true;
        outcome.family = "agent";
        outcome.paramsJson = {{"launch", reply->launch.toJson()}};
        outcome.kernelName = reply->kernelName;
        outcome.cubin = compiled.cubin;
        outcome.metrics = {{"speedup", cmp.speedup.median}, {"speedupCi", {cmp.speedup.low, cmp.speedup.high}},
                           {"atenUs", cmp.baseline.median}, {"kernelUs", cmp.candidate.median},
                           {"maxAbsError", h.maxAbsError}, {"tolerance", spec.tolerance(v.dtype, v.cols)},
                           {"pairs", cmp.speedup.n}, {"origin", "agent"}};
        AgentBest best;
        best.origin = "agent";
        best.kernel = *reply;
        best.timing = *fb.timing;
        task.best = best;
      }
      finish(AgentStage::Benchmark, "");
    } catch (const std::exception& e) {
      finish(AgentStage::Benchmark, e.what());
    }
  }
}

}  // namespace

TuneOutcome tuneSoftmax(const SoftmaxVariant& v, int device, const TunerOptions& options, SoftmaxOp op) {
  HOTKERNEL_CHECK(SoftmaxFamily::guardVariant(v), "softmax family cannot serve this variant");
  HOTKERNEL_CHECK(nvrtcAvailable(), "NVRTC is unavailable");
  if (options.memoryCapBytes > 0) {
    // The harness holds about eight row buffers at once, plus the flush buffer.
    const int64_t need = 8 * v.rows * v.cols * static_cast<int64_t>(kernels::elementSize(v.dtype)) +
                         2 * at::cuda::getDeviceProperties(device)->l2CacheSize;
    HOTKERNEL_CHECK(need <= options.memoryCapBytes, "tuning ", v.rows, "x", v.cols, " needs ~", need >> 20,
                    " MiB of GPU memory, over the cap of ", options.memoryCapBytes >> 20, " MiB");
  }
  const DeviceInfo info = queryDevice(device);
  const std::string arch = info.nvrtcArch();
  const int computeCapability = info.ccMajor * 10 + info.ccMinor;
  c10::cuda::CUDAGuard deviceGuard(static_cast<c10::DeviceIndex>(device));
  // Never invalidate another thread's graph capture (Note in DESIGN: capture safety).
  c10::cuda::CUDAStreamCaptureModeGuard captureGuard(cudaStreamCaptureModeRelaxed);
  at::cuda::CUDAStream stream = at::cuda::getStreamFromPool(false, device);
  c10::cuda::CUDAStreamGuard streamGuard(stream);

  TuneOutcome outcome;
  outcome.arch = arch;
  nlohmann::json candidatesLog = nlohmann::json::array();

  // Note [Family search]
  // The family's points for this variant form a tiered space (0: threads and
  // rows per CTA, 1: vector width, 2: items per thread, 0 = streaming; the
  // last tier is a niche so each algorithm keeps its best). runSearchBatched
  // seeds it with parameterSpace(v) (the family's best guesses) and runs
  // successive halving with a lineage tree. Each new batch is compiled in
  // parallel (TBB); a candidate passes the five-stage harness once, and is then
  // timed against ATen with more interleaved pairs at each budget level. The
  // winner is accepted only if its speed-up CI at the highest level it reached
  // clears minSpeedup.
  const RowOpSpec spec = softmaxSpec(op);
  const auto opts = at::TensorOptions().dtype(scalarTypeOf(v.dtype)).device(at::kCUDA, device);
  const at::Tensor benchInput = at::randn({v.rows, v.cols}, opts.dtype(at::kFloat)).mul_(4.0).to(opts.dtype());

  std::vector<SoftmaxParams> valid;
  for (const SoftmaxParams& p : SoftmaxFamily::allParameterPoints(v.dtype)) {
    if (SoftmaxFamily::guardParams(v, p) && p.minComputeCapability() <= computeCapability) valid.push_back(p);
  }
  auto toPoint = [](const SoftmaxParams& p) {
    return SearchPoint{{"threads", p.threads}, {"rowsPerCta", p.rowsPerCta}, {"vec", p.vec}, {"items", p.items},
                       {"cluster", p.cluster}};
  };
  auto toParams = [](const SearchPoint& pt) {
    SoftmaxParams p;
    p.threads = pt.at("threads");
    p.rowsPerCta = pt.at("rowsPerCta");
    p.vec = pt.at("vec");
    p.items = pt.at("items");
    p.cluster = pt.at("cluster");
    return p;
  };
  auto valuesOf = [&](int SoftmaxParams::*field) {
    std::vector<int> vals;
    for (const SoftmaxParams& p : valid) vals.push_back(p.*field);
    std::sort(vals.begin(), vals.end());
    vals.erase(std::unique(vals.begin(), vals.end()), vals.end());
    return vals;
  };
  SearchSpace space;
  space.tiers = {
      SearchTier{"launch geometry", {{"threads", valuesOf(&SoftmaxParams::threads)},
                                     {"rowsPerCta", valuesOf(&SoftmaxParams::rowsPerCta)}}, false},
      SearchTier{"memory access", {{"vec", valuesOf(&SoftmaxParams::vec)}}, false},
      SearchTier{"algorithm", {{"items", valuesOf(&SoftmaxParams::items)}}, true},
      // Hopper: a thread-block cluster per row (1 everywhere else).
      SearchTier{"architecture", {{"cluster", valuesOf(&SoftmaxParams::cluster)}}, false},
  };
  std::set<SearchPoint> validPoints;
  for (const SoftmaxParams& p : valid) validPoints.insert(toPoint(p));
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
  auto evaluate = [&](const std::vector<SearchPoint>& batch, int level) {
    // Compile what is new, in parallel.
    std::vector<SearchPoint> fresh;
    for (const SearchPoint& pt : batch) {
      if (!measured.count(pt)) fresh.push_back(pt);
    }
    std::vector<Measured> compiledNow(fresh.size());
    std::vector<std::string> errors(fresh.size());
    tbb::parallel_for(size_t(0), fresh.size(), [&](size_t i) {
      const auto t0 = std::chrono::steady_clock::now();
      try {
        compiledNow[i].cubin = compileToCubin(SoftmaxFamily::source(), "softmax_lastdim.cu", arch,
                                              SoftmaxFamily::compileOptions(v.dtype, toParams(fresh[i]), op))
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
      const SoftmaxParams params = toParams(pt);
      if (!m.harness) {
        HarnessOptions ho;
        ho.yieldPoint = options.yieldPoint;
        m.harness = runHarness(spec, softmaxCandidate(v.dtype, params, m.cubin), v.dtype, v.rows, v.cols, device, ho);
      }
      if (!m.harness->passed) {
        const StageResult* f = m.harness->failure();
        HOTKERNEL_CHECK(f->detail != "interrupted", "tuning interrupted");
        results.push_back(Evaluation::failed(std::string("harness ") + toString(f->stage) + ": " + f->detail));
        continue;
      }
      VariantKey key{static_cast<int32_t>(v.dtype), device, v.rows, v.cols};
      std::shared_ptr<const KernelLauncher> launcher = makeSoftmaxPlan(key, params, m.cubin, device, op).launcher;
      m.comparison = timeAgainstAten(*launcher, benchInput, device,
                                     std::min(options.pairs, kPairsPerLevel[std::min(level, 2)]), options.yieldPoint,
                                     op);
      m.level = level;
      results.push_back(Evaluation(m.comparison->candidate.median));
    }
    return results;
  };

  SearchOptions so;
  so.seed = (static_cast<uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}();
  for (const SoftmaxParams& p : SoftmaxFamily::parameterSpace(v, computeCapability)) so.seeds.push_back(toPoint(p));
  so.initialPopulation = std::max<int>(static_cast<int>(so.seeds.size()), 8);
  so.maxEvaluations = options.searchEvaluations;
  so.maxBudgetLevel = 2;
  if (options.clock) options.clock->applyTo(so);  // Note [Stopping a target's search]
  SearchResult search = runSearchBatched(space, evaluate, so);

  double bestSpeedup = 0;
  const Candidate* best = search.best();
  for (const Candidate& c : search.lineage) {
    const Measured& m = measured[c.point];
    nlohmann::json log = {{"params", toParams(c.point).toJson()},
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
      log["stage"] = c.failure.rfind("compile", 0) == 0 ? "compile" : "harness";
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
        outcome.family = kernels::softmaxFamilyName(op);
        outcome.params = toParams(c.point);
        outcome.paramsJson = outcome.params.toJson();
        outcome.kernelName = SoftmaxFamily::kKernelName;
        outcome.cubin = m.cubin;
        outcome.metrics = {{"speedup", cmp.speedup.median},
                           {"speedupCi", {cmp.speedup.low, cmp.speedup.high}},
                           {"atenUs", cmp.baseline.median},
                           {"kernelUs", cmp.candidate.median},
                           {"maxAbsError", m.harness->maxAbsError},
                            {"pairs", cmp.speedup.n}};
        if (spec.tolerance) outcome.metrics["tolerance"] = spec.tolerance(v.dtype, v.cols);
      }
    }
    candidatesLog.push_back(log);
  }
  const nlohmann::json searchSummary = {{"seed", std::to_string(search.seed)},
                                        {"evaluations", search.evaluations},
                                        {"rounds", search.rounds},
                                        {"stop", toString(search.stop)},
                                        {"validPoints", valid.size()}};

  // Note [Stopping a target's search]: agent rounds only for a target not stopped yet.
  const double bestUs = best && best->ok() ? *best->cost : 0.0;
  const bool agentWorthIt = !options.clock || options.clock->stop(bestUs, 0) == TargetStop::None;
  if (agentWorthIt && options.agent && op == SoftmaxOp::Softmax) askAgent(v, device, arch, options, outcome, bestSpeedup, candidatesLog);
  outcome.metrics["arch"] = arch;
  outcome.metrics["search"] = searchSummary;
  if (options.clock) outcome.metrics["target"] = options.clock->summary(bestUs, targetStopOf(search.stop));
  outcome.metrics["candidates"] = candidatesLog;
  return outcome;
}

}  // namespace hotkernel
