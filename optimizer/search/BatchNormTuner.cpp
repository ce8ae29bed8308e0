#include "hotkernel/optimizer/BatchNormTuner.h"

#include <ATen/ATen.h>
#include <ATen/ops/native_batch_norm_cuda_dispatch.h>

#include <algorithm>
#include <cmath>

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

// Note [Near-max inputs of a batch norm]
// ATen's batch norm statistics kernel merges its threads' means as
// (n * mean + n' * mean') / (n + n') and their squared deviations as
// (mean - mean')^2 * n * n' / (n + n'), in float32: with the stability
// stage's default "near max" inputs (a quarter of the dtype's max) those
// products overflow, and the mean and invstd it returns are NaN or infinite
// depending on its thread layout, where the row's true statistics are finite
// (layer_norm's kernel, and ATen's layer_norm, return them). ATen's result
// is no reference there, so the check asks for magnitudes at which no
// float32 product or square of the statistics overflows: sqrt(FLT_MAX /
// (4 cols)), or the dtype's quarter max when smaller (float16). Large values
// are still checked (about 1e17 for a row of 4,608 elements); the other
// stress inputs are layer_norm's.
double batchNormNearMax(kernels::DType d, int64_t cols) {
  const double quarterMax = (d == kernels::DType::Float16 ? 65504.0 : 3.3895313892515355e38) / 4.0;
  const double noOverflow = std::sqrt(3.4028234663852886e38 / (4.0 * static_cast<double>(std::max<int64_t>(cols, 1))));
  return std::min(quarterMax, noOverflow);
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
  spec.nearMaxMagnitude = &batchNormNearMax;  // Note [Near-max inputs of a batch norm]
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
