#include "hotkernel/optimizer/NormTuner.h"

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/ops/_fused_rms_norm_cuda_dispatch.h>
#include <ATen/ops/native_layer_norm_cuda_dispatch.h>
#include <c10/cuda/CUDAGraphsC10Utils.h>
#include <c10/cuda/CUDAGuard.h>

#include <cmath>

#include "FamilyCandidate.h"
#include "NormTuning.h"
#include "hotkernel/kernels/FamilyDescriptor.h"
#include "hotkernel/kernels/VariantOptions.h"
#include "hotkernel/optimizer/FamilyTuner.h"
#include "hotkernel/optimizer/SlicedInput.h"
#include "hotkernel/optimizer/TunerScope.h"
#include "hotkernel/runtime/Check.h"
#include "hotkernel/runtime/CudaDriver.h"
#include "hotkernel/runtime/Nvrtc.h"
#include "hotkernel/runtime/StreamWorkspace.h"
namespace hotkernel {
namespace {

using kernels::DType;
using kernels::LayerNormFamily;
using kernels::NormParams;
using kernels::NormTolerance;
using kernels::RmsNormFamily;
using namespace norm_tuning;

}  // namespace

RowOpSpec rmsNormSpec(bool hasWeight) {
  RowOpSpec spec;
  spec.op = "aten::_fused_rms_norm";
  spec.infinitiesDefined = false;
  spec.outputs = {
      RowOpOutput{"out", false,
                  [](const at::Tensor& in, const std::vector<at::Tensor>& refs, DType d) {
                    const NormTolerance t = RmsNormFamily::tolerance(d, in.size(1));
                    return refs[0].to(at::kFloat).abs().mul_(t.outRel).add_(t.outAbs);
                  },
                  [](const at::Tensor& in, const RowOpArgs& a, const std::vector<at::Tensor>& refs, DType d) {
                    const NormTolerance t = RmsNormFamily::tolerance(d, in.size(1));
                    const double eps = a.scalars[0].value_or(RmsNormFamily::defaultEps(DType::Float32));
                    // ATen's relative rstd error of each row (Note [Norm harness bounds]); 0 where rstd is 0.
                    const at::Tensor relative = atenRmsRstdError(in, refs[1], eps)
                                                    .div_(refs[1].to(at::kFloat).abs())
                                                    .nan_to_num_(0.0, 0.0, 0.0)
                                                    .unsqueeze(1);
                    const at::Tensor ref = refs[0].to(at::kFloat).abs();
                    return ref.mul(relative.add(t.outRel)).add_(t.outAbs);
                  }},
      RowOpOutput{"rstd", true,
                  [](const at::Tensor& in, const std::vector<at::Tensor>& refs, DType d) {
                    const NormTolerance t = RmsNormFamily::tolerance(d, in.size(1));
                    return refs[1].to(at::kFloat).abs().mul_(t.statRel);
                  },
                  [](const at::Tensor& in, const RowOpArgs& a, const std::vector<at::Tensor>& refs, DType d) {
                    const NormTolerance t = RmsNormFamily::tolerance(d, in.size(1));
                    const double eps = a.scalars[0].value_or(RmsNormFamily::defaultEps(DType::Float32));
                    return refs[1].to(at::kFloat).abs().mul_(t.statRel).add_(atenRmsRstdError(in, refs[1], eps));
                  }},
  };
  spec.outputs[0].rowLocalBound = true;  // refs[0] of its rows
  spec.outputs[1].rowLocalBound = true;  // refs[1] of its rows
  spec.makeArgs = [hasWeight](int64_t, int64_t cols, DType d, at::Generator& gen) {
    RowOpArgs a;
    a.columns = {hasWeight ? drawColumn(cols, d, 1.0, gen) : at::Tensor()};
    a.scalars = {drawEps(gen, /*allowNone=*/true)};
    return a;
  };
  spec.references = [](const at::Tensor& in, const RowOpArgs& a) {
    auto [out, rstd] = at::cuda::_fused_rms_norm(in, {in.size(1)}, optionalOf(a.columns[0]), a.scalars[0]);
    return std::vector<at::Tensor>{out, rstd.reshape({in.size(0)})};
  };
  spec.references64 = [](const at::Tensor& in64, const RowOpArgs& a) {
    // ATen's default eps for float64 is DBL_EPSILON; the op under test used FLT_EPSILON.
    const double eps = a.scalars[0].value_or(RmsNormFamily::defaultEps(DType::Float32));
    const at::Tensor w = a.columns[0].defined() ? a.columns[0].to(at::kDouble) : at::Tensor();
    return std::get<0>(at::cuda::_fused_rms_norm(in64, {in64.size(1)}, optionalOf(w), eps));
  };
  spec.kernelArgs = [](const at::Tensor& in, const RowOpArgs& a, const std::vector<at::Tensor>& outs) {
    const DType d = in.scalar_type() == at::kFloat ? DType::Float32
                    : in.scalar_type() == at::kHalf ? DType::Float16
                                                    : DType::BFloat16;
    const float eps = a.scalars[0] ? static_cast<float>(*a.scalars[0]) : RmsNormFamily::defaultEps(d);
    KernelArgs args;
    args.pointer(in.const_data_ptr())
        .pointer(pointerOf(a.columns[0]))
        .pointer(outs[0].mutable_data_ptr())
        .pointer(outs[1].mutable_data_ptr())
        .int64(in.size(0))
        .int64(in.size(1))
        .float32(eps);
    return withWorkspace(args, outs, 2);
  };
  // Every candidate gets a workspace large enough for any point (a grid-split point's partials and
  // counter: Note [Split norm rows over a cooperative grid] in kernels/norm/rms_norm.cu); the
  // harness checks that it leaves the counter at 0. The other points ignore it.
  spec.workspaceFloats = [](int64_t rows, int64_t) { return RmsNormFamily::maxWorkspaceFloats(rows); };
  spec.workspaceZeroTail = 1;
  return spec;
}

RowOpSpec layerNormSpec(bool hasWeight, bool hasBias) {
  RowOpSpec spec;
  spec.op = "aten::native_layer_norm";
  spec.infinitiesDefined = false;
  // refs: out [rows, cols], mean [rows], rstd [rows] (Note [Norm harness bounds]).
  spec.outputs = {
      RowOpOutput{"out", false,
                  [](const at::Tensor& in, const std::vector<at::Tensor>& refs, DType d) {
                    const NormTolerance t = LayerNormFamily::tolerance(d, in.size(1));
                    at::Tensor carried = (refs[1].to(at::kFloat).abs() * refs[2].to(at::kFloat))
                                             .nan_to_num_(0.0, 0.0, 0.0)
                                             .mul_(t.statRel)
                                             .unsqueeze(1);
                    return refs[0].to(at::kFloat).abs().mul_(t.outRel).add_(t.outAbs).add_(carried);
                  }},
      normMeanOutput(&LayerNormFamily::tolerance),
      normRstdOutput(&LayerNormFamily::tolerance),
  };
  // out: refs[0], mean and rstd of its rows; mean: refs[1], and the input and rstd
  // of its rows (rowScale); rstd: refs[2], and the input of its rows (atenRstdError).
  for (RowOpOutput& o : spec.outputs) o.rowLocalBound = true;
  spec.makeArgs = [hasWeight, hasBias](int64_t, int64_t cols, DType d, at::Generator& gen) {
    RowOpArgs a;
    a.columns = {hasWeight ? drawColumn(cols, d, 1.0, gen) : at::Tensor(),
                 hasBias ? drawColumn(cols, d, 0.5, gen) : at::Tensor()};
    a.scalars = {drawEps(gen, /*allowNone=*/false)};
    return a;
  };
  spec.references = [](const at::Tensor& in, const RowOpArgs& a) {
    auto [out, mean, rstd] = at::cuda::native_layer_norm(in, {in.size(1)}, optionalOf(a.columns[0]),
                                                         optionalOf(a.columns[1]), *a.scalars[0]);
    return std::vector<at::Tensor>{out, mean.reshape({in.size(0)}), rstd.reshape({in.size(0)})};
  };
  spec.references64 = [](const at::Tensor& in64, const RowOpArgs& a) {
    const at::Tensor w = a.columns[0].defined() ? a.columns[0].to(at::kDouble) : at::Tensor();
    const at::Tensor b = a.columns[1].defined() ? a.columns[1].to(at::kDouble) : at::Tensor();
    return std::get<0>(at::cuda::native_layer_norm(in64, {in64.size(1)}, optionalOf(w), optionalOf(b), *a.scalars[0]));
  };
  spec.kernelArgs = [](const at::Tensor& in, const RowOpArgs& a, const std::vector<at::Tensor>& outs) {
    return layerNormKernelArgs(in, a, outs, static_cast<float>(*a.scalars[0]));
  };
  // As rms_norm's: a workspace for any point, the counter checked.
  spec.workspaceFloats = [](int64_t rows, int64_t) { return LayerNormFamily::maxWorkspaceFloats(rows); };
  spec.workspaceZeroTail = 1;
  return spec;
}

HarnessCandidate rmsNormCandidate(const kernels::RmsNormVariant& v, const NormParams& p, const std::string& cubin,
                                  bool colsSpecialized) {
  HarnessCandidate c = detail::familyCandidate<RmsNormFamily>(v, p, cubin, RmsNormFamily::kName);
  finishNormCandidate(c, v.rows, v.cols, p, colsSpecialized);
  return c;
}

HarnessCandidate layerNormCandidate(const kernels::LayerNormVariant& v, const NormParams& p,
                                    const std::string& cubin, bool colsSpecialized) {
  HarnessCandidate c = detail::familyCandidate<LayerNormFamily>(v, p, cubin, LayerNormFamily::kName);
  finishNormCandidate(c, v.rows, v.cols, p, colsSpecialized);
  return c;
}

FamilyTuneSpec rmsNormTuneSpec(const kernels::RmsNormVariant& v, int device, const TunerOptions& options) {
  HOTKERNEL_CHECK(RmsNormFamily::guardVariant(v), "rms_norm family cannot serve this variant");
  FamilyTuneSpec spec = normTuneSpecOf<RmsNormFamily>(v, device, "rms_norm.cu");
  spec.compileOptions = [v](const FamilyPoint& p) {
    return RmsNormFamily::compileOptions(v.dtype, toParams(p), v.hasWeight, v.cols);
  };
  spec.candidate = [v](const FamilyPoint& p, const std::string& cubin) {
    return rmsNormCandidate(v, toParams(p), cubin, /*colsSpecialized=*/true);  // compileOptions above
  };
  spec.harnessSpec = rmsNormSpec(v.hasWeight);
  finishNormTuneSpec(
      spec, kernels::rmsNormDescriptor(),
      [v, device](int64_t rows) {
        VariantKey key{static_cast<int32_t>(v.dtype), device, rows, v.cols};
        key.options = kernels::weightBiasOptions(v.hasWeight, false);
        return key;
      },
      device, options);
  return spec;
}

TuneOutcome tuneRmsNorm(const kernels::RmsNormVariant& v, int device, const TunerOptions& options) {
  HOTKERNEL_CHECK(RmsNormFamily::guardVariant(v), "rms_norm family cannot serve this variant");
  HOTKERNEL_CHECK(nvrtcAvailable(), "NVRTC is unavailable");
  TunerScope scope(device);
  return runNormSearch(rmsNormTuneSpec(v, device, options), device, options);
}

FamilyTuneSpec layerNormTuneSpec(const kernels::LayerNormVariant& v, int device, const TunerOptions& options) {
  HOTKERNEL_CHECK(LayerNormFamily::guardVariant(v), "layer_norm family cannot serve this variant");
  FamilyTuneSpec spec = normTuneSpecOf<LayerNormFamily>(v, device, "layer_norm.cu");
  spec.compileOptions = [v](const FamilyPoint& p) {
    return LayerNormFamily::compileOptions(v.dtype, toParams(p), v.hasWeight, v.hasBias, v.cols);
  };
  spec.candidate = [v](const FamilyPoint& p, const std::string& cubin) {
    return layerNormCandidate(v, toParams(p), cubin, /*colsSpecialized=*/true);
  };
  spec.harnessSpec = layerNormSpec(v.hasWeight, v.hasBias);
  finishNormTuneSpec(
      spec, kernels::layerNormDescriptor(),
      [v, device](int64_t rows) {
        VariantKey key{static_cast<int32_t>(v.dtype), device, rows, v.cols};
        key.options = kernels::weightBiasOptions(v.hasWeight, v.hasBias);
        return key;
      },
      device, options);
  return spec;
}

TuneOutcome tuneLayerNorm(const kernels::LayerNormVariant& v, int device, const TunerOptions& options) {
  HOTKERNEL_CHECK(LayerNormFamily::guardVariant(v), "layer_norm family cannot serve this variant");
  HOTKERNEL_CHECK(nvrtcAvailable(), "NVRTC is unavailable");
  TunerScope scope(device);
  return runNormSearch(layerNormTuneSpec(v, device, options), device, options);
}

}  // namespace hotkernel
