#include "hotkernel/optimizer/Harness.h"

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAEvent.h>
#include <ATen/cuda/CUDAGeneratorImpl.h>
#include <c10/cuda/CUDAGuard.h>

#include <chrono>
#include <cmath>
#include <limits>
#include <random>
#include <sstream>
#include <thread>

#include "hotkernel/runtime/Check.h"
#include "hotkernel/runtime/KernelArgs.h"

namespace hotkernel {
namespace {

using kernels::DType;

}  // namespace

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

namespace {

at::ScalarType bitsType(DType d) { return d == DType::Float32 ? at::kInt : at::kShort; }

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

bool bitwiseEqual(const at::Tensor& a, const at::Tensor& b, DType d) {
  return at::equal(a.view(bitsType(d)), b.view(bitsType(d)));
}

// Max |out - ref|; +inf when NaN positions differ. Compared in float32 (exact
// for 16-bit values; for float32 the difference is rounded once, far below any
// tolerance) to keep each check a few milliseconds of GPU time, so that the
// background optimizer yields quickly (Note [Optimize only on idle GPU time]).
double maxAbsError(const at::Tensor& out, const at::Tensor& ref) {
  const at::ScalarType t = out.scalar_type() == at::kDouble || ref.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
  at::Tensor o = out.to(t), r = ref.to(t);
  if (!at::equal(o.isnan(), r.isnan())) return std::numeric_limits<double>::infinity();
  at::Tensor diff = (at::nan_to_num(o, 0.0, 0.0, 0.0) - at::nan_to_num(r, 0.0, 0.0, 0.0)).abs();
  // Infinite values must match exactly.
  if (!at::equal(o.isinf(), r.isinf())) return std::numeric_limits<double>::infinity();
  return diff.numel() ? diff.max().item<double>() : 0.0;
}

// The spec in its general form (Note [Row ops with extra inputs and several outputs]).
RowOpSpec normalized(const RowOpSpec& spec) {
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

}  // namespace

// Note [A 0-dim view]
// `t.view({})` is not a 0-dim view: `{}` value-initializes the ScalarType
// overload's argument (kByte), so it reinterprets the bytes (a bf16 scalar
// became a [2] uint8 tensor and every cross_entropy mean/sum check threw).
// Spell the empty shape as an IntArrayRef.
at::Tensor outputView(const at::Tensor& flat, const RowOpOutput& o, int64_t rows, int64_t cols) {
  if (o.scalar) return flat.narrow(0, 0, 1).view(c10::IntArrayRef{});
  if (o.perRow) return flat.narrow(0, 0, rows);
  return flat.narrow(0, 0, rows * cols).view({rows, cols});
}

namespace {

// Elements of `out` farther from `ref` than the elementwise `bound` (finite
// positions; NaN and infinity positions are maxAbsError's business), compared
// in float32 like maxAbsError. Empty when none.
std::string outsideBound(const at::Tensor& out, const at::Tensor& ref, const at::Tensor& bound) {
  at::Tensor o = out.to(at::kFloat), r = ref.to(at::kFloat);
  at::Tensor excess = ((o - r).abs() - bound.to(o.device()).to(at::kFloat)).masked_fill_(~(o.isfinite() & r.isfinite()), 0.0);
  const int64_t bad = (excess > 0).sum().item<int64_t>();
  if (bad == 0) return {};
  const int64_t i = excess.reshape({-1}).argmax().item<int64_t>();
  at::Tensor b = bound.to(o.device()).to(at::kFloat).expand_as(o).reshape({-1});
  std::ostringstream os;
  os << bad << " element(s) outside the bound; worst at flat index " << i << ": got "
     << o.reshape({-1})[i].item<double>() << ", reference " << r.reshape({-1})[i].item<double>() << ", bound "
     << b[i].item<double>();
  return os.str();
}

bool isExactInt64(const RowOpOutput& o) { return o.perRow && !o.scalar && o.exactInt64; }

// What the harness writes after each output, and expects to find there after a launch.
double canaryValue(const RowOpOutput& o) { return isExactInt64(o) ? 1234.0 : 1234.5; }

}  // namespace

std::string exactOutputMismatch(const at::Tensor& out, const at::Tensor& ref) {
  const at::Tensor r = ref.to(at::kLong);
  if (at::equal(out, r)) return {};
  const at::Tensor differs = (out != r).reshape({-1});
  const int64_t bad = differs.sum().item<int64_t>();
  const int64_t i = differs.to(at::kInt).argmax().item<int64_t>();
  std::ostringstream os;
  os << bad << " element(s) differ; first at flat index " << i << ": got " << out.reshape({-1})[i].item<int64_t>()
     << ", reference " << r.reshape({-1})[i].item<int64_t>();
  return os.str();
}

namespace {

struct Runner {
  const HarnessCandidate& c;
  const RowOpSpec& spec;  // normalized
  DType dtype;
  int device;
  double watchdogSeconds;
  std::shared_ptr<CudaKernelLauncher> launcher;
  at::cuda::CUDAStream stream;

  // Runs the candidate on `in` (and `args`) into fresh NaN-filled outputs,
  // each with a canary tail. Returns the outputs, or none and `why` on failure.
  std::vector<at::Tensor> run(const at::Tensor& in, const RowOpArgs& args, std::string& why) {
    const int64_t rows = in.size(0), cols = in.size(1);
    constexpr int64_t kCanary = 1024;
    std::vector<at::Tensor> outs, canaries;
    for (const RowOpOutput& o : spec.outputs) {
      const int64_t n = o.scalar ? 1 : o.perRow ? rows : rows * cols;
      const bool int64 = o.perRow && !o.scalar && o.exactInt64;
      const bool float32 = o.perRow && !o.scalar && !o.perRowInInputDtype && !int64;
      at::Tensor buf = at::empty({n + kCanary}, int64     ? in.options().dtype(at::kLong)
                                                : float32 ? in.options().dtype(at::kFloat)
                                                          : in.options());
      if (int64) {
        buf.fill_(std::numeric_limits<int64_t>::min());  // Note [Exact integer outputs]
      } else {
        buf.fill_(std::numeric_limits<float>::quiet_NaN());
      }
      at::Tensor canary = buf.narrow(0, n, kCanary);
      canary.fill_(canaryValue(o));
      canaries.push_back(canary);
      outs.push_back(outputView(buf, o, rows, cols));
    }
    // Scratch (Note [Row ops with per-row inputs, scalar outputs and a workspace]).
    const int64_t workFloats = spec.workspaceFloats ? spec.workspaceFloats(rows, cols) : 0;
    at::Tensor work, workTail;
    std::vector<at::Tensor> launchOuts = outs;
    if (workFloats > 0) {
      work = at::full({workFloats}, std::numeric_limits<float>::quiet_NaN(), in.options().dtype(at::kFloat));
      const int64_t tail = std::min(spec.workspaceZeroTail, workFloats);
      workTail = work.narrow(0, workFloats - tail, tail);
      workTail.zero_();
      launchOuts.push_back(work);
    }
    at::Tensor inCopy = in.clone();
    std::vector<at::Tensor> columnCopies, rowInputCopies;
    for (const at::Tensor& t : args.columns) columnCopies.push_back(t.defined() ? t.clone() : at::Tensor());
    for (const at::Tensor& t : args.rowInputs) rowInputCopies.push_back(t.defined() ? t.clone() : at::Tensor());
    const KernelArgs kernelArgs = spec.kernelArgs(in, args, launchOuts);
    if (!launcher->launchWith(kernelArgs, stream.stream(), c.geometry(rows, cols))) {
      why = "launch failed";
      return {};
    }
    at::cuda::CUDAEvent done(cudaEventDefault);
    done.record(stream);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(watchdogSeconds);
    while (!done.query()) {
      if (std::chrono::steady_clock::now() > deadline) {
        std::ostringstream os;
        os << "watchdog: not finished after " << watchdogSeconds << " s";
        why = os.str();
        return {};
      }
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    const cudaError_t err = cudaStreamSynchronize(stream.stream());
    if (err != cudaSuccess) {
      why = std::string("CUDA error: ") + cudaGetErrorString(err);
      (void)cudaGetLastError();
      return {};
    }
    for (size_t i = 0; i < canaries.size(); ++i) {
      if (!at::all(canaries[i] == canaryValue(spec.outputs[i])).item<bool>()) {
        why = "wrote past the end of the output" + (spec.outputs.size() > 1 ? " '" + spec.outputs[i].name + "'" : "");
        return {};
      }
    }
    if (!bitwiseEqual(in, inCopy, dtype)) {
      why = "modified its input (aliasing or in-place write)";
      return {};
    }
    for (size_t i = 0; i < args.columns.size(); ++i) {
      if (args.columns[i].defined() && !bitwiseEqual(args.columns[i], columnCopies[i], dtype)) {
        why = "modified its per-column input " + std::to_string(i);
        return {};
      }
    }
    for (size_t i = 0; i < args.rowInputs.size(); ++i) {
      if (args.rowInputs[i].defined() && !at::equal(args.rowInputs[i], rowInputCopies[i])) {
        why = "modified its per-row input " + std::to_string(i);
        return {};
      }
    }
    if (workTail.defined() && workTail.numel() > 0 && !at::all(workTail == 0).item<bool>()) {
      why = "left the workspace's counter non-zero (the next launch would misread it)";
      return {};
    }
    for (at::Tensor& o : outs) o = o.clone();
    return outs;
  }
};

}  // namespace

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

HarnessReport runHarness(const RowOpSpec& opSpec, const HarnessCandidate& c, DType dtype, int64_t rows,
                         int64_t cols, int device, const HarnessOptions& options) {
  const RowOpSpec spec = normalized(opSpec);
  HarnessReport report;
  report.seed = options.seed ? options.seed
                             : (static_cast<uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}();
  c10::cuda::CUDAGuard deviceGuard(static_cast<c10::DeviceIndex>(device));
  at::cuda::CUDAStream stream = at::cuda::getStreamFromPool(false, device);
  c10::cuda::CUDAStreamGuard streamGuard(stream);
  at::Generator gen = at::cuda::detail::getDefaultCUDAGenerator(device).clone();
  gen.set_current_seed(report.seed);
  const auto floatOpts = at::TensorOptions().dtype(at::kFloat).device(at::kCUDA, device);
  const at::ScalarType st = scalarTypeOf(dtype);
  // Uniform in [-1, 5): asymmetric on purpose, so that the negated set below
  // reaches values (down to -5) the smoke input never holds.
  auto randomInput = [&](int64_t r, int64_t n) {
    return at::rand({r, n}, gen, floatOpts).mul_(6.0).sub_(1.0).to(st);
  };

  Runner runner{c, spec, dtype, device, options.watchdogSeconds, nullptr, stream};
  auto drawArgs = [&](int64_t r, int64_t n) { return spec.makeArgs(r, n, dtype, gen); };
  auto fail = [&](HarnessStage s, const std::string& why) {
    report.stages.push_back(StageResult{s, false, why});
    report.passed = false;
    return report;
  };
  try {
    runner.launcher = CudaKernelLauncher::load(device, c.cubin, c.kernelName, c.geometry(rows, cols), c.alignment,
                                               c.description);
  } catch (const std::exception& e) {
    return fail(HarnessStage::Smoke, std::string("cannot load: ") + e.what());
  }
  // Checks one input (and its extra arguments) against the reference; false +
  // why on any mismatch. Every output is compared under its own bound.
  auto check = [&](const at::Tensor& in, const RowOpArgs& args, std::string& why) -> bool {
    if (options.yieldPoint && !options.yieldPoint()) {
      why = "interrupted";
      return false;
    }
    std::vector<at::Tensor> outs = runner.run(in, args, why);
    if (outs.empty()) return false;
    std::vector<at::Tensor> refs = spec.references(in, args);
    HOTKERNEL_CHECK(refs.size() == outs.size(), "the reference of ", spec.op, " gave ", refs.size(),
                    " outputs, the spec names ", outs.size());
    for (size_t i = 0; i < outs.size(); ++i) {
      const std::string name = spec.outputs.size() > 1 ? spec.outputs[i].name + ": " : "";
      at::Tensor ref = refs[i].reshape(outs[i].sizes());
      if (isExactInt64(spec.outputs[i])) {
        if (const std::string mismatch = exactOutputMismatch(outs[i], ref); !mismatch.empty()) {
          std::ostringstream os;
          os << name << mismatch << " at [" << in.size(0) << ", " << in.size(1) << "]";
          why = os.str();
          return false;
        }
        continue;
      }
      const double err = maxAbsError(outs[i], ref);
      if (!std::isfinite(err)) {
        std::ostringstream os;
        os << name << "NaN or infinity where the reference has none (or the reverse) at [" << in.size(0) << ", "
           << in.size(1) << "]";
        why = os.str();
        return false;
      }
      const RowOpOutput& output = spec.outputs[i];
      const at::Tensor bound =
          output.boundWithArgs ? output.boundWithArgs(in, args, refs, dtype) : output.bound(in, refs, dtype);
      if (bound.numel() == 1) {
        const double tol = bound.item<double>();
        if (!(err <= tol)) {
          std::ostringstream os;
          os << name << "max abs error " << err << " > tolerance " << tol << " at [" << in.size(0) << ", "
             << in.size(1) << "]";
          why = os.str();
          return false;
        }
      } else if (const std::string outside = outsideBound(outs[i], ref, bound); !outside.empty()) {
        std::ostringstream os;
        os << name << "max abs error " << err << ": " << outside << " at [" << in.size(0) << ", " << in.size(1)
           << "]";
        why = os.str();
        return false;
      }
      if (i == 0) report.maxAbsError = std::max(report.maxAbsError, err);
    }
    if (spec.references64 && !isExactInt64(spec.outputs[0])) {
      // Against float64 (on up to 256 rows: "where cheap"), the candidate's
      // output 0 may not be worse than ATen's by more than its bound.
      const int64_t n = std::min<int64_t>(in.size(0), 256);
      at::Tensor ref64 = spec.references64(in.narrow(0, 0, n).to(at::kDouble), args);
      at::Tensor ref0 = refs[0].reshape(outs[0].sizes()).narrow(0, 0, n);
      const double mine = maxAbsError(outs[0].narrow(0, 0, n), ref64), aten = maxAbsError(ref0, ref64);
      // The largest finite bound: rows the reference makes NaN or infinite
      // (the -inf / NaN stress set) have no finite bound and must not turn
      // the tolerance into NaN, which would fail every candidate.
      const RowOpOutput& out0 = spec.outputs[0];
      const at::Tensor bound0 =
          out0.boundWithArgs ? out0.boundWithArgs(in, args, refs, dtype) : out0.bound(in, refs, dtype);
      const double tol = bound0.to(at::kDouble).nan_to_num(0.0, 0.0, 0.0).max().item<double>();
      if (std::isfinite(aten) && !(mine <= aten + tol)) {
        std::ostringstream os;
        os << "float64 error " << mine << " exceeds ATen's " << aten << " + tolerance";
        why = os.str();
        return false;
      }
    }
    return true;
  };

  std::string why;
  // 1. smoke
  at::Tensor x = randomInput(rows, cols);
  const RowOpArgs xArgs = drawArgs(rows, cols);
  if (!check(x, xArgs, why)) return fail(HarnessStage::Smoke, why);
  report.stages.push_back({HarnessStage::Smoke, true, "recorded variant"});

  // 2. variant sweep: neighbours the guard accepts.
  std::vector<std::pair<int64_t, int64_t>> shapes = {{1, cols}, {rows + 1, cols}, {std::min<int64_t>(rows, 7), cols}};
  if (rows > 1) shapes.push_back({rows - 1, cols});
  for (int64_t dc : {-64, -8, -1, 1, 8}) {
    if (cols + dc >= 1) shapes.push_back({std::min<int64_t>(rows, 33), cols + dc});
  }
  shapes.push_back({std::min<int64_t>(rows, 5), 1});
  int swept = 0;
  for (auto [r, n] : shapes) {
    if (!c.acceptsShape(r, n)) continue;
    if (!check(randomInput(r, n), drawArgs(r, n), why)) return fail(HarnessStage::Sweep, why);
    ++swept;
  }
  report.stages.push_back({HarnessStage::Sweep, true, std::to_string(swept) + " neighbour shapes"});

  // 3. numerical stability
  // Note [Near-max inputs of sums]
  // A quarter of the dtype's max tests that a row op's arithmetic survives
  // large values. A sum of such values overflows float32 or not depending on
  // the order of the additions (partial sums of either sign may pass the
  // max, or meet as inf - inf = NaN), so ATen's result is no reference there;
  // sums ask for max / (4 cols) instead, where no order overflows.
  const double big = spec.nearMaxMagnitude ? spec.nearMaxMagnitude(dtype, cols) : dtypeMax(dtype) / 4.0;
  at::Tensor xf = x.to(at::kFloat);
  std::vector<std::pair<std::string, at::Tensor>> stress = {
      {"negated", (-xf).to(st)},
      {"x3", (xf * 3).to(st)},
      {"x0.01", (xf * 0.01).to(st)},
      {"near max", (xf.sign() * big * at::rand_like(xf)).to(st)},
      {"zeros", at::zeros_like(x)},
      {"shifted", (xf + (dtype == DType::Float16 ? 1e4 : 1e5)).to(st)},
  };
  if (spec.infinitiesDefined) {
    at::Tensor special = xf.clone();
    const int64_t r0 = 0, r1 = rows > 1 ? 1 : 0, r2 = rows > 2 ? 2 : 0;
    special.select(0, r0).select(0, 0).fill_(-std::numeric_limits<float>::infinity());
    if (r1 != r0) special.select(0, r1).fill_(-std::numeric_limits<float>::infinity());  // a row of -inf
    if (r2 != r0 && r2 != r1) special.select(0, r2).select(0, cols - 1).fill_(std::numeric_limits<float>::quiet_NaN());
    stress.push_back({"-inf and NaN", special.to(st)});
  } else {
    at::Tensor special = xf.clone();
    special.select(0, rows > 2 ? 2 : 0).select(0, cols - 1).fill_(std::numeric_limits<float>::quiet_NaN());
    stress.push_back({"NaN", special.to(st)});
  }
  for (const auto& [name, in] : stress) {
    if (!check(in, drawArgs(rows, cols), why)) return fail(HarnessStage::Stability, name + ": " + why);
  }
  report.stages.push_back({HarnessStage::Stability, true, std::to_string(stress.size()) + " input sets"});

  // 4. determinism: 3 runs, fresh NaN-filled outputs, bitwise identical.
  std::vector<at::Tensor> first;
  for (int i = 0; i < 3; ++i) {
    std::vector<at::Tensor> outs = runner.run(x, xArgs, why);
    if (outs.empty()) return fail(HarnessStage::Determinism, why);
    if (i == 0) {
      first = outs;
      continue;
    }
    for (size_t k = 0; k < outs.size(); ++k) {
      const RowOpOutput& o = spec.outputs[k];
      const DType bits = o.perRow && !o.scalar && !o.perRowInInputDtype ? DType::Float32 : dtype;
      const bool same = isExactInt64(o) ? at::equal(first[k], outs[k]) : bitwiseEqual(first[k], outs[k], bits);
      if (!same) {
        return fail(HarnessStage::Determinism, "run " + std::to_string(i + 1) + " differs bitwise from run 1" +
                                                   (outs.size() > 1 ? " in '" + spec.outputs[k].name + "'" : ""));
      }
    }
  }
  report.stages.push_back({HarnessStage::Determinism, true, "3 runs bitwise identical"});

  // 5. edge cases: the guard refuses what the kernel cannot take.
  // Note [Misaligned pointers the guard must refuse]
  // A pointer off by one element when the guard needs more than one element
  // (a vector), else off by one byte: an element-aligned pointer is what a
  // vec = 1 point (or cross_entropy's output) legitimately takes, so offsetting
  // those by one element tested nothing the guard promises (and failed every
  // vec = 1 softmax point).
  {
    at::Tensor flat = at::empty({rows * cols + 16}, x.options());
    char* base = static_cast<char*>(flat.mutable_data_ptr());
    const size_t elem = flat.element_size();
    auto offsetFor = [elem](size_t align) { return align > elem ? elem : size_t{1}; };
    const size_t outAlign = c.outputAlignment ? c.outputAlignment : c.alignment;
    if (c.alignment > 1 && c.acceptsPointers(base + offsetFor(c.alignment), base)) {
      return fail(HarnessStage::EdgeCases,
                  "guard accepts an input misaligned by " + std::to_string(offsetFor(c.alignment)) + " byte(s)");
    }
    if (outAlign > 1 && c.acceptsPointers(base, base + offsetFor(outAlign))) {
      return fail(HarnessStage::EdgeCases,
                  "guard accepts an output misaligned by " + std::to_string(offsetFor(outAlign)) + " byte(s)");
    }
  }
  if (!c.acceptsPointers(x.const_data_ptr(), first[0].mutable_data_ptr())) {
    return fail(HarnessStage::EdgeCases, "guard refuses aligned, distinct buffers");
  }
  report.stages.push_back({HarnessStage::EdgeCases, true, "misaligned refused, no aliasing, input untouched"});
  report.passed = true;
  return report;
}

}  // namespace hotkernel
