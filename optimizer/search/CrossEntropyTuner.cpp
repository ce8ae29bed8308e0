#include "hotkernel/optimizer/CrossEntropyTuner.h"

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/ops/_log_softmax_cuda_dispatch.h>
#include <ATen/ops/nll_loss_forward_cuda_dispatch.h>
#include <c10/cuda/CUDAGraphsC10Utils.h>
#include <c10/cuda/CUDAGuard.h>

#include <algorithm>
#include <cmath>

#include "FamilyCandidate.h"
#include "hotkernel/kernels/FamilyDescriptor.h"
#include "hotkernel/kernels/VariantOptions.h"
#include "hotkernel/optimizer/FamilyTuner.h"
#include "hotkernel/optimizer/SlicedInput.h"
#include "hotkernel/optimizer/TunerScope.h"
#include "hotkernel/runtime/StreamWorkspace.h"
#include "hotkernel/runtime/Check.h"
#include "hotkernel/runtime/CudaDriver.h"
#include "hotkernel/runtime/Nvrtc.h"

namespace hotkernel {
namespace {

using kernels::CrossEntropyFamily;
using kernels::CrossEntropyParams;
using kernels::CrossEntropyReduction;
using kernels::CrossEntropyTolerance;
using kernels::CrossEntropyVariant;
using kernels::DType;

// Note [Cross entropy harness]
// Reference: ATen's own decomposition of the composite cross_entropy_loss for
// 2-D logits and class indices, called below the dispatcher:
// at::cuda::_log_softmax(x, 1, false) then at::cuda::nll_loss_forward(.., None,
// reduction, ignore_index) (what at::compositeimplicitautograd::cross_entropy_loss
// reaches through log_softmax and nll_loss_nd). Going through the dispatcher
// would reach hotkernel's own trampolines in a serving process (the
// cross_entropy_loss override, and the _log_softmax one the composite calls),
// and a candidate must never be checked against itself.
// Arguments per check: labels uniform over the classes, about one row in 8
// set to ignore_index (every row in about one check in 16: mean is then 0/0 =
// NaN, as ATen gives); ignore_index -100 or, half of the time, a real class
// (rows whose drawn class equals it are ignored too). A recorded seed replays
// every draw. Bounds: per row CrossEntropyTolerance::rowWithin's; a sum or
// mean reducedBound over the reference's per-row losses of the kept rows.
// A non-finite reference (inf or NaN rows, overflowed sums) must be met
// exactly (the harness's NaN / infinity rule), so its bound is 0.
// No float64 check: the harness's float64 stage narrows rows, which a 0-dim
// output cannot follow; the stability stage's special values cover the rest.
struct CeArgs {
  at::Tensor labels;
  int64_t ignoreIndex;
};

CeArgs ceArgsOf(const RowOpArgs& a) {
  return CeArgs{a.rowInputs.at(0), static_cast<int64_t>(a.scalars.at(0).value_or(-100.0))};
}

std::tuple<at::Tensor, at::Tensor> atenCrossEntropy(const at::Tensor& x, const at::Tensor& labels, int64_t reduction,
                                                    int64_t ignoreIndex) {
  const at::Tensor logp = at::cuda::_log_softmax(x, 1, false);
  return at::cuda::nll_loss_forward(logp, labels, std::nullopt, reduction, ignoreIndex);
}

at::Tensor reducedBound(const at::Tensor& in, const CeArgs& a, const at::Tensor& ref, CrossEntropyReduction r,
                        DType d) {
  const double refValue = ref.item<double>();
  if (!std::isfinite(refValue)) return at::scalar_tensor(0.0, at::kDouble);
  const CrossEntropyTolerance tol = CrossEntropyFamily::tolerance(d, in.size(1));
  const at::Tensor rows =
      std::get<0>(atenCrossEntropy(in, a.labels, static_cast<int64_t>(CrossEntropyReduction::None), a.ignoreIndex))
          .to(at::kDouble);
  const at::Tensor kept = a.labels != a.ignoreIndex;
  const int64_t count = kept.sum().item<int64_t>();
  const at::Tensor absKept = at::where(kept, rows.abs(), at::zeros_like(rows));
  const double sumAbs = absKept.sum().item<double>();
  const double maxAbs = count > 0 ? absKept.max().item<double>() : 0.0;
  return at::scalar_tensor(tol.reducedBound(r, count, sumAbs, maxAbs, refValue), at::kDouble);
}

}  // namespace

AtenReference crossEntropyAtenReference(CrossEntropyReduction reduction) {
  AtenReference reference;
  reference.timedArgs = [](const at::Tensor& in, at::Generator& gen) {
    const int64_t rows = in.size(0), cols = in.size(1);
    at::Tensor labels = at::randint(0, cols, {rows}, gen, in.options().dtype(at::kLong));
    labels.slice(0, 0, rows, 8).fill_(-100);
    RowOpArgs a;
    a.rowInputs = {labels};
    a.scalars = {-100.0};
    return a;
  };
  reference.call = [r = static_cast<int64_t>(reduction)](const TimedInput& t) {
    (void)atenCrossEntropy(t.in, t.args.rowInputs.at(0), r, -100);
  };
  return reference;
}

RowOpSpec crossEntropySpec(CrossEntropyReduction reduction) {
  RowOpSpec spec;
  spec.op = "aten::cross_entropy_loss";
  spec.infinitiesDefined = true;
  const bool reduced = reduction != CrossEntropyReduction::None;
  RowOpOutput loss;
  loss.name = "loss";
  loss.perRow = !reduced;
  loss.perRowInInputDtype = !reduced;
  loss.scalar = reduced;
  loss.boundWithArgs = [reduction](const at::Tensor& in, const RowOpArgs& args, const std::vector<at::Tensor>& refs,
                                   DType d) {
    if (reduction != CrossEntropyReduction::None) return reducedBound(in, ceArgsOf(args), refs[0], reduction, d);
    const CrossEntropyTolerance tol = CrossEntropyFamily::tolerance(d, in.size(1));
    return refs[0].to(at::kDouble).abs().mul_(tol.rowRel).add_(tol.rowAbs).to(at::kFloat);
  };
  spec.outputs = {loss};
  spec.makeArgs = [](int64_t rows, int64_t cols, DType, at::Generator& gen) {
    const auto cuda = at::TensorOptions().device(at::kCUDA);
    const at::Tensor u = at::rand({3}, gen, cuda.dtype(at::kDouble)).cpu();
    const double realClass = u[0].item<double>(), which = u[1].item<double>(), allIgnored = u[2].item<double>();
    const int64_t ignoreIndex =
        realClass < 0.5 ? std::min<int64_t>(cols - 1, static_cast<int64_t>(which * static_cast<double>(cols))) : -100;
    at::Tensor labels = at::randint(0, cols, {rows}, gen, cuda.dtype(at::kLong));
    if (allIgnored < 1.0 / 16.0) {
      labels.fill_(ignoreIndex);
    } else {
      labels.masked_fill_(at::rand({rows}, gen, cuda.dtype(at::kFloat)) < 0.125, ignoreIndex);
    }
    RowOpArgs a;
    a.rowInputs = {labels};
    a.scalars = {static_cast<double>(ignoreIndex)};
    return a;
  };
  spec.references = [reduction](const at::Tensor& in, const RowOpArgs& args) {
    const CeArgs a = ceArgsOf(args);
    return std::vector<at::Tensor>{
        std::get<0>(atenCrossEntropy(in, a.labels, static_cast<int64_t>(reduction), a.ignoreIndex))};
  };
  spec.workspaceFloats = [reduction](int64_t rows, int64_t cols) {
    return CrossEntropyFamily::workspaceFloats(CrossEntropyVariant{DType::Float32, rows, cols, reduction});
  };
  spec.workspaceZeroTail = reduced ? 1 : 0;
  spec.kernelArgs = [reduced](const at::Tensor& in, const RowOpArgs& args, const std::vector<at::Tensor>& outs) {
    const CeArgs a = ceArgsOf(args);
    // The workspace follows the loss where the variant needs one (not for one row).
    const void* work = reduced && outs.size() > 1 ? outs.at(1).const_data_ptr() : nullptr;
    return KernelArgs()
        .pointer(in.const_data_ptr())
        .pointer(a.labels.const_data_ptr())
        .pointer(outs.at(0).mutable_data_ptr())
        .pointer(work)
        .int64(in.size(0))
        .int64(in.size(1))
        .int64(a.ignoreIndex);
  };
  return spec;
}

HarnessCandidate crossEntropyCandidate(const CrossEntropyVariant& v, const CrossEntropyParams& p,
                                       const std::string& cubin) {
  HarnessCandidate c = detail::familyCandidate<CrossEntropyFamily>(v, p, cubin, CrossEntropyFamily::kName);
  // The harness asks about logits and output only: labels and workspace are
  // given aligned stand-ins (the trampoline checks the real ones).
  c.acceptsPointers = [v, p](const void* in, const void* out) {
    static const void* const kAligned = reinterpret_cast<const void*>(uintptr_t{4096});
    return in != out && CrossEntropyFamily::guardPointers(in, kAligned, out, kAligned, v, p);
  };
  c.outputAlignment = kernels::elementSize(v.dtype);
  return c;
}

namespace {

// The cross_entropy axes on the search's: unroll rides on `items` (a niche per
// unroll, like softmax's register / streaming split).
FamilyPoint toPoint(const CrossEntropyParams& p) {
  return FamilyPoint{p.threads, p.rowsPerCta, p.vec, p.unroll, p.cluster};
}
CrossEntropyParams toParams(const FamilyPoint& p) {
  CrossEntropyParams c;
  c.threads = p.threads;
  c.vec = p.vec;
  c.unroll = p.items;
  c.rowsPerCta = p.rowsPerCta;
  c.cluster = p.cluster;
  return c;
}

}  // namespace

FamilyTuneSpec crossEntropyTuneSpec(const CrossEntropyVariant& v, int device, const TunerOptions& options) {
  HOTKERNEL_CHECK(CrossEntropyFamily::guardVariant(v), "cross_entropy family cannot serve this variant");
  if (options.memoryCapBytes > 0) {
    // The harness's inputs and stress sets (about 10 logits-sized buffers) and the L2 flush.
    const int64_t need = 10 * v.rows * v.cols * static_cast<int64_t>(kernels::elementSize(v.dtype)) +
                         2 * at::cuda::getDeviceProperties(device)->l2CacheSize;
    HOTKERNEL_CHECK(need <= options.memoryCapBytes, "tuning cross_entropy ", v.rows, "x", v.cols, " needs ~",
                    need >> 20, " MiB of GPU memory, over the cap of ", options.memoryCapBytes >> 20, " MiB");
  }
  const DeviceInfo info = queryDevice(device);
  const int cc = info.ccMajor * 10 + info.ccMinor;
  FamilyTuneSpec spec;
  spec.family = CrossEntropyFamily::kName;
  spec.kernelName = CrossEntropyFamily::kKernelName;
  spec.source = CrossEntropyFamily::source();
  spec.program = "cross_entropy.cu";
  spec.dtype = v.dtype;
  spec.rows = v.rows;
  spec.cols = v.cols;
  for (const CrossEntropyParams& p : CrossEntropyFamily::allParameterPoints(v.dtype)) {
    if (CrossEntropyFamily::guardParams(v, p) && p.minComputeCapability() <= cc) spec.validPoints.push_back(toPoint(p));
  }
  for (const CrossEntropyParams& p : CrossEntropyFamily::parameterSpace(v, cc)) spec.seeds.push_back(toPoint(p));
  spec.compileOptions = [v](const FamilyPoint& p) {
    return CrossEntropyFamily::compileOptions(v.dtype, toParams(p), v.reduction);
  };
  spec.paramsJson = [](const FamilyPoint& p) { return toParams(p).toJson(); };
  spec.candidate = [v](const FamilyPoint& p, const std::string& cubin) {
    return crossEntropyCandidate(v, toParams(p), cubin);
  };
  spec.harnessSpec = crossEntropySpec(v.reduction);
  VariantKey key{static_cast<int32_t>(v.dtype), device, v.rows, v.cols};
  key.options = kernels::reductionOptions(static_cast<int32_t>(v.reduction));
  spec.makePlan = [key, device](const FamilyPoint& p, const std::string& cubin) {
    return kernels::crossEntropyDescriptor().makePlan(key, toParams(p).toJson(), cubin, device);
  };
  // The timed calls: ATen's decomposition, and a plan as the trampoline runs
  // it (output and workspace allocated, the counter zeroed only when needed),
  // rotating over two inputs (Note [Timed outputs are checked] in
  // FamilyTuner.cpp), each with labels of its own, every eighth row ignored.
  const auto opts = at::TensorOptions().dtype(at::kFloat).device(at::kCUDA, device);
  // Drawn in row slices, a yield point before each (the first before any GPU work of the tuner).
  spec.timedInputs = drawTimedInputs(
      spec.harnessSpec, v.dtype, v.rows, v.cols, device,
      [&](int64_t k) { return at::randn({k, v.cols}, opts).mul_(3.0); }, options.yieldPoint);
  const AtenReference reference = crossEntropyAtenReference(v.reduction);
  at::Generator gen = timingGenerator(device);
  for (TimedInput& t : spec.timedInputs) t.args = reference.timedArgs(t.in, gen);
  spec.atenCall = reference.call;
  spec.planCall = [v](const Plan& plan, const TimedInput& t, const std::vector<at::Tensor>& outs) {
    // As the trampoline runs it: the stream's persistent workspace (Note [A
    // persistent workspace per stream]). Only harness-validated candidates
    // are timed, and the harness fails one that leaves the counter non-zero.
    const at::Tensor& x = t.in;
    const int64_t workFloats = CrossEntropyFamily::workspaceFloats(v);
    const at::Tensor work = workFloats > 0 ? StreamWorkspaces::global().forLaunchLike(workFloats, x) : at::Tensor();
    return plan.launcher->launchArgs(KernelArgs()
                                         .pointer(x.const_data_ptr())
                                         .pointer(t.args.rowInputs.at(0).const_data_ptr())
                                         .pointer(outs.at(0).mutable_data_ptr())
                                         .pointer(work.defined() ? work.const_data_ptr() : nullptr)
                                         .int64(v.rows)
                                         .int64(v.cols)
                                         .int64(-100),
                                     at::cuda::getCurrentCUDAStream().stream());
  };
  return spec;
}

TuneOutcome tuneCrossEntropy(const CrossEntropyVariant& v, int device, const TunerOptions& options) {
  HOTKERNEL_CHECK(CrossEntropyFamily::guardVariant(v), "cross_entropy family cannot serve this variant");
  HOTKERNEL_CHECK(nvrtcAvailable(), "NVRTC is unavailable");
  TunerScope scope(device);  // Note [A tuner's scope]
  const FamilyTuneSpec spec = crossEntropyTuneSpec(v, device, options);
  const std::string arch = queryDevice(device).nvrtcArch();
  double bestSpeedup = 0;
  TuneOutcome outcome = tuneFamily(spec, device, arch, options, bestSpeedup);
  outcome.metrics.reduction = kernels::reductionName(v.reduction);
  return outcome;
}

}  // namespace hotkernel
