#include "hotkernel/optimizer/Harness.h"

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAGeneratorImpl.h>
#include <c10/cuda/CUDAGuard.h>

#include <cmath>
#include <limits>
#include <random>
#include <utility>

#include "HarnessBuffers.h"
#include "HarnessCompare.h"
#include "hotkernel/optimizer/WorkSlices.h"
#include "hotkernel/runtime/Check.h"
#include "hotkernel/runtime/KernelArgs.h"

// runHarness runs the five stages (Harness.h) one function each, in order,
// on one HarnessRun: the launches and their buffers are HarnessBuffers.cpp's,
// the comparisons with the reference HarnessCompare.cpp's.

namespace hotkernel {

using harness::Interrupted;
using kernels::DType;

at::ScalarType scalarTypeOf(DType d) {
  switch (d) {
    case DType::Float32:
      return at::kFloat;
    case DType::Float16:
      return at::kHalf;
    case DType::BFloat16:
      return at::kBFloat16;
  }
  HOTKERNEL_INTERNAL_ASSERT(false, "unknown dtype");
  return at::kFloat;
}

DType dtypeOfTensor(const at::Tensor& t) {
  switch (t.scalar_type()) {
    case at::kFloat:
      return DType::Float32;
    case at::kHalf:
      return DType::Float16;
    case at::kBFloat16:
      return DType::BFloat16;
    default:
      HOTKERNEL_THROW("no family dtype for ", t.scalar_type());
  }
}

RowOpSpec generalForm(const RowOpSpec& spec) {
  if (!spec.outputs.empty()) {
    HOTKERNEL_CHECK(spec.makeArgs && spec.references && spec.kernelArgs, "row op spec ", spec.op,
                    " with outputs needs makeArgs, references and kernelArgs");
    return spec;
  }
  HOTKERNEL_CHECK(spec.reference && spec.tolerance, "row op spec ", spec.op, " needs reference and tolerance");
  RowOpSpec g = spec;
  auto tolerance = spec.tolerance;
  g.outputs = {RowOpOutput{"out", false, [tolerance](const at::Tensor& in, const std::vector<at::Tensor>&, DType d) {
                             return at::scalar_tensor(tolerance(d, in.size(1)), at::kDouble);
                           }}};
  g.outputs[0].rowLocalBound = true;  // depends on the columns alone
  g.makeArgs = [](int64_t, int64_t, DType, at::Generator&) { return RowOpArgs{}; };
  auto reference = spec.reference;
  g.references = [reference](const at::Tensor& in, const RowOpArgs&) { return std::vector<at::Tensor>{reference(in)}; };
  if (spec.reference64) {
    auto reference64 = spec.reference64;
    g.references64 = [reference64](const at::Tensor& in64, const RowOpArgs&) { return reference64(in64); };
  }
  g.kernelArgs = [](const at::Tensor& in, const RowOpArgs&, const std::vector<at::Tensor>& outs) {
    KernelArgs a;
    a.pointer(in.const_data_ptr()).pointer(outs[0].mutable_data_ptr()).int64(in.size(0)).int64(in.size(1));
    return a;
  };
  return g;
}

const char* toString(HarnessStage s) {
  switch (s) {
    case HarnessStage::Smoke:
      return "smoke";
    case HarnessStage::Sweep:
      return "sweep";
    case HarnessStage::Stability:
      return "stability";
    case HarnessStage::Determinism:
      return "determinism";
    case HarnessStage::EdgeCases:
      return "edge-cases";
  }
  return "?";
}

const StageResult* HarnessReport::failure() const {
  for (const StageResult& s : stages) {
    if (!s.passed) return &s;
  }
  return nullptr;
}

namespace {

double dtypeMax(DType d) {
  switch (d) {
    case DType::Float32:
      return 3.4028234663852886e38;
    case DType::Float16:
      return 65504.0;
    case DType::BFloat16:
      return 3.3895313892515355e38;
  }
  return 1.0;
}

// One run of the harness: what its stages share. runHarness builds it; each
// stage records its result in `report` and returns whether it passed.
struct HarnessRun {
  const RowOpSpec& spec;  // general form
  const HarnessCandidate& c;
  DType dtype;
  int64_t rows, cols;  // the recorded variant
  int device;
  at::Generator& gen;  // the run's device generator, seeded with report.seed
  at::TensorOptions floatOpts;
  at::ScalarType st;            // the check's dtype
  std::function<void()> pause;  // a yield point between bounded units of GPU work; throws Interrupted
  harness::Runner& runner;
  const harness::Comparer& comparer;
  HarnessReport& report;
  HarnessStage stage = HarnessStage::Smoke;  // the stage running now (an interruption fails it)
  std::string why;                           // why the last check failed
  at::Tensor x;                              // the smoke input, reused by the later stages
  RowOpArgs xArgs;                           // its extra arguments
  std::vector<at::Tensor> first;             // the determinism stage's first outputs

  // A [r, n] input in the check's dtype, built in row slices: `rowsAt(b, k)`
  // gives rows [b, b + k) (float32), converted into place.
  at::Tensor buildSliced(int64_t r, int64_t n, const std::function<at::Tensor(int64_t, int64_t)>& rowsAt) {
    at::Tensor t = at::empty({r, n}, floatOpts.dtype(st));
    for (const RowSlice& s : rowSlices(r, n, kBuildTrafficPerElement)) {
      pause();
      t.narrow(0, s.begin, s.rows).copy_(rowsAt(s.begin, s.rows));
    }
    return t;
  }
  // Uniform in [-1, 5): asymmetric on purpose, so that the stability stage's
  // negated set reaches values (down to -5) the smoke input never holds.
  at::Tensor randomInput(int64_t r, int64_t n) {
    return buildSliced(r, n, [&](int64_t, int64_t k) { return at::rand({k, n}, gen, floatOpts).mul_(6.0).sub_(1.0); });
  }
  RowOpArgs drawArgs(int64_t r, int64_t n) { return spec.makeArgs(r, n, dtype, gen); }
  // Records stage `s` as failed with `detail`; false.
  bool fail(HarnessStage s, const std::string& detail) {
    report.stages.push_back(StageResult{s, false, detail});
    report.passed = false;
    return false;
  }
  // Checks one input (and its extra arguments) against the reference; false +
  // why on any mismatch, naming the launch's pre-fill. Every output is
  // compared under its own bound.
  bool check(const at::Tensor& in, const RowOpArgs& args, std::string& why) {
    pause();
    std::vector<at::Tensor> outs = runner.run(in, args, why);
    if (outs.empty()) return false;
    if (!comparer.compareAll(in, args, outs, why, report.maxAbsError)) {
      why += std::string(" (output pre-filled with ") + harness::prefillName(runner.lastPrefill) + ")";
      return false;
    }
    return true;
  }
};

// Loads the candidate's module; a failure (or an interruption) fails the smoke stage.
bool loadCandidate(HarnessRun& run) {
  const HarnessCandidate& c = run.c;
  try {
    run.pause();  // loading a module is work on the device too
    run.runner.launcher = CudaKernelLauncher::load(run.device, c.cubin, c.kernelName, c.geometry(run.rows, run.cols),
                                                   c.alignment, c.description);
  } catch (const Interrupted&) {
    return run.fail(HarnessStage::Smoke, "interrupted");
  } catch (const std::exception& e) {
    return run.fail(HarnessStage::Smoke, std::string("cannot load: ") + e.what());
  }
  return true;
}

// 1. smoke: the recorded variant.
bool runSmoke(HarnessRun& run) {
  std::string& why = run.why;
  run.stage = HarnessStage::Smoke;
  run.x = run.randomInput(run.rows, run.cols);
  run.xArgs = run.drawArgs(run.rows, run.cols);
  if (!run.check(run.x, run.xArgs, why)) return run.fail(HarnessStage::Smoke, why);
  run.report.stages.push_back({HarnessStage::Smoke, true, "recorded variant"});
  return true;
}

// 2. variant sweep: neighbours the guard accepts.
bool runSweep(HarnessRun& run) {
  const int64_t rows = run.rows, cols = run.cols;
  std::string& why = run.why;
  run.stage = HarnessStage::Sweep;
  std::vector<std::pair<int64_t, int64_t>> shapes = {
      {1, cols}, {rows + 1, cols}, {std::min<int64_t>(rows, 7), cols}};
  if (rows > 1) shapes.push_back({rows - 1, cols});
  for (int64_t dc : {-64, -8, -1, 1, 8}) {
    if (cols + dc >= 1) shapes.push_back({std::min<int64_t>(rows, 33), cols + dc});
  }
  shapes.push_back({std::min<int64_t>(rows, 5), 1});
  int swept = 0;
  for (auto [r, n] : shapes) {
    if (!run.c.acceptsShape(r, n)) continue;
    const RowOpArgs args = run.drawArgs(r, n);
    const at::Tensor in = run.randomInput(r, n);
    if (!run.check(in, args, why)) return run.fail(HarnessStage::Sweep, why);
    ++swept;
  }
  run.report.stages.push_back({HarnessStage::Sweep, true, std::to_string(swept) + " neighbour shapes"});
  return true;
}

// 3. numerical stability: each input set built (in row slices) just before its check.
bool runStability(HarnessRun& run) {
  const RowOpSpec& spec = run.spec;
  const DType dtype = run.dtype;
  const int64_t rows = run.rows, cols = run.cols;
  const at::Tensor& x = run.x;
  std::string& why = run.why;
  run.stage = HarnessStage::Stability;
  // Note [Near-max inputs of sums]
  // A quarter of the dtype's max tests that a row op's arithmetic survives
  // large values. A sum of such values overflows float32 or not depending on
  // the order of the additions (partial sums of either sign may pass the
  // max, or meet as inf - inf = NaN), so ATen's result is no reference there;
  // sums ask for max / (4 cols) instead, where no order overflows.
  const double big = spec.nearMaxMagnitude ? spec.nearMaxMagnitude(dtype, cols) : dtypeMax(dtype) / 4.0;
  // A copy even for float32 inputs (the sets below modify it in place).
  auto xf = [&](int64_t b, int64_t k) { return x.narrow(0, b, k).to(at::kFloat, /*non_blocking=*/false, /*copy=*/true); };
  auto fromX = [&](std::function<at::Tensor(at::Tensor)> f) {
    return [&, f] { return run.buildSliced(rows, cols, [&](int64_t b, int64_t k) { return f(xf(b, k)); }); };
  };
  // Note [Stress inputs]
  // Every family gets huge ("near max") and tiny magnitudes (2^-100 of the
  // smoke input, 2^-12 for float16, whose normal range ends at 2^-14: far
  // from float32's subnormals, so flush-to-zero arithmetic cannot matter),
  // all-zero rows and all-equal rows (a random multiple of 1/16 in [-2, 2]
  // per row: few mantissa bits, so every row sum and mean is exact in
  // float32 and ATen's result is exact too: layer_norm's output is its
  // bias), and a NaN. +inf and -inf entries, a row of -inf and a row of
  // +inf only where the reference defines the result (infinitiesDefined):
  // softmax, log_softmax and cross_entropy give NaN for a row holding +inf
  // and propagate -inf entries; the reductions give +-inf or NaN. The norms
  // do not: ATen's vectorized and generic CUDA paths for the same row
  // disagree (NaN from inf - inf in one, inf * 0 in the other), so there is
  // no one answer to match; their NaN propagation, huge, tiny and
  // all-equal rows are still checked.
  const double tiny = dtype == DType::Float16 ? std::ldexp(1.0, -12) : std::ldexp(1.0, -100);
  std::vector<std::pair<std::string, std::function<at::Tensor()>>> stress = {
      {"negated", fromX([](at::Tensor v) { return v.neg_(); })},
      {"x3", fromX([](at::Tensor v) { return v.mul_(3); })},
      {"x0.01", fromX([](at::Tensor v) { return v.mul_(0.01); })},
      {"near max", fromX([big](at::Tensor v) { return v.sign().mul_(big).mul_(at::rand_like(v)); })},
      {"tiny", fromX([tiny](at::Tensor v) { return v.mul_(tiny); })},
      {"zeros", [&] {
         run.pause();
         return at::zeros_like(x);
       }},
      {"all-equal rows", [&] {
         return run.buildSliced(rows, cols, [&](int64_t, int64_t k) {
           return at::rand({k, 1}, run.gen, run.floatOpts).mul_(64.0).sub_(32.0).round_().div_(16.0).expand({k, cols}).contiguous();
         });
       }},
      {"shifted", fromX([dtype](at::Tensor v) { return v.add_(dtype == DType::Float16 ? 1e4 : 1e5); })},
  };
  if (spec.infinitiesDefined) {
    stress.push_back({"-inf and NaN", [&] {
                        at::Tensor special = run.buildSliced(rows, cols, xf);
                        const int64_t r0 = 0, r1 = rows > 1 ? 1 : 0, r2 = rows > 2 ? 2 : 0;
                        special.select(0, r0).select(0, 0).fill_(-std::numeric_limits<float>::infinity());
                        if (r1 != r0) special.select(0, r1).fill_(-std::numeric_limits<float>::infinity());  // a row of -inf
                        if (r2 != r0 && r2 != r1) {
                          special.select(0, r2).select(0, cols - 1).fill_(std::numeric_limits<float>::quiet_NaN());
                        }
                        return special;
                      }});
    stress.push_back({"+inf", [&] {
                        at::Tensor special = run.buildSliced(rows, cols, xf);
                        const int64_t r0 = rows - 1, r1 = rows > 1 ? rows - 2 : rows - 1;
                        special.select(0, r0).select(0, cols / 2).fill_(std::numeric_limits<float>::infinity());
                        if (r1 != r0) special.select(0, r1).fill_(std::numeric_limits<float>::infinity());  // a row of +inf
                        return special;
                      }});
  } else {
    stress.push_back({"NaN", [&] {
                        at::Tensor special = run.buildSliced(rows, cols, xf);
                        special.select(0, rows > 2 ? 2 : 0)
                            .select(0, cols - 1)
                            .fill_(std::numeric_limits<float>::quiet_NaN());
                        return special;
                      }});
  }
  for (const auto& [name, make] : stress) {
    const at::Tensor in = make();
    const RowOpArgs args = run.drawArgs(rows, cols);
    if (!run.check(in, args, why)) return run.fail(HarnessStage::Stability, name + ": " + why);
  }
  run.report.stages.push_back({HarnessStage::Stability, true, std::to_string(stress.size()) + " input sets"});
  return true;
}

// 4. determinism: 3 runs, bitwise identical; the pre-fill alternates
// (Note [Randomized pre-fill and guards]), so an element some run leaves
// unwritten differs between them.
bool runDeterminism(HarnessRun& run) {
  const RowOpSpec& spec = run.spec;
  const DType dtype = run.dtype;
  std::string& why = run.why;
  std::vector<at::Tensor>& first = run.first;
  run.stage = HarnessStage::Determinism;
  for (int i = 0; i < 3; ++i) {
    run.pause();
    std::vector<at::Tensor> outs = run.runner.run(run.x, run.xArgs, why);
    if (outs.empty()) return run.fail(HarnessStage::Determinism, why);
    if (i == 0) {
      first = outs;
      continue;
    }
    for (size_t k = 0; k < outs.size(); ++k) {
      const RowOpOutput& o = spec.outputs[k];
      const DType bits = o.perRow && !o.scalar && !o.perRowInInputDtype ? DType::Float32 : dtype;
      const bool same =
          harness::isExactInt64(o) ? at::equal(first[k], outs[k]) : harness::bitwiseEqual(first[k], outs[k], bits);
      if (!same) {
        return run.fail(HarnessStage::Determinism, "run " + std::to_string(i + 1) + " differs bitwise from run 1" +
                                                       (outs.size() > 1 ? " in '" + spec.outputs[k].name + "'" : "") +
                                                       " (runs pre-filled with NaN and with random bits: an element left "
                                                       "unwritten, or a nondeterministic result)");
      }
    }
  }
  run.report.stages.push_back({HarnessStage::Determinism, true, "3 runs bitwise identical, pre-filled differently"});
  return true;
}

// 5. edge cases: the guard refuses what the kernel cannot take.
// Note [Misaligned pointers the guard must refuse]
// A pointer off by one element when the guard needs more than one element
// (a vector), else off by one byte: an element-aligned pointer is what a
// vec = 1 point (or cross_entropy's output) legitimately takes, so offsetting
// those by one element tested nothing the guard promises (and failed every
// vec = 1 softmax point).
bool runEdgeCases(HarnessRun& run) {
  const HarnessCandidate& c = run.c;
  const int64_t rows = run.rows, cols = run.cols;
  const at::Tensor& x = run.x;
  run.stage = HarnessStage::EdgeCases;
  {
    at::Tensor flat = at::empty({rows * cols + 16}, x.options());
    char* base = static_cast<char*>(flat.mutable_data_ptr());
    const size_t elem = flat.element_size();
    auto offsetFor = [elem](size_t align) { return align > elem ? elem : size_t{1}; };
    const size_t outAlign = c.outputAlignment ? c.outputAlignment : c.alignment;
    if (c.alignment > 1 && c.acceptsPointers(base + offsetFor(c.alignment), base)) {
      return run.fail(HarnessStage::EdgeCases,
                      "guard accepts an input misaligned by " + std::to_string(offsetFor(c.alignment)) + " byte(s)");
    }
    if (outAlign > 1 && c.acceptsPointers(base, base + offsetFor(outAlign))) {
      return run.fail(HarnessStage::EdgeCases,
                      "guard accepts an output misaligned by " + std::to_string(offsetFor(outAlign)) + " byte(s)");
    }
  }
  if (!c.acceptsPointers(x.const_data_ptr(), run.first[0].mutable_data_ptr())) {
    return run.fail(HarnessStage::EdgeCases, "guard refuses aligned, distinct buffers");
  }
  run.report.stages.push_back({HarnessStage::EdgeCases, true, "misaligned refused, no aliasing, input untouched"});
  return true;
}

}  // namespace

HarnessReport runHarness(const RowOpSpec& opSpec, const HarnessCandidate& c, DType dtype, int64_t rows,
                         int64_t cols, int device, const HarnessOptions& options) {
  const RowOpSpec spec = generalForm(opSpec);
  HarnessReport report;
  report.seed = options.seed ? options.seed
                             : (static_cast<uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}();
  c10::cuda::CUDAGuard deviceGuard(static_cast<c10::DeviceIndex>(device));
  at::cuda::CUDAStream stream = at::cuda::getStreamFromPool(false, device);
  c10::cuda::CUDAStreamGuard streamGuard(stream);
  at::Generator gen = at::cuda::detail::getDefaultCUDAGenerator(device).clone();
  gen.set_current_seed(report.seed);

  // A yield point between two bounded units of GPU work (Note [Bounded units
  // of background GPU work]): all of the harness's GPU work is on `stream`,
  // so after the synchronisation none of it is in flight while the yield
  // point waits. Throws Interrupted when it says stop.
  auto pause = [&] {
    if (!options.yieldPoint) return;
    stream.synchronize();
    if (!options.yieldPoint()) throw Interrupted{};
  };
  harness::Runner runner{c, spec, dtype, device, options.watchdogSeconds, nullptr, stream, pause, gen,
                         std::mt19937_64(report.seed ^ 0x9e3779b97f4a7c15ull)};
  runner.prefillStart = static_cast<int>(runner.rng() % 2);
  const harness::Comparer comparer{spec, dtype, pause};
  const auto floatOpts = at::TensorOptions().dtype(at::kFloat).device(at::kCUDA, device);
  HarnessRun run{spec, c, dtype, rows, cols, device, gen, floatOpts, scalarTypeOf(dtype), pause, runner, comparer, report};
  if (!loadCandidate(run)) return report;
  try {
    if (!runSmoke(run) || !runSweep(run) || !runStability(run) || !runDeterminism(run) || !runEdgeCases(run)) {
      return report;
    }
  } catch (const Interrupted&) {
    // Abandoned at a yield point: no stage of this run counts.
    run.fail(run.stage, "interrupted");
    return report;
  }
  report.passed = true;
  return report;
}

}  // namespace hotkernel
