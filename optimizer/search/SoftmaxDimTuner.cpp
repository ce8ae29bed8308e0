#include "hotkernel/optimizer/SoftmaxDimTuner.h"

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/ops/_log_softmax_cuda_dispatch.h>
#include <ATen/ops/_softmax_cuda_dispatch.h>
#include <c10/cuda/CUDAGraphsC10Utils.h>
#include <c10/cuda/CUDAGuard.h>

#include <algorithm>
#include <sstream>
#include <vector>

#include "hotkernel/kernels/FamilyDescriptor.h"
#include "hotkernel/optimizer/FamilyTuner.h"
#include "hotkernel/optimizer/TuningRows.h"
#include "hotkernel/optimizer/TunerScope.h"
#include "hotkernel/runtime/Check.h"
#include "hotkernel/runtime/CudaDriver.h"
#include "hotkernel/runtime/Nvrtc.h"

namespace hotkernel {
namespace {

using kernels::DType;
using kernels::SoftmaxDimFamily;
using kernels::SoftmaxDimParams;
using kernels::SoftmaxDimVariant;
using kernels::SoftmaxFamily;
using kernels::SoftmaxOp;

// `x` [rows, dim * inner] as [rows, dim, inner] (a view of a contiguous input).
at::Tensor threeExtents(const at::Tensor& x, int64_t inner) {
  HOTKERNEL_CHECK(inner >= 1 && x.dim() == 2 && x.size(1) % inner == 0, "a middle-dim softmax input must be ",
                  "[rows, dim * inner], got ", x.sizes(), " for inner ", inner);
  return x.view({x.size(0), x.size(1) / inner, inner});
}

// "" or the first outer row of `bad` ([rows, inner] bool) with the position's value and bound.
std::string firstBadPosition(const at::Tensor& bad, const at::Tensor& value, const at::Tensor& bound,
                             const char* what) {
  const int64_t count = bad.sum().item<int64_t>();
  if (count == 0) return {};
  const int64_t flat = bad.flatten().to(at::kInt).argmax().item<int64_t>();
  const int64_t r = flat / bad.size(1), i = flat % bad.size(1);
  std::ostringstream os;
  os.precision(9);
  os << count << " position(s) where " << what << "; first row " << r << ", inner position " << i << ": "
     << value[r][i].item<double>() << ", bound " << bound[r][i].item<double>();
  return os.str();
}

// The middle-dim axes on the search's (middleDimFillRows in FamilyTuner.h).
FamilyPoint toPoint(const SoftmaxDimParams& p) { return FamilyPoint{p.threads(), p.ty, p.vec, p.unroll, 1}; }
SoftmaxDimParams toParams(const FamilyPoint& p) {
  return SoftmaxDimParams{p.threads / std::max(p.rowsPerCta, 1), p.rowsPerCta, p.vec, p.items};
}

}  // namespace

at::Tensor atenSoftmaxMiddleDim(const at::Tensor& x, SoftmaxOp op, int64_t inner) {
  const at::Tensor v = threeExtents(x, inner);
  const at::Tensor out =
      op == SoftmaxOp::LogSoftmax ? at::cuda::_log_softmax(v, 1, false) : at::cuda::_softmax(v, 1, false);
  return out.view(x.sizes());
}

// Note [Middle-dim softmax harness]
// The harness is row-based; a middle-dim variant [outer, dim, inner] is a row
// op on [outer, dim * inner] rows whose output has the input's shape: every
// outer row is independent, so the harness's row slices, its row subset and
// its stress rows (an outer row of -inf, of +inf, of NaN, all-equal: every
// softmax of that row sees them) keep their meaning. Its sweep changes the
// column count: the candidate accepts only multiples of inner (other dim
// extents of the same inner layout). Reference: ATen's CUDA kernel over dim 1
// of the [outer, dim, inner] view, called below the dispatcher. Bounds: the
// last-dim family's elementwise ones with the dim's extent as the row length
// (Notes [Softmax bound], [Log-softmax tolerance]); the invariants (Note
// [Family invariants]) per (outer, inner) position: softmax sums to 1 over
// the dim (Note [Softmax row sums]), log_softmax's logsumexp over it is 0
// (Note [Log-softmax logsumexp]).
//
// Note [Middle-dim softmax bound]
// ATen's middle-dim kernel sums a position's terms in long float32 chains,
// a thread's share of the dim each, so on a long dim its sum, and every
// output of the position with it, can be further from float64 than the
// family's bound, which assumes the tree-shaped sums of the last-dim kernels
// (docs/design/softmax.md, "Long dims in float32"). The check against ATen
// therefore allows ATen's own distance from the float64 result besides the
// bound, as the norms' rstd does (Note [Norm harness bounds]): a candidate
// passes when it is within the bound of ATen or no further from ATen than
// ATen is from float64 plus the bound. The float64 check holds the candidate
// itself to the family's bound (the kernel's compensated sums: Note
// [Compensated middle-dim sums] in softmax_dim.cu).
RowOpSpec softmaxDimSpec(SoftmaxOp op, int64_t inner) {
  HOTKERNEL_CHECK(inner >= 2, "a middle-dim softmax keeps at least 2 inner positions, got ", inner);
  RowOpSpec spec;
  const bool log = op == SoftmaxOp::LogSoftmax;
  spec.op = kernels::softmaxOpName(op);
  RowOpOutput out;
  out.name = "out";
  out.bound = [log, inner](const at::Tensor& in, const std::vector<at::Tensor>& refs, DType d) {
    const SoftmaxFamily::Bound b =
        log ? SoftmaxFamily::logSoftmaxTolerance(d) : SoftmaxFamily::softmaxBound(d, in.size(1) / inner);
    return refs[0].to(at::kFloat).abs().nan_to_num_(0.0, 0.0, 0.0).mul_(b.relative).add_(b.absolute);
  };
  // Note [Middle-dim softmax bound]: the check against ATen allows ATen's own distance from float64 besides.
  out.boundWithArgs = [familyBound = out.bound, inner, op](const at::Tensor& in, const RowOpArgs&,
                                                           const std::vector<at::Tensor>& refs, DType d) {
    const at::Tensor own = (refs[0].to(at::kDouble) - atenSoftmaxMiddleDim(in.to(at::kDouble), op, inner))
                               .abs_()
                               .nan_to_num_(0.0, 0.0, 0.0);
    return familyBound(in, refs, d).add_(own.to(at::kFloat));
  };
  out.rowLocalBound = true;
  spec.outputs = {out};
  spec.makeArgs = [](int64_t, int64_t, DType, at::Generator&) { return RowOpArgs{}; };
  spec.references = [op, inner](const at::Tensor& in, const RowOpArgs&) {
    return std::vector<at::Tensor>{atenSoftmaxMiddleDim(in, op, inner)};
  };
  spec.references64 = [op, inner](const at::Tensor& in64, const RowOpArgs&) {
    return atenSoftmaxMiddleDim(in64, op, inner);
  };
  spec.kernelArgs = [inner](const at::Tensor& in, const RowOpArgs&, const std::vector<at::Tensor>& outs) {
    return KernelArgs()
        .pointer(in.const_data_ptr())
        .pointer(outs.at(0).mutable_data_ptr())
        .int64(in.size(0))
        .int64(in.size(1) / inner)
        .int64(inner);
  };
  if (log) {
    spec.invariant = [inner](const at::Tensor&, const at::Tensor& out64, const at::Tensor& ref64, DType d) {
      const at::Tensor o = threeExtents(out64, inner), r = threeExtents(ref64, inner);
      const SoftmaxFamily::Bound b = SoftmaxFamily::logSumExpBound(d, r.size(1));
      const at::Tensor defined = ~r.isnan().any(1) & r.isfinite().any(1);
      const at::Tensor entropy = (r.exp() * r.abs()).nan_to_num(0.0, 0.0, 0.0).sum(1);
      const at::Tensor lse = at::logsumexp(o, {1});
      const at::Tensor bound = entropy.mul(b.relative).add(b.absolute);
      return firstBadPosition(defined & ~(lse.abs() <= bound), lse, bound, "logsumexp(out) over the dim is not 0");
    };
  } else {
    spec.invariant = [inner](const at::Tensor&, const at::Tensor& out64, const at::Tensor& ref64, DType d) {
      const at::Tensor o = threeExtents(out64, inner), r = threeExtents(ref64, inner);
      const SoftmaxFamily::RowSumBound b = SoftmaxFamily::rowSumBound(d, r.size(1));
      const at::Tensor defined = ~r.isnan().any(1);
      const at::Tensor small = (r < b.smallBelow).sum(1).to(at::kDouble);
      const at::Tensor bound = small.mul(b.perSmall).add(b.relative);
      const at::Tensor sums = o.sum(1);
      const at::Tensor excess = (sums - r.sum(1)).abs();
      return firstBadPosition(defined & ~(excess <= bound), sums, bound, "the softmax over the dim does not sum to 1");
    };
  }
  return spec;
}

HarnessCandidate softmaxDimCandidate(const SoftmaxDimVariant& v, const SoftmaxDimParams& p, const std::string& cubin) {
  HarnessCandidate c;
  c.cubin = cubin;
  c.kernelName = SoftmaxDimFamily::kKernelName;
  c.description = std::string(SoftmaxDimFamily::kName) + "[" + p.describe() + "]";
  // Note [A family's harness candidate] (FamilyCandidate.h), with a shape read as [rows, cols / inner, inner].
  const auto reshaped = [v](int64_t rows, int64_t cols) {
    SoftmaxDimVariant w = v;
    w.outer = rows;
    w.dim = cols / v.inner;
    return w;
  };
  c.geometry = [reshaped, p](int64_t rows, int64_t cols) {
    const kernels::LaunchGeometry g = SoftmaxDimFamily::launchGeometry(reshaped(rows, cols), p);
    return LaunchGeometry{g.gridX, g.blockX, g.sharedBytes};
  };
  c.acceptsShape = [reshaped, p, inner = v.inner](int64_t rows, int64_t cols) {
    if (cols < inner || cols % inner != 0) return false;
    const SoftmaxDimVariant w = reshaped(rows, cols);
    return SoftmaxDimFamily::guardVariant(w) && SoftmaxDimFamily::guardParams(w, p);
  };
  // The harness's buffers never overlap; in == out is left to the serving path.
  c.acceptsPointers = [dtype = v.dtype, p](const void* in, const void* out) {
    return in != out && SoftmaxDimFamily::guardPointers(in, out, dtype, p);
  };
  c.alignment = SoftmaxDimFamily::requiredAlignment(v.dtype, p);
  return c;
}

FamilyTuneSpec softmaxDimTuneSpec(const SoftmaxDimVariant& v, int device, const TunerOptions& options, SoftmaxOp op) {
  HOTKERNEL_CHECK(SoftmaxDimFamily::guardVariant(v), "the middle-dim softmax family cannot serve this variant");
  FamilyTuneSpec spec;
  spec.family = kernels::softmaxFamilyName(op);
  spec.kernelName = SoftmaxDimFamily::kKernelName;
  spec.source = SoftmaxDimFamily::source();
  spec.program = "softmax_dim.cu";
  spec.dtype = v.dtype;
  spec.rows = v.outer;
  spec.cols = v.dim * v.inner;  // no overflow: guardVariant
  for (const SoftmaxDimParams& p : SoftmaxDimFamily::allParameterPoints(v.dtype)) {
    if (SoftmaxDimFamily::guardParams(v, p)) spec.validPoints.push_back(toPoint(p));
  }
  for (const SoftmaxDimParams& p : SoftmaxDimFamily::parameterSpace(v)) spec.seeds.push_back(toPoint(p));
  // As the last-dim softmax (12 row-sized buffers: the harness's, the timed
  // calls' inputs and checked outputs) and the L2 flush: a variant whose
  // outer rows do not fit the cap is tuned on a subset of them, never fewer
  // than fill the GPU (Note [Tuning on a row subset]).
  chooseTuningRows(spec, device, /*rowBuffers=*/12,
                   middleDimFillRows(v.inner, spec.validPoints,
                                     at::cuda::getDeviceProperties(device)->multiProcessorCount),
                   options);
  spec.compileOptions = [v, op](const FamilyPoint& p) {
    return SoftmaxDimFamily::compileOptions(v.dtype, toParams(p), op);
  };
  spec.paramsJson = [](const FamilyPoint& p) { return toParams(p).toJson(); };
  spec.candidate = [v](const FamilyPoint& p, const std::string& cubin) {
    return softmaxDimCandidate(v, toParams(p), cubin);
  };
  spec.harnessSpec = softmaxDimSpec(op, v.inner);
  SoftmaxDimVariant timed = v;
  timed.outer = spec.rows;
  const VariantKey key = kernels::softmaxDimKeyOf(timed, device);  // the timed plan's
  spec.makePlan = [key, device, op](const FamilyPoint& p, const std::string& cubin) {
    return kernels::softmaxDescriptor(op).makePlan(key, toParams(p).toJson(), cubin, device);
  };
  // The timed calls' inputs (Note [Timed outputs are checked] in
  // FamilyTuner.cpp), drawn in row slices with a yield point before each
  // (Note [Bounded units of background GPU work]).
  const auto opts = at::TensorOptions().dtype(at::kFloat).device(at::kCUDA, device);
  spec.timedInputs = drawTimedInputs(
      spec.harnessSpec, v.dtype, spec.rows, spec.cols, device,
      [&](int64_t k) { return at::randn({k, spec.cols}, opts).mul_(4.0); }, options.yieldPoint);
  spec.atenCall = atenReferenceOfSpec(spec.harnessSpec).call;
  return spec;
}

TuneOutcome tuneSoftmaxDim(const SoftmaxDimVariant& v, int device, const TunerOptions& options, SoftmaxOp op) {
  HOTKERNEL_CHECK(SoftmaxDimFamily::guardVariant(v), "the middle-dim softmax family cannot serve this variant");
  HOTKERNEL_CHECK(nvrtcAvailable(), "NVRTC is unavailable");
  TunerScope scope(device);  // Note [A tuner's scope]
  const DeviceInfo info = queryDevice(device);
  const FamilyTuneSpec spec = softmaxDimTuneSpec(v, device, options, op);
  double bestSpeedup = 0;
  return tuneFamily(spec, device, info.nvrtcArch(), options, bestSpeedup);
}

}  // namespace hotkernel
