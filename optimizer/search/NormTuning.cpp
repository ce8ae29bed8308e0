#include "NormTuning.h"

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>

#include <cmath>

#include "hotkernel/optimizer/SlicedInput.h"
#include "hotkernel/runtime/CudaDriver.h"
#include "hotkernel/runtime/StreamWorkspace.h"

namespace hotkernel::norm_tuning {

using kernels::DType;
using kernels::NormParams;

// Note [Norm harness arguments]
// Every check draws its own weight and bias, uniform in [-1, 1) and
// [-0.5, 0.5) (both signs, never all ones: a candidate that ignores the weight
// or the bias fails the first check), and its own eps, log-uniform in
// [1e-7, 1e-3] (rms_norm: None, ATen's FLT_EPSILON, in about one check in
// four). Weights up to 1 in magnitude are what Note [Layer norm tolerance]
// assumes. The draws come from the harness's generator: a recorded seed
// replays them.
std::optional<double> drawEps(at::Generator& gen, bool allowNone) {
  const at::Tensor u = at::rand({2}, gen, at::TensorOptions().dtype(at::kDouble).device(at::kCUDA)).cpu();
  const double none = u[0].item<double>(), e = u[1].item<double>();
  if (allowNone && none < 0.25) return std::nullopt;
  return std::pow(10.0, -7.0 + 4.0 * e);
}

at::Tensor drawColumn(int64_t cols, DType dtype, double scale, at::Generator& gen) {
  const auto opts = at::TensorOptions().dtype(at::kFloat).device(at::kCUDA);
  return at::rand({cols}, gen, opts).mul_(2.0 * scale).sub_(scale).to(scalarTypeOf(dtype));
}

std::optional<at::Tensor> optionalOf(const at::Tensor& t) {
  return t.defined() ? std::optional<at::Tensor>(t) : std::nullopt;
}

const void* pointerOf(const at::Tensor& t) { return t.defined() ? t.const_data_ptr() : nullptr; }

// Note [Norm harness bounds]
// out and rstd: the family's NormTolerance (outAbs + outRel |ref|, statRel |ref|).
// mean: statRel * (|ref| + scale), the row's scale 1 / refRstd as in
// NormTolerance::meanWithin, or the row's largest |x| where rstd is 0 or not
// finite (the variance overflowed: inputs near the dtype's max), since the
// mean's summation error is relative to sum |x|, not to the mean.
// layer_norm's out adds the mean's error carried through the cancellation
// x - mean: statRel * |w| * rstd * |mean| (rows offset far from zero, the
// harness's "shifted" inputs, where |mean| is hundreds of standard
// deviations; Note [Layer norm tolerance] covers |mean| up to ~3 std with
// its 4 s floor). |w| <= 1 for the weights Note [Norm harness arguments]
// draws, so the term is taken with |w| = 1.
// layer_norm's rstd adds ATen's own error: |ATen's rstd - rstd64|, rstd64 from
// the float64 biased variance of the same input and the same eps. ATen's
// float32 Welford (a running mean near |mean|, then Chan merges of means that
// differ by a few ulps of |mean|) is off by 2.8e-4 relative on the "shifted"
// rows (uniform in [-1, 5) + 1e5, on the H200; 1.4e-4 in a float32
// emulation), 1.8e-5 for float16 + 1e4, while statRel is 4e-6: without the
// term, a candidate had to reproduce ATen's rounding, not the result. With it,
// a candidate passes when it is within statRel of ATen or no further from ATen
// than ATen is from float64 (+ statRel); the kernel's own statistics are within
// 4e-8 of float64 there (Note [Layer norm statistics] in kernels/norm/layer_norm.cu).
// rms_norm's rstd adds ATen's own error the same way (atenRmsRstdError, from
// the float64 mean of squares): ATen sums a row's squares in float32 chains of
// cols / 128 terms, and on rows of millions of positive squares (the "shifted"
// rows) such a chain errs by more than the family's statRel, whose sqrt(cols)
// growth assumes errors of random sign: on 2,097,152 bfloat16 columns ATen's
// rstd and a correct kernel's were 5.0e-5 apart relative, statRel 4.5e-5.
// rms_norm's out carries that error too (out = w * rstd * x): its bound adds
// |ref| times ATen's relative rstd error of the row. Rows of one value repeated
// make ATen's chains round the same way at every step: on [8, 4194304] fp32 a
// correct cluster kernel's out was 2.0e-4 from ATen's, the bound 1.28e-4.
at::Tensor atenRstdError(const at::Tensor& in, const at::Tensor& refRstd, double eps) {
  const at::Tensor x = in.to(at::kDouble);
  const at::Tensor var = (x - x.mean(1, /*keepdim=*/true)).square_().mean(1);
  const at::Tensor rstd64 = var.add_(eps).rsqrt_();
  // Rows ATen makes NaN or infinite match exactly (NaN meets NaN): no allowance.
  return (refRstd.to(at::kDouble) - rstd64).abs_().nan_to_num_(0.0, 0.0, 0.0).to(at::kFloat);
}

at::Tensor atenRmsRstdError(const at::Tensor& in, const at::Tensor& refRstd, double eps) {
  const at::Tensor rstd64 = in.to(at::kDouble).square_().mean(1).add_(eps).rsqrt_();
  return (refRstd.to(at::kDouble) - rstd64).abs_().nan_to_num_(0.0, 0.0, 0.0).to(at::kFloat);
}

// A norm launch's last two arguments (Note [Split norm rows over a cooperative grid] in
// kernels/norm/rms_norm.cu): the workspace the harness or planCall appends after the outputs
// (`outs[first]`, its last float the counter), else null.
RowOpOutput normMeanOutput(NormToleranceOf tolerance) {
  return RowOpOutput{"mean", true, [tolerance](const at::Tensor& in, const std::vector<at::Tensor>& refs, DType d) {
                       const double statRel = tolerance(d, in.size(1)).statRel;
                       return refs[1].to(at::kFloat).abs().add_(rowScale(in, refs[2])).mul_(statRel);
                     }};
}

RowOpOutput normRstdOutput(NormToleranceOf tolerance) {
  return RowOpOutput{"rstd", true,
                     [tolerance](const at::Tensor& in, const std::vector<at::Tensor>& refs, DType d) {
                       return refs[2].to(at::kFloat).abs().mul_(tolerance(d, in.size(1)).statRel);
                     },
                     [tolerance](const at::Tensor& in, const RowOpArgs& a, const std::vector<at::Tensor>& refs,
                                 DType d) {
                       return refs[2]
                           .to(at::kFloat)
                           .abs()
                           .mul_(tolerance(d, in.size(1)).statRel)
                           .add_(atenRstdError(in, refs[2], *a.scalars[0]));
                     }};
}

KernelArgs layerNormKernelArgs(const at::Tensor& in, const RowOpArgs& a, const std::vector<at::Tensor>& outs,
                               float eps) {
  KernelArgs args;
  args.pointer(in.const_data_ptr())
      .pointer(pointerOf(a.columns[0]))
      .pointer(pointerOf(a.columns[1]))
      .pointer(outs[0].mutable_data_ptr())
      .pointer(outs[1].mutable_data_ptr())
      .pointer(outs[2].mutable_data_ptr())
      .int64(in.size(0))
      .int64(in.size(1))
      .float32(eps);
  return withWorkspace(args, outs, 3);
}

KernelArgs& withWorkspace(KernelArgs& args, const std::vector<at::Tensor>& outs, size_t first) {
  float* partials = outs.size() > first ? outs[first].mutable_data_ptr<float>() : nullptr;
  void* counter = outs.size() > first ? partials + (outs[first].numel() - 1) : nullptr;
  return args.pointer(partials).pointer(counter);
}

at::Tensor rowScale(const at::Tensor& in, const at::Tensor& refRstd) {
  at::Tensor r = refRstd.to(at::kFloat);
  at::Tensor maxAbs = in.to(at::kFloat).abs().amax(1);
  at::Tensor usable = (r > 0) & r.isfinite();
  return at::where(usable, r.reciprocal(), maxAbs);
}

// What both norm candidates add to the family's: in != out, both aligned; a
// cubin compiled for one column count (Note [Specialized columns] in
// kernels/norm/rms_norm.cu) runs on that count only, the harness's sweep
// varying the rows.
void finishNormCandidate(HarnessCandidate& c, int64_t rows, int64_t cols, const NormParams& p, bool colsSpecialized) {
  c.acceptsPointers = [align = c.alignment](const void* in, const void* out) {
    return in != out && kernels::detail::normAligned(in, align) && kernels::detail::normAligned(out, align);
  };
  if (colsSpecialized) {
    c.acceptsShape = [family = c.acceptsShape, cols](int64_t r, int64_t n) { return n == cols && family(r, n); };
  }
  if (p.split > 1) {
    // A grid split's grid grows with the rows and must stay co-resident (Note [Cooperative launches]):
    // the harness's shapes keep to the variant's rows or fewer, whose grids are no wider than the
    // variant's own. A grid the GPU cannot hold at the variant's rows fails its launch there.
    c.acceptsShape = [family = c.acceptsShape, rows](int64_t r, int64_t n) { return r <= rows && family(r, n); };
  }
}

// A plan called as the trampolines call it: a grid-split plan takes the stream's persistent
// workspace (Note [A persistent workspace per stream]); only harness-validated candidates (the
// counter left at 0) are timed or spot-checked.
std::function<bool(const Plan&, const TimedInput&, const std::vector<at::Tensor>&)> normPlanCall(
    const RowOpSpec& harnessSpec) {
  return [kernelArgs = harnessSpec.kernelArgs](const Plan& plan, const TimedInput& t,
                                               const std::vector<at::Tensor>& outs) {
    std::vector<at::Tensor> launchOuts = outs;
    if (plan.workspaceFloats > 0) {
      launchOuts.push_back(StreamWorkspaces::global().forLaunchLike(plan.workspaceFloats, t.in));
    }
    return plan.launcher->launchArgs(kernelArgs(t.in, t.args, launchOuts), at::cuda::getCurrentCUDAStream().stream());
  };
}

// A grid-split point is the search's `cluster` axis (CTAs a row) with variant 1, the family's
// other kernel at that geometry (FamilyPoint::variant).
FamilyPoint toPoint(const NormParams& p) {
  return p.split > 1 ? FamilyPoint{p.threads, p.rowsPerCta, p.vec, p.items, p.split, 1}
                     : FamilyPoint{p.threads, p.rowsPerCta, p.vec, p.items, p.cluster, 0};
}
NormParams toParams(const FamilyPoint& p) {
  return p.variant == 1 ? NormParams{p.threads, p.vec, p.items, p.rowsPerCta, 1, p.cluster}
                        : NormParams{p.threads, p.vec, p.items, p.rowsPerCta, p.cluster, 1};
}

// The rows a norm spec's variant (spec.rows: all of them) is tuned on: about
// ten row buffers a row (the harness's and the timed calls' inputs, out,
// mean, rstd) and the flush buffer must fit the cap, else a row subset
// (Note [Tuning on a row subset]).
void chooseNormTuningRows(FamilyTuneSpec& spec, int device, const TunerOptions& options) {
  chooseTuningRows(spec, device, 10, options);
}

// The search itself.
TuneOutcome runNormSearch(const FamilyTuneSpec& spec, int device, const TunerOptions& options) {
  const std::string arch = queryDevice(device).nvrtcArch();
  double bestSpeedup = 0;
  return tuneFamily(spec, device, arch, options, bestSpeedup);
}

// The timed calls' inputs (Note [Timed outputs are checked] in
// FamilyTuner.cpp) with the spec's weights, bias and eps, drawn in row
// slices, a yield point before each (the first before any GPU work of the
// tuner); Error "tuning interrupted" when it says stop.
std::vector<TimedInput> benchInputs(const RowOpSpec& spec, DType dtype, int64_t rows, int64_t cols, int device,
                                    const std::function<bool()>& yieldPoint) {
  const auto opts = at::TensorOptions().dtype(at::kFloat).device(at::kCUDA, device);
  return drawTimedInputs(
      spec, dtype, rows, cols, device, [&](int64_t k) { return at::randn({k, cols}, opts).mul_(2.0).add_(0.5); },
      yieldPoint);
}

void finishNormTuneSpec(FamilyTuneSpec& spec, const kernels::FamilyDescriptor& family,
                        const std::function<VariantKey(int64_t rows)>& keyOf, int device, const TunerOptions& options) {
  chooseNormTuningRows(spec, device, options);
  spec.makePlan = [&family, key = keyOf(spec.rows), device](const FamilyPoint& p, const std::string& cubin) {
    return family.makePlan(key, toParams(p).toJson(), cubin, device);
  };
  spec.timedInputs = benchInputs(spec.harnessSpec, spec.dtype, spec.rows, spec.cols, device, options.yieldPoint);
  spec.atenCall = atenReferenceOfSpec(spec.harnessSpec).call;
  spec.planCall = normPlanCall(spec.harnessSpec);
}

}  // namespace hotkernel::norm_tuning
