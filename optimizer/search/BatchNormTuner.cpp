#include "hotkernel/optimizer/BatchNormTuner.h"

#include <ATen/ATen.h>
#include <ATen/ops/native_batch_norm_cuda_dispatch.h>

#include "FamilyCandidate.h"
#include "NormTuning.h"
#include "hotkernel/kernels/FamilyDescriptor.h"
#include "hotkernel/optimizer/NormTuner.h"
#include "hotkernel/optimizer/TunerScope.h"
#include "hotkernel/runtime/Check.h"
#include "hotkernel/runtime/Nvrtc.h"

namespace hotkernel {
namespace {

using kernels::LayerNormFamily;
using namespace norm_tuning;

// ATen's native_batch_norm of the [rows, cols] input as one sample of `rows` channels.
std::vector<at::Tensor> batchNormRows(const at::Tensor& in, double eps) {
  const int64_t rows = in.size(0), cols = in.size(1);
  auto [out, mean, invstd] = at::cuda::native_batch_norm(in.reshape({1, rows, cols}), std::nullopt, std::nullopt,
                                                         std::nullopt, std::nullopt, /*training=*/true,
                                                         /*momentum=*/0.0, eps);
  return {out.reshape({rows, cols}), mean, invstd};
}

bool validVariant(const kernels::LayerNormVariant& v) {
  return !v.hasWeight && !v.hasBias && LayerNormFamily::guardVariant(v);
}

}  // namespace

RowOpSpec batchNormSpec() {
  // layer_norm's outputs, bounds, draws (no weight, no bias) and kernel ABI; ATen's batch norm as the reference.
  RowOpSpec spec = layerNormSpec(/*hasWeight=*/false, /*hasBias=*/false);
  spec.op = "aten::native_batch_norm";
  spec.references = [](const at::Tensor& in, const RowOpArgs& a) { return batchNormRows(in, *a.scalars[0]); };
  spec.references64 = [](const at::Tensor& in64, const RowOpArgs& a) { return batchNormRows(in64, *a.scalars[0])[0]; };
  return spec;
}

FamilyTuneSpec batchNormTuneSpec(const kernels::LayerNormVariant& v, int device, const TunerOptions& options) {
  HOTKERNEL_CHECK(validVariant(v), "batch_norm family cannot serve this variant");
  FamilyTuneSpec spec = normTuneSpecOf<LayerNormFamily>(v, device, "layer_norm.cu");
  spec.family = kernels::kBatchNormName;
  spec.compileOptions = [v](const FamilyPoint& p) {
    return LayerNormFamily::compileOptions(v.dtype, toParams(p), false, false, v.cols);
  };
  spec.candidate = [v](const FamilyPoint& p, const std::string& cubin) {
    HarnessCandidate c = detail::familyCandidate<LayerNormFamily>(v, toParams(p), cubin, kernels::kBatchNormName);
    finishNormCandidate(c, v.rows, v.cols, toParams(p), /*colsSpecialized=*/true);  // compileOptions above
    return c;
  };
  spec.harnessSpec = batchNormSpec();
  finishNormTuneSpec(
      spec, kernels::batchNormDescriptor(),
      [v, device](int64_t rows) { return VariantKey{static_cast<int32_t>(v.dtype), device, rows, v.cols}; }, device,
      options);
  return spec;
}

TuneOutcome tuneBatchNorm(const kernels::LayerNormVariant& v, int device, const TunerOptions& options) {
  HOTKERNEL_CHECK(validVariant(v), "batch_norm family cannot serve this variant");
  HOTKERNEL_CHECK(nvrtcAvailable(), "NVRTC is unavailable");
  TunerScope scope(device);
  return runNormSearch(batchNormTuneSpec(v, device, options), device, options);
}

}  // namespace hotkernel
