#include "hotkernel/optimizer/ReduceTuner.h"

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

#include <cmath>
#include <vector>

#include "FamilyCandidate.h"
#include "hotkernel/kernels/FamilyDescriptor.h"
#include "hotkernel/optimizer/FamilyTuner.h"
#include "hotkernel/optimizer/SlicedInput.h"
#include "hotkernel/optimizer/TunerScope.h"
#include "hotkernel/runtime/Check.h"
#include "hotkernel/runtime/CudaDriver.h"
#include "hotkernel/runtime/Nvrtc.h"

namespace hotkernel {
namespace {

using kernels::DType;
using kernels::ReduceFamily;
using kernels::ReduceOp;
using kernels::ReduceParams;
using kernels::ReduceTolerance;
using kernels::ReduceVariant;

const std::vector<int64_t>& lastDim() {
  static const std::vector<int64_t> dims = {-1};
  return dims;
}

// Note [Reduction harness]
// Reference: ATen's CUDA kernel of the op (at::cuda::sum / mean / amax /
// argmax / amin / argmin / max / min over dim -1), called below the dispatcher: through it, a serving
// process would reach hotkernel's own trampoline, and a candidate must never
// be checked against itself. No extra arguments: a row op of the plain
// (in, out, rows, cols) ABI with a [rows] output; max.dim and min.dim write
// two, "values" (bit for bit: Note [Bit-exact outputs] in Harness.h) and
// "indices" (int64, exact), through (in, values, indices, rows, cols).
// Bounds per row (ReduceFamily::tolerance, Note [Reduction tolerance]):
// the extrema exact (argmax and argmin through Note [Exact integer outputs]); sum
// and mean within ATen's own distance from the float64 result of the same
// input, plus this kernel's summation bound on sum |x| (mean: mean |x|), plus
// one step of the output dtype. Sums take near-max inputs at max / (4 cols)
// (Note [Near-max inputs of sums] in Harness.cpp). The float64 check of the
// harness compares sum and mean against at::cuda::sum / mean in float64.
at::Tensor sumBound(const at::Tensor& in, const at::Tensor& ref, ReduceOp op, DType d) {
  const ReduceTolerance t = ReduceFamily::tolerance(op, d, in.size(1));
  // Sums accumulated in float64 without a float64 copy of the input (8 bytes
  // an element: 8 GiB for [8192, 128256]); below the dispatcher, like the reference.
  at::Tensor exact = at::cuda::sum(in, at::IntArrayRef(lastDim()), false, at::kDouble);
  at::Tensor absSum = at::cuda::sum(in.abs(), at::IntArrayRef(lastDim()), false, at::kDouble);
  if (op == ReduceOp::Mean) {
    exact.div_(static_cast<double>(in.size(1)));
    absSum.div_(static_cast<double>(in.size(1)));
  }
  const at::Tensor r = ref.to(at::kDouble).reshape({in.size(0)});
  // Rows ATen makes NaN or infinite must be met exactly: their bound does not matter.
  const at::Tensor atenError = (r - exact).abs_();
  return atenError.add_(absSum.mul_(t.sumRel)).add_(r.abs().mul_(t.outRel)).add_(t.outAbs).to(at::kFloat);
}

}  // namespace

std::vector<at::Tensor> atenReduceLastDimOutputs(const at::Tensor& x, ReduceOp op) {
  if (op == ReduceOp::Max || op == ReduceOp::Min) {
    auto [values, indices] = op == ReduceOp::Max ? at::cuda::max(x, -1, false) : at::cuda::min(x, -1, false);
    return {values, indices};
  }
  return {atenReduceLastDim(x, op)};
}

std::vector<RowOpOutput> reduceOutputs(ReduceOp op, int64_t perRowElements,
                                       std::function<at::Tensor(const at::Tensor&, const at::Tensor&, DType)> sumBound) {
  const kernels::ReduceOpInfo& info = kernels::reduceOpInfo(op);
  RowOpOutput out;
  out.name = info.pair ? "values" : "out";
  out.perRow = true;
  out.perRowElements = perRowElements;
  out.perRowInInputDtype = !info.index || info.pair;
  out.exactInt64 = info.index && !info.pair;
  out.exactBits = info.pair;
  const bool sum = op == ReduceOp::Sum || op == ReduceOp::Mean;
  out.bound = [sum, sumBound, perRowElements](const at::Tensor& in, const std::vector<at::Tensor>& refs, DType d) {
    if (sum) return sumBound(in, refs[0], d);
    const std::vector<int64_t> shape = perRowElements > 1 ? std::vector<int64_t>{in.size(0), perRowElements}
                                                          : std::vector<int64_t>{in.size(0)};
    return at::zeros(shape, in.options().dtype(at::kFloat));  // exact (amax, amin)
  };
  if (!info.pair) return {out};
  RowOpOutput indices;
  indices.name = "indices";
  indices.perRow = true;
  indices.perRowElements = perRowElements;
  indices.exactInt64 = true;
  indices.bound = out.bound;  // not called: exact
  return {out, indices};
}

at::Tensor atenReduceLastDim(const at::Tensor& x, ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
      return at::cuda::sum(x, at::IntArrayRef(lastDim()), false, std::nullopt);
    case ReduceOp::Mean:
      return at::cuda::mean(x, at::IntArrayRef(lastDim()), false, std::nullopt);
    case ReduceOp::Amax:
      return at::cuda::amax(x, at::IntArrayRef(lastDim()), false);
    case ReduceOp::Argmax:
      return at::cuda::argmax(x, int64_t{-1}, false);
    case ReduceOp::Amin:
      return at::cuda::amin(x, at::IntArrayRef(lastDim()), false);
    case ReduceOp::Argmin:
      return at::cuda::argmin(x, int64_t{-1}, false);
    case ReduceOp::Max:
      return std::get<0>(at::cuda::max(x, -1, false));
    case ReduceOp::Min:
      return std::get<0>(at::cuda::min(x, -1, false));
  }
  HOTKERNEL_THROW("unknown reduction op ", static_cast<int>(op));
}

RowOpSpec reduceSpec(ReduceOp op) {
  RowOpSpec spec;
  spec.op = kernels::reduceAtenOpName(op);
  spec.infinitiesDefined = true;
  const bool sum = op == ReduceOp::Sum || op == ReduceOp::Mean;
  spec.outputs = reduceOutputs(op, 1, [op](const at::Tensor& in, const at::Tensor& ref, DType d) {
    return sumBound(in, ref, op, d);
  });
  spec.makeArgs = [](int64_t, int64_t, DType, at::Generator&) { return RowOpArgs{}; };
  spec.references = [op](const at::Tensor& in, const RowOpArgs&) { return atenReduceLastDimOutputs(in, op); };
  if (sum) {
    spec.references64 = [op](const at::Tensor& in64, const RowOpArgs&) { return atenReduceLastDim(in64, op); };
    spec.nearMaxMagnitude = [](DType d, int64_t cols) {
      const double max = d == DType::Float16 ? 65504.0 : 3.3895313892515355e38;
      return max / (4.0 * static_cast<double>(std::max<int64_t>(cols, 1)));
    };
  }
  spec.kernelArgs = [](const at::Tensor& in, const RowOpArgs&, const std::vector<at::Tensor>& outs) {
    KernelArgs args;
    args.pointer(in.const_data_ptr()).pointer(outs.at(0).mutable_data_ptr());
    if (outs.size() > 1) args.pointer(outs.at(1).mutable_data_ptr());  // a pair's indices
    return args.int64(in.size(0)).int64(in.size(1));
  };
  return spec;
}

HarnessCandidate reduceCandidate(const ReduceVariant& v, const ReduceParams& p, const std::string& cubin) {
  HarnessCandidate c = detail::familyCandidate<ReduceFamily>(v, p, cubin, kernels::reduceFamilyName(v.op));
  c.acceptsPointers = [v, p](const void* in, const void* out) { return ReduceFamily::guardPointers(in, out, v, p); };
  c.outputAlignment = ReduceFamily::outputElementSize(v.op, v.dtype);
  return c;
}

namespace {

// The reduction axes on the search's: unroll rides on `items` (a niche per
// unroll, as cross_entropy's does).
FamilyPoint toPoint(const ReduceParams& p) { return FamilyPoint{p.threads, p.rowsPerCta, p.vec, p.unroll, 1}; }
ReduceParams toParams(const FamilyPoint& p) { return ReduceParams{p.threads, p.vec, p.items, p.rowsPerCta}; }

}  // namespace

FamilyTuneSpec reduceTuneSpec(const ReduceVariant& v, int device, const TunerOptions& options) {
  HOTKERNEL_CHECK(ReduceFamily::guardVariant(v), "the reduction family cannot serve this variant");
  FamilyTuneSpec spec;
  spec.family = kernels::reduceFamilyName(v.op);
  spec.kernelName = ReduceFamily::kKernelName;
  spec.source = ReduceFamily::source();
  spec.program = "reduce_lastdim.cu";
  spec.dtype = v.dtype;
  spec.rows = v.rows;
  spec.cols = v.cols;
  for (const ReduceParams& p : ReduceFamily::allParameterPoints(v.dtype)) {
    if (ReduceFamily::guardParams(v, p)) spec.validPoints.push_back(toPoint(p));
  }
  for (const ReduceParams& p : ReduceFamily::parameterSpace(v)) spec.seeds.push_back(toPoint(p));
  // The harness's input, its stress sets and float64 copies (about 12
  // input-sized buffers at 16 bits) and the L2 flush: a variant whose rows do
  // not fit the cap is tuned on a row subset (Note [Tuning on a row subset]);
  // one of too few rows for a subset runs its harness on fewer rows than its
  // timed calls (two inputs and the float64 copy of their checks: about 7
  // such buffers a row; Note [A harness on fewer rows]).
  chooseTuningRows(spec, device, 12, options, /*timedBuffers=*/7);
  spec.compileOptions = [v](const FamilyPoint& p) { return ReduceFamily::compileOptions(v.dtype, toParams(p), v.op); };
  spec.paramsJson = [](const FamilyPoint& p) { return toParams(p).toJson(); };
  spec.candidate = [v](const FamilyPoint& p, const std::string& cubin) {
    return reduceCandidate(v, toParams(p), cubin);
  };
  spec.harnessSpec = reduceSpec(v.op);
  const VariantKey key{static_cast<int32_t>(v.dtype), device, spec.rows, v.cols};  // the timed plan's
  spec.makePlan = [key, device, op = v.op](const FamilyPoint& p, const std::string& cubin) {
    return kernels::reduceDescriptor(op).makePlan(key, toParams(p).toJson(), cubin, device);
  };
  // The timed calls: ATen's kernel, and a plan's launcher, each allocating its
  // [rows] output, rotating over two inputs (Note [Timed outputs are checked]
  // in FamilyTuner.cpp). Drawn in row slices with a yield point before each
  // (Note [Bounded units of background GPU work]): [8192, 128256] at once is one ~6 ms unit.
  const auto opts = at::TensorOptions().dtype(at::kFloat).device(at::kCUDA, device);
  spec.timedInputs = drawTimedInputs(
      spec.harnessSpec, v.dtype, spec.rows, v.cols, device,
      [&](int64_t k) { return at::randn({k, v.cols}, opts).mul_(2.0); }, options.yieldPoint);
  spec.atenCall = atenReferenceOfSpec(spec.harnessSpec).call;
  return spec;
}

TuneOutcome tuneReduce(const ReduceVariant& v, int device, const TunerOptions& options) {
  HOTKERNEL_CHECK(ReduceFamily::guardVariant(v), "the reduction family cannot serve this variant");
  HOTKERNEL_CHECK(nvrtcAvailable(), "NVRTC is unavailable");
  TunerScope scope(device);  // Note [A tuner's scope]
  const DeviceInfo info = queryDevice(device);
  const FamilyTuneSpec spec = reduceTuneSpec(v, device, options);
  const std::string arch = info.nvrtcArch();
  double bestSpeedup = 0;
  TuneOutcome outcome = tuneFamily(spec, device, arch, options, bestSpeedup);
  outcome.metrics.op = kernels::reduceOpName(v.op);
  return outcome;
}

}  // namespace hotkernel
