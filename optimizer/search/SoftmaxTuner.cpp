#include "hotkernel/optimizer/SoftmaxTuner.h"

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAGeneratorImpl.h>
#include <ATen/ops/_log_softmax_cuda_dispatch.h>
#include <ATen/ops/_softmax_cuda_dispatch.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAGraphsC10Utils.h>

#include <algorithm>
#include <set>
#include <optional>
#include <cmath>
#include <limits>
#include <sstream>

#include "FamilyCandidate.h"
#include "hotkernel/kernels/FamilyDescriptor.h"
#include "hotkernel/optimizer/AgentTask.h"
#include "hotkernel/optimizer/CubinSections.h"
#include "hotkernel/optimizer/Benchmark.h"
#include "hotkernel/optimizer/ExternalAgent.h"
#include "hotkernel/optimizer/FamilyTuner.h"
#include "hotkernel/optimizer/SandboxCompile.h"
#include "hotkernel/optimizer/SandboxRun.h"
#include "hotkernel/optimizer/Search.h"
#include "hotkernel/optimizer/Harness.h"
#include "hotkernel/optimizer/SlicedInput.h"
#include "hotkernel/optimizer/TunerScope.h"
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

namespace {

// "" or the first row of `bad` (a [rows] bool tensor) with its value and bound.
std::string firstBadRow(const at::Tensor& bad, const at::Tensor& value, const at::Tensor& bound, const char* what) {
  const int64_t count = bad.sum().item<int64_t>();
  if (count == 0) return {};
  const int64_t r = bad.to(at::kInt).argmax().item<int64_t>();
  std::ostringstream os;
  os.precision(9);
  os << count << " row(s) where " << what << "; first row " << r << ": " << value[r].item<double>() << ", bound "
     << bound[r].item<double>();
  return os.str();
}

}  // namespace

RowOpSpec softmaxSpec(SoftmaxOp op) {
  // Both ops through the general form with an elementwise bound, absolute +
  // relative (Notes [Softmax bound], [Log-softmax tolerance]), and the
  // family's invariant against float64 (Note [Family invariants]).
  // Non-finite references (NaN rows, -inf entries) must match exactly: bound 0 there.
  RowOpSpec spec;
  const bool log = op == SoftmaxOp::LogSoftmax;
  spec.op = log ? "aten::_log_softmax" : "aten::_softmax";
  spec.outputs = {RowOpOutput{"out", false, [log](const at::Tensor& in, const std::vector<at::Tensor>& refs, DType d) {
                                const SoftmaxFamily::Bound b = log ? SoftmaxFamily::logSoftmaxTolerance(d)
                                                                   : SoftmaxFamily::softmaxBound(d, in.size(1));
                                return refs[0].to(at::kFloat).abs().nan_to_num_(0.0, 0.0, 0.0).mul_(b.relative).add_(
                                    b.absolute);
                              }}};
  spec.outputs[0].rowLocalBound = true;
  spec.makeArgs = [](int64_t, int64_t, DType, at::Generator&) { return RowOpArgs{}; };
  spec.references = [log](const at::Tensor& in, const RowOpArgs&) {
    return std::vector<at::Tensor>{log ? at::cuda::_log_softmax(in, -1, false) : at::cuda::_softmax(in, -1, false)};
  };
  spec.references64 = [log](const at::Tensor& in64, const RowOpArgs&) {
    return log ? at::cuda::_log_softmax(in64, -1, false) : at::cuda::_softmax(in64, -1, false);
  };
  spec.kernelArgs = [](const at::Tensor& in, const RowOpArgs&, const std::vector<at::Tensor>& outs) {
    return KernelArgs()
        .pointer(in.const_data_ptr())
        .pointer(outs[0].mutable_data_ptr())
        .int64(in.size(0))
        .int64(in.size(1));
  };
  if (log) {
    // Note [Log-softmax logsumexp]: per row, |logsumexp(out)| <= absolute + relative * entropy.
    spec.invariant = [](const at::Tensor&, const at::Tensor& out64, const at::Tensor& ref64, DType d) {
      const SoftmaxFamily::Bound b = SoftmaxFamily::logSumExpBound(d, ref64.size(1));
      const at::Tensor rowsDefined = ~ref64.isnan().any(1) & ref64.isfinite().any(1);
      const at::Tensor p = ref64.exp();
      const at::Tensor entropy = (p * ref64.abs()).nan_to_num(0.0, 0.0, 0.0).sum(1);
      const at::Tensor lse = at::logsumexp(out64, {1});
      const at::Tensor bound = entropy.mul(b.relative).add(b.absolute);
      return firstBadRow(rowsDefined & ~(lse.abs() <= bound), lse, bound, "logsumexp(out) is not 0");
    };
  } else {
    // Note [Softmax row sums]: per row, |sum(out) - 1| <= relative + (small p) * perSmall.
    spec.invariant = [](const at::Tensor&, const at::Tensor& out64, const at::Tensor& ref64, DType d) {
      const SoftmaxFamily::RowSumBound b = SoftmaxFamily::rowSumBound(d, ref64.size(1));
      const at::Tensor rowsDefined = ~ref64.isnan().any(1);
      const at::Tensor small = (ref64 < b.smallBelow).sum(1).to(at::kDouble);
      const at::Tensor bound = small.mul(b.perSmall).add(b.relative);
      const at::Tensor excess = (out64.sum(1) - ref64.sum(1)).abs();
      return firstBadRow(rowsDefined & ~(excess <= bound), out64.sum(1), bound, "the row does not sum to 1");
    };
  }
  return spec;
}

HarnessCandidate softmaxCandidate(DType dtype, const SoftmaxParams& p, const std::string& cubin) {
  // A softmax variant is (dtype, rows, cols): the shape is all the helper replaces.
  HarnessCandidate c = detail::familyCandidate<SoftmaxFamily>(SoftmaxVariant{dtype, 1, 1}, p, cubin,
                                                              SoftmaxFamily::kName);
  c.acceptsPointers = [dtype, p](const void* in, const void* out) {
    return in != out && SoftmaxFamily::guardPointers(in, out, dtype, p);
  };
  return c;
}

namespace {

// Note [External agent rounds]
// After the family's points, the agent gets the task (with the best kernel so
// far and feedback on its last reply) and proposes a source. Every reply goes
// through: validation (ExternalAgent), compile in the sandbox helper, the
// refusal of writable global data (Note [Agent kernels hold no state]),
// the first run and the five harness stages in the sandbox-run helper (a
// fault or hang there cannot touch this process's CUDA context: Note [The
// harness stages in the sandbox process]), the five-stage harness here, then
// the benchmark; the
// stage it failed at is the next round's feedback.
void askAgent(const SoftmaxVariant& v, int device, const std::string& arch, const TunerOptions& options,
              TuneOutcome& outcome, double& bestSpeedup) {
  AgentTask task = makeSoftmaxAgentTask(v, arch);
  // A cluster point's source needs its cluster launch, which the agent's
  // launch format cannot express: the agent then gets no best source.
  const std::optional<SoftmaxParams> chosen =
      outcome.accepted && outcome.family == SoftmaxFamily::kName
          ? std::optional<SoftmaxParams>(SoftmaxParams::fromJson(outcome.paramsJson))
          : std::nullopt;
  if (chosen && chosen->cluster == 1) {
    AgentBest best;
    best.origin = "family";
    best.kernel.source = specializeSource(
        SoftmaxFamily::source(), definesFromOptions(SoftmaxFamily::compileOptions(v.dtype, *chosen)));
    best.kernel.kernelName = SoftmaxFamily::kKernelName;
    best.kernel.launch.block = chosen->threads;
    best.kernel.launch.rowsPerBlock = chosen->rowsPerCta;
    const std::optional<KernelMetrics>& familyKernel = outcome.metrics.kernel;
    best.timing = {familyKernel ? familyKernel->atenUs : 0.0, familyKernel ? familyKernel->kernelUs : 0.0,
                   bestSpeedup};
    task.best = best;
  }
  const RowOpSpec spec = softmaxSpec();
  const auto opts = at::TensorOptions().dtype(scalarTypeOf(v.dtype)).device(at::kCUDA, device);
  for (int round = 1; round <= options.agentRounds; ++round) {
    if (options.yieldPoint) HOTKERNEL_CHECK(options.yieldPoint(), "tuning interrupted");
    task.attempt = round;
    CandidateRecord log;
    log.origin = "agent";
    log.attempt = round;
    log.candidateId = 100000 + round;
    AgentFeedback fb;
    auto finish = [&](AgentStage stage, const std::string& error, const std::string& compileLog = "") {
      fb.stage = stage;
      fb.error = error;
      fb.log = compileLog;
      log.stage = agentStageName(stage);
      log.error = error.substr(0, 2000);
      outcome.metrics.candidates.push_back(log);
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
    log.params = nlohmann::json{{"launch", reply->launch.toJson()}};
    log.kernelName = reply->kernelName;
    SandboxCompileRequest req;
    req.source = reply->source;
    req.arch = arch;
    SandboxCompileResult compiled = sandboxCompile(req);
    log.compileSeconds = compiled.compileSeconds;
    if (!compiled.compiled()) {
      finish(AgentStage::Compile, compiled.error, compiled.log);
      continue;
    }
    // Note [Agent kernels hold no state] (CubinSections.h).
    std::vector<std::string> globals;
    try {
      globals = writableGlobalData(compiled.cubin);
    } catch (const std::exception& e) {
      finish(AgentStage::Compile, std::string("unreadable cubin: ") + e.what());
      continue;
    }
    if (!globals.empty()) {
      std::string list;
      for (const std::string& g : globals) list += (list.empty() ? "" : ", ") + g;
      finish(AgentStage::Compile,
             "the cubin holds writable global data (" + list +
                 "): a __device__ variable keeps state across launches, which agent kernels may not");
      continue;
    }
    // The first run and the five stages in the sandbox process (Note [The harness stages in the sandbox
    // process]): a kernel that faults only on some stage's inputs would otherwise fault in this process.
    {
      const kernels::LaunchGeometry g = reply->launch.geometry(v.rows);
      SandboxRunRequest run{compiled.cubin, reply->kernelName, LaunchGeometry{g.gridX, g.blockX, g.sharedBytes},
                            v.rows, v.cols, static_cast<int>(kernels::elementSize(v.dtype)),
                            v.dtype == DType::Float16, device};
      run.harness = SandboxHarnessRequest{reply->launch, 0};
      // The sandbox's runs are GPU work too (another process, its own context).
      if (options.yieldPoint) HOTKERNEL_CHECK(options.yieldPoint(), "tuning interrupted");
      const SandboxRunResult sandboxed = sandboxRun(run);
      if (!sandboxed.ok) {
        finish(sandboxed.failedInStage() ? AgentStage::Correctness : AgentStage::Load,
               "in the sandbox process: " + sandboxed.error);
        continue;
      }
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
    log.stages.emplace();
    for (const StageResult& sr : h.stages) (*log.stages)[toString(sr.stage)] = {sr.passed, sr.detail};
    if (!h.passed) {
      // Abandoned at a yield point: no verdict on this reply (Note [Bounded units of background GPU work]).
      HOTKERNEL_CHECK(h.failure()->detail != "interrupted", "tuning interrupted");
      finish(AgentStage::Correctness,
             std::string(toString(h.failure()->stage)) + " stage: " + h.failure()->detail);
      continue;
    }
    try {
      std::shared_ptr<CudaKernelLauncher> launcher =
          CudaKernelLauncher::load(device, compiled.cubin, reply->kernelName, hc.geometry(v.rows, v.cols), 16,
                                   hc.description);
      const at::Tensor in = buildInRowSlices(
          v.rows, v.cols, scalarTypeOf(v.dtype), device,
          [&](int64_t, int64_t k) { return at::randn({k, v.cols}, opts.dtype(at::kFloat)).mul_(4.0); },
          options.yieldPoint);
      HOTKERNEL_CHECK(in.defined(), "benchmark interrupted");
      Comparison cmp = timeAgainstAten(*launcher, in, device, options.pairs, options.yieldPoint);
      fb.passed = true;
      fb.timing = AgentTiming{cmp.baseline.median, cmp.candidate.median, cmp.speedup.median};
      log.atenUs = cmp.baseline.median;
      log.kernelUs = cmp.candidate.median;
      log.speedup = cmp.speedup.median;
      log.speedupCi = ConfidenceInterval{cmp.speedup.low, cmp.speedup.high};
      const bool accept = cmp.clears(options.minSpeedup);
      log.accepted = accept;
      log.clears = accept;
      if (accept && cmp.speedup.median > bestSpeedup) {
        bestSpeedup = cmp.speedup.median;
        outcome.accepted = true;
        outcome.family = "agent";
        outcome.paramsJson = {{"launch", reply->launch.toJson()}};
        outcome.kernelName = reply->kernelName;
        outcome.cubin = compiled.cubin;
        // The agent's kernel replaces the family's: its measurements, the bound it was held to.
        KernelMetrics kernel = KernelMetrics::of(cmp, h.maxAbsError);
        const SoftmaxFamily::Bound bound = SoftmaxFamily::softmaxBound(v.dtype, v.cols);
        kernel.bound = ErrorBound{bound.absolute, bound.relative};
        kernel.fromAgent = true;
        outcome.metrics.kernel = kernel;
        AgentBest best;
        best.origin = "agent";
        best.kernel = *reply;
        best.timing = *fb.timing;
        task.best = best;
      }
      finish(AgentStage::Benchmark, "");
    } catch (const std::exception& e) {
      // An interrupted benchmark gives no timing and no feedback: the tuning stops.
      if (std::string(e.what()).find("benchmark interrupted") != std::string::npos) throw;
      finish(AgentStage::Benchmark, e.what());
    }
  }
}

}  // namespace

FamilyTuneSpec softmaxTuneSpec(const SoftmaxVariant& v, int device, const TunerOptions& options, SoftmaxOp op) {
  HOTKERNEL_CHECK(SoftmaxFamily::guardVariant(v), "softmax family cannot serve this variant");
  const DeviceInfo info = queryDevice(device);
  const int computeCapability = info.ccMajor * 10 + info.ccMinor;
  // The family search (Note [Family search], optimizer/search/FamilyTuner.cpp)
  // over the points this GPU runs (clusters need sm_90), seeded with the
  // family's guesses for this variant.
  const RowOpSpec spec = softmaxSpec(op);
  auto toFamilyPoint = [](const SoftmaxParams& p) {
    // variant: 0 registers or streaming, 1 staged, k > 1 staged and pipelined over k rows a cluster.
    return FamilyPoint{p.threads, p.rowsPerCta, p.vec, p.items, p.cluster, !p.smem ? 0 : std::max(1, p.clusterRows)};
  };
  auto toParams = [](const FamilyPoint& p) {
    SoftmaxParams s;
    s.threads = p.threads;
    s.rowsPerCta = p.rowsPerCta;
    s.vec = p.vec;
    s.items = p.items;
    s.cluster = p.cluster;
    s.smem = p.variant != 0;
    s.clusterRows = p.variant > 1 ? p.variant : 1;
    return s;
  };
  FamilyTuneSpec fs;
  fs.family = kernels::softmaxFamilyName(op);
  fs.kernelName = SoftmaxFamily::kKernelName;
  fs.source = SoftmaxFamily::source();
  fs.program = "softmax_lastdim.cu";
  fs.dtype = v.dtype;
  fs.rows = v.rows;
  fs.cols = v.cols;
  for (const SoftmaxParams& p : SoftmaxFamily::allParameterPoints(v.dtype)) {
    if (SoftmaxFamily::guardParams(v, p) && p.minComputeCapability() <= computeCapability) {
      fs.validPoints.push_back(toFamilyPoint(p));
    }
  }
  std::set<SearchPoint> listed;
  for (const FamilyPoint& p : fs.validPoints) listed.insert(p.toSearchPoint());
  for (const SoftmaxParams& p : SoftmaxFamily::parameterSpace(v, computeCapability)) {
    fs.seeds.push_back(toFamilyPoint(p));
    // A seed outside the listed points (a tight staged slice: Note [Tight staged slices]) is searched too.
    if (listed.insert(fs.seeds.back().toSearchPoint()).second) fs.validPoints.push_back(fs.seeds.back());
    // A pipelined seed (the space seeds the first count, for many rows: Note [Pipelined slices]) brings its
    // twins with the other counts, one step of the variant axis from it.
    for (int clusterRows : SoftmaxFamily::kPipelinedClusterRows) {
      if (p.clusterRows == 1) break;
      SoftmaxParams twin = p;
      twin.clusterRows = clusterRows;
      if (SoftmaxFamily::guardParams(v, twin) && listed.insert(toFamilyPoint(twin).toSearchPoint()).second) {
        fs.validPoints.push_back(toFamilyPoint(twin));
      }
    }
  }
  // The harness holds about eight row buffers at once, the timed calls two
  // inputs and two checked outputs besides theirs: a variant whose rows do not
  // fit the cap is validated and timed on fs.rows of them, its points and
  // seeds the full variant's (Note [Tuning on a row subset]).
  chooseTuningRows(fs, device, 12, options);
  fs.compileOptions = [v, op, toParams](const FamilyPoint& p) {
    return SoftmaxFamily::compileOptions(v.dtype, toParams(p), op);
  };
  fs.paramsJson = [toParams](const FamilyPoint& p) { return toParams(p).toJson(); };
  fs.candidate = [dtype = v.dtype, toParams](const FamilyPoint& p, const std::string& cubin) {
    return softmaxCandidate(dtype, toParams(p), cubin);
  };
  fs.harnessSpec = spec;
  // The timed plan is the tuned rows'; the engine makes the full variant's from the outcome.
  const VariantKey key{static_cast<int32_t>(v.dtype), device, fs.rows, v.cols};
  fs.makePlan = [key, device, op, toParams](const FamilyPoint& p, const std::string& cubin) {
    return kernels::softmaxDescriptor(op).makePlan(key, toParams(p).toJson(), cubin, device);
  };
  // The timed calls' inputs (Note [Timed outputs are checked]), drawn in row
  // slices, a yield point before each (the first before any GPU work of the tuner).
  const auto floatOpts = at::TensorOptions().dtype(at::kFloat).device(at::kCUDA, device);
  fs.timedInputs = drawTimedInputs(
      spec, v.dtype, fs.rows, v.cols, device,
      [&](int64_t k) { return at::randn({k, v.cols}, floatOpts).mul_(4.0); }, options.yieldPoint);
  fs.atenCall = atenReferenceOfSpec(spec).call;
  return fs;
}

TuneOutcome tuneSoftmax(const SoftmaxVariant& v, int device, const TunerOptions& options, SoftmaxOp op) {
  HOTKERNEL_CHECK(SoftmaxFamily::guardVariant(v), "softmax family cannot serve this variant");
  HOTKERNEL_CHECK(nvrtcAvailable(), "NVRTC is unavailable");
  const std::string arch = queryDevice(device).nvrtcArch();
  TunerScope scope(device);  // Note [A tuner's scope]
  const FamilyTuneSpec fs = softmaxTuneSpec(v, device, options, op);
  double bestSpeedup = 0, bestUs = 0;
  TuneOutcome outcome = tuneFamily(fs, device, arch, options, bestSpeedup, &bestUs);

  // Note [Stopping a target's search]: agent rounds only for a target not
  // stopped yet, and only on all of the variant's rows (Note [Tuning on a row subset]).
  const bool agentWorthIt = !options.clock || options.clock->stop(bestUs, 0) == TargetStop::None;
  if (agentWorthIt && options.agent && op == SoftmaxOp::Softmax && fs.rows == v.rows) {
    // askAgent adds its rounds to the candidates and may replace the kernel with the agent's.
    askAgent(v, device, arch, options, outcome, bestSpeedup);
  }
  return outcome;
}

}  // namespace hotkernel
