#include "hotkernel/optimizer/ReduceDimTuner.h"

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/ops/amax_cuda_dispatch.h>
#include <ATen/ops/amin_cuda_dispatch.h>
#include <ATen/ops/argmax_cuda_dispatch.h>
#include <ATen/ops/argmin_cuda_dispatch.h>
#include <ATen/ops/max_cuda_dispatch.h>
#include <ATen/ops/mean_cuda_dispatch.h>
#include <ATen/ops/min_cuda_dispatch.h>
#include <ATen/ops/sum_cuda_dispatch.h>
#include <c10/cuda/CUDAGraphsC10Utils.h>
#include <c10/cuda/CUDAGuard.h>

#include <algorithm>
#include <vector>

#include "hotkernel/kernels/FamilyDescriptor.h"
#include "hotkernel/optimizer/FamilyTuner.h"
#include "hotkernel/optimizer/ReduceTuner.h"
#include "hotkernel/optimizer/TuningRows.h"
#include "hotkernel/optimizer/TunerScope.h"
#include "hotkernel/runtime/Check.h"
#include "hotkernel/runtime/CudaDriver.h"
#include "hotkernel/runtime/Nvrtc.h"

namespace hotkernel {
namespace {

using kernels::DType;
using kernels::ReduceDimFamily;
using kernels::ReduceDimParams;
using kernels::ReduceDimVariant;
using kernels::ReduceOp;
using kernels::ReduceTolerance;

const std::vector<int64_t>& middleDim() {
  static const std::vector<int64_t> dims = {1};
  return dims;
}

// `x` [rows, reduced * inner] as [rows, reduced, inner] (a view of a contiguous input).
at::Tensor threeExtents(const at::Tensor& x, int64_t inner) {
  HOTKERNEL_CHECK(inner >= 1 && x.dim() == 2 && x.size(1) % inner == 0, "a middle-dim reduction input must be ",
                  "[rows, reduced * inner], got ", x.sizes(), " for inner ", inner);
  return x.view({x.size(0), x.size(1) / inner, inner});
}

// Note [Middle-dim reduction harness]
// The harness is row-based; a middle-dim variant [outer, reduced, inner] is
// a row op on [outer, reduced * inner] rows whose output holds `inner`
// results a row (RowOpOutput::perRowElements), [outer, inner]: every outer
// row is independent, so the harness's row slices, its row subset and its
// stress rows (an outer row of -inf, of +inf, an all-equal row: every result
// of that row ties, the first index wins) keep their meaning. Its sweep
// changes the column count: the candidate accepts only multiples of inner
// (other reduced extents of the same inner layout). Reference: ATen's CUDA
// kernel of the op over dim 1 of the [outer, reduced, inner] view, called
// below the dispatcher (Note [Reduction harness] in ReduceTuner.cpp says
// why). Bounds per result (ReduceDimFamily::tolerance: the last-dim family's
// with the reduced extent as its row length): the extrema and the indices
// exact (max.dim's and min.dim's values bit for bit); sum and mean within ATen's own distance from the float64 result
// over the same reduced elements, plus the family's summation bound on their
// sum |x| (mean: mean |x|), plus one step of the output dtype. Sums take
// near-max inputs at max / (4 reduced), where no order of the additions
// overflows (Note [Near-max inputs of sums] in Harness.cpp).
at::Tensor middleSumBound(const at::Tensor& in, const at::Tensor& ref, ReduceOp op, DType d, int64_t inner) {
  const at::Tensor v = threeExtents(in, inner);
  const int64_t reduced = v.size(1);
  const ReduceTolerance t = ReduceDimFamily::tolerance(op, d, reduced);
  at::Tensor exact = at::cuda::sum(v, at::IntArrayRef(middleDim()), false, at::kDouble);
  at::Tensor absSum = at::cuda::sum(v.abs(), at::IntArrayRef(middleDim()), false, at::kDouble);
  if (op == ReduceOp::Mean) {
    exact.div_(static_cast<double>(reduced));
    absSum.div_(static_cast<double>(reduced));
  }
  const at::Tensor r = ref.to(at::kDouble).reshape({in.size(0), inner});
  // Results ATen makes NaN or infinite must be met exactly: their bound does not matter.
  const at::Tensor atenError = (r - exact).abs_();
  return atenError.add_(absSum.mul_(t.sumRel)).add_(r.abs().mul_(t.outRel)).add_(t.outAbs).to(at::kFloat);
}

// The middle-dim axes on the search's (middleDimFillRows in FamilyTuner.h); the rows a thread loads at once
// (Note [Rows in flight] in reduce_dim.cu) on its items axis.
FamilyPoint toPoint(const ReduceDimParams& p) { return FamilyPoint{p.threads(), p.ty, p.vec, p.unroll, 1}; }
ReduceDimParams toParams(const FamilyPoint& p) {
  return ReduceDimParams{p.threads / std::max(p.rowsPerCta, 1), p.rowsPerCta, p.vec, p.items};
}

}  // namespace

std::vector<at::Tensor> atenReduceMiddleDimOutputs(const at::Tensor& x, ReduceOp op, int64_t inner) {
  if (op == ReduceOp::Max || op == ReduceOp::Min) {
    const at::Tensor v = threeExtents(x, inner);
    auto [values, indices] = op == ReduceOp::Max ? at::cuda::max(v, 1, false) : at::cuda::min(v, 1, false);
    return {values, indices};
  }
  return {atenReduceMiddleDim(x, op, inner)};
}

at::Tensor atenReduceMiddleDim(const at::Tensor& x, ReduceOp op, int64_t inner) {
  const at::Tensor v = threeExtents(x, inner);
  switch (op) {
    case ReduceOp::Sum:
      return at::cuda::sum(v, at::IntArrayRef(middleDim()), false, std::nullopt);
    case ReduceOp::Mean:
      return at::cuda::mean(v, at::IntArrayRef(middleDim()), false, std::nullopt);
    case ReduceOp::Amax:
      return at::cuda::amax(v, at::IntArrayRef(middleDim()), false);
    case ReduceOp::Argmax:
      return at::cuda::argmax(v, int64_t{1}, false);
    case ReduceOp::Amin:
      return at::cuda::amin(v, at::IntArrayRef(middleDim()), false);
    case ReduceOp::Argmin:
      return at::cuda::argmin(v, int64_t{1}, false);
    case ReduceOp::Max:
      return std::get<0>(at::cuda::max(v, 1, false));
    case ReduceOp::Min:
      return std::get<0>(at::cuda::min(v, 1, false));
  }
  HOTKERNEL_THROW("unknown reduction op ", static_cast<int>(op));
}

RowOpSpec reduceDimSpec(ReduceOp op, int64_t inner) {
  HOTKERNEL_CHECK(inner >= 2, "a middle-dim reduction keeps at least 2 inner positions, got ", inner);
  RowOpSpec spec;
  spec.op = kernels::reduceAtenOpName(op);
  spec.infinitiesDefined = true;
  const bool sum = op == ReduceOp::Sum || op == ReduceOp::Mean;
  spec.outputs = reduceOutputs(op, inner, [op, inner](const at::Tensor& in, const at::Tensor& ref, DType d) {
    return middleSumBound(in, ref, op, d, inner);
  });
  spec.makeArgs = [](int64_t, int64_t, DType, at::Generator&) { return RowOpArgs{}; };
  spec.references = [op, inner](const at::Tensor& in, const RowOpArgs&) {
    return atenReduceMiddleDimOutputs(in, op, inner);
  };
  if (sum) {
    spec.references64 = [op, inner](const at::Tensor& in64, const RowOpArgs&) {
      return atenReduceMiddleDim(in64, op, inner);
    };
    spec.nearMaxMagnitude = [inner](DType d, int64_t cols) {
      const double max = d == DType::Float16 ? 65504.0 : 3.3895313892515355e38;
      return max / (4.0 * static_cast<double>(std::max<int64_t>(cols / inner, 1)));
    };
  }
  spec.kernelArgs = [inner](const at::Tensor& in, const RowOpArgs&, const std::vector<at::Tensor>& outs) {
    KernelArgs args;
    args.pointer(in.const_data_ptr()).pointer(outs.at(0).mutable_data_ptr());
    if (outs.size() > 1) args.pointer(outs.at(1).mutable_data_ptr());  // a pair's indices
    return args.int64(in.size(0)).int64(in.size(1) / inner).int64(inner);
  };
  return spec;
}

HarnessCandidate reduceDimCandidate(const ReduceDimVariant& v, const ReduceDimParams& p, const std::string& cubin) {
  HarnessCandidate c;
  c.cubin = cubin;
  c.kernelName = ReduceDimFamily::kKernelName;
  c.description = ReduceDimFamily::displayName(v.op) + "[" + p.describe() + "]";
  // Note [A family's harness candidate] (FamilyCandidate.h), with a shape read as [rows, cols / inner, inner].
  const auto reshaped = [v](int64_t rows, int64_t cols) {
    ReduceDimVariant w = v;
    w.outer = rows;
    w.reduced = cols / v.inner;
    return w;
  };
  c.geometry = [reshaped, p](int64_t rows, int64_t cols) {
    const kernels::LaunchGeometry g = ReduceDimFamily::launchGeometry(reshaped(rows, cols), p);
    return LaunchGeometry{g.gridX, g.blockX, g.sharedBytes};
  };
  c.acceptsShape = [reshaped, p, inner = v.inner](int64_t rows, int64_t cols) {
    if (cols < inner || cols % inner != 0) return false;
    const ReduceDimVariant w = reshaped(rows, cols);
    return ReduceDimFamily::guardVariant(w) && ReduceDimFamily::guardParams(w, p);
  };
  c.acceptsPointers = [v, p](const void* in, const void* out) { return ReduceDimFamily::guardPointers(in, out, v, p); };
  c.alignment = ReduceDimFamily::requiredAlignment(v.dtype, p);
  c.outputAlignment = ReduceDimFamily::outputAlignment(v.op, v.dtype, c.alignment);
  return c;
}

FamilyTuneSpec reduceDimTuneSpec(const ReduceDimVariant& v, int device, const TunerOptions& options) {
  HOTKERNEL_CHECK(ReduceDimFamily::guardVariant(v), "the middle-dim reduction family cannot serve this variant");
  FamilyTuneSpec spec;
  spec.family = kernels::reduceFamilyName(v.op);
  spec.kernelName = ReduceDimFamily::kKernelName;
  spec.source = ReduceDimFamily::source();
  spec.program = "reduce_dim.cu";
  spec.dtype = v.dtype;
  spec.rows = v.outer;
  spec.cols = v.reduced * v.inner;  // no overflow: guardVariant
  for (const ReduceDimParams& p : ReduceDimFamily::allParameterPoints(v.dtype, v.op)) {
    if (ReduceDimFamily::guardParams(v, p)) spec.validPoints.push_back(toPoint(p));
  }
  for (const ReduceDimParams& p : ReduceDimFamily::parameterSpace(v)) spec.seeds.push_back(toPoint(p));
  // The harness's input, its stress sets and float64 copies (about 12
  // input-sized buffers at 16 bits) and the L2 flush: a variant whose outer
  // rows do not fit the cap is tuned on a subset of them, never fewer than
  // fill the GPU (Note [Tuning on a row subset]); one with no such subset runs
  // its harness on fewer rows than its timed calls, whose two inputs and the
  // float64 copy of their checks take about 7 such buffers a row (Note [A
  // harness on fewer rows]).
  chooseTuningRows(spec, device, /*rowBuffers=*/12,
                   middleDimFillRows(v.inner, spec.validPoints,
                                     at::cuda::getDeviceProperties(device)->multiProcessorCount),
                   options, /*timedBuffers=*/7);
  spec.compileOptions = [v](const FamilyPoint& p) {
    return ReduceDimFamily::compileOptions(v.dtype, toParams(p), v.op);
  };
  spec.paramsJson = [](const FamilyPoint& p) { return toParams(p).toJson(); };
  spec.candidate = [v](const FamilyPoint& p, const std::string& cubin) {
    return reduceDimCandidate(v, toParams(p), cubin);
  };
  spec.harnessSpec = reduceDimSpec(v.op, v.inner);
  ReduceDimVariant timed = v;
  timed.outer = spec.rows;
  const VariantKey key = kernels::reduceDimKeyOf(timed, device);  // the timed plan's
  spec.makePlan = [key, device, op = v.op](const FamilyPoint& p, const std::string& cubin) {
    return kernels::reduceDescriptor(op).makePlan(key, toParams(p).toJson(), cubin, device);
  };
  // The timed calls: ATen's kernel, and a plan's launcher, each allocating its
  // [rows, inner] output, rotating over two inputs (Note [Timed outputs are
  // checked] in FamilyTuner.cpp), drawn in row slices with a yield point
  // before each (Note [Bounded units of background GPU work]).
  const auto opts = at::TensorOptions().dtype(at::kFloat).device(at::kCUDA, device);
  spec.timedInputs = drawTimedInputs(
      spec.harnessSpec, v.dtype, spec.rows, spec.cols, device,
      [&](int64_t k) { return at::randn({k, spec.cols}, opts).mul_(2.0); }, options.yieldPoint);
  spec.atenCall = atenReferenceOfSpec(spec.harnessSpec).call;
  return spec;
}

TuneOutcome tuneReduceDim(const ReduceDimVariant& v, int device, const TunerOptions& options) {
  HOTKERNEL_CHECK(ReduceDimFamily::guardVariant(v), "the middle-dim reduction family cannot serve this variant");
  HOTKERNEL_CHECK(nvrtcAvailable(), "NVRTC is unavailable");
  TunerScope scope(device);  // Note [A tuner's scope]
  const DeviceInfo info = queryDevice(device);
  const FamilyTuneSpec spec = reduceDimTuneSpec(v, device, options);
  double bestSpeedup = 0;
  TuneOutcome outcome = tuneFamily(spec, device, info.nvrtcArch(), options, bestSpeedup);
  outcome.metrics.op = kernels::reduceOpName(v.op);
  return outcome;
}

}  // namespace hotkernel
