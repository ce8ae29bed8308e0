#include "hotkernel/kernels/LayerNormFamily.h"

#include <algorithm>
#include <cmath>

#include "hotkernel/kernels/KernelSource.h"
#include "hotkernel/runtime/Check.h"

// Note [What ATen's native_layer_norm returns]
// Read in aten/src/ATen/native/cuda/layer_norm_kernel.cu of a recent main
// branch (a line-numbered copy: layer_norm_cuda at lines 1683-1734,
// LayerNormKernelImplInternal 1083-1128, the vectorized kernel 241-318) and in
// an older one (commit 0005c538, layer_norm_cuda the same), and the reference
// torch 2.11 ships (torch/_refs/__init__.py, native_layer_norm and _normalize):
//  - mean and rstd: at::empty({M}, dtype = toAccumulateType(input, is_cuda=true)),
//    i.e. float32 for float32, float16 and bfloat16 inputs (on CUDA; the CPU
//    kernel returns the input's dtype, which the reference mirrors with
//    `if input.device.type in ["cpu", "mtia"]`), then viewed as leading dims +
//    [1] * len(normalized_shape) (keepdim).
//  - out: empty_like(input) (contiguous), the input's dtype.
//  - eps is a required double, cast to float.
//  - math, vectorized path (N % 4 == 0, N <= 2^24, x, out, gamma, beta aligned
//    to 4 * sizeof(T)): Welford in fp32 per thread, merged by warp shuffles and
//    a tree over warps; var = M2 / float(N) (biased), rstd = rsqrt(var + eps)
//    (rsqrtf); out = gamma * (rstd * (x - mean)) + beta in fp32, rounded once.
//    Otherwise RowwiseMomentsCUDAKernel (Welford) and LayerNormForwardCUDAKernel
//    compute (x - mean) * rstd * gamma + beta: the same quantity, other rounding.
//  - gamma and beta are read as the input's type (const_data_ptr<T>).

namespace hotkernel::kernels {
namespace {

// Note [Layer norm tolerance]
// As Note [Rms norm tolerance] (src/RmsNormFamily.cpp), with two differences.
// The statistics: the mean's error is relative to the row's scale, not to the
// mean (a sum of signed terms: |error| <= k * 2^-24 * sum |x|), hence
// NormTolerance::meanWithin's |ref| + 1 / rstd; rstd's error is that of a sum of
// squared deviations (positive terms) plus the mean's error squared-away.
// The output: x - mean cancels, so an error e in the mean becomes an absolute
// error of |weight| * rstd * e in the output, rstd * e ~ s * (1 + |mean| / std):
// outAbs = 4 s allows rows whose |mean| is up to ~3 std with weights up to ~1
// (the harness's random weights). Rows with |mean| >> std (large offsets)
// differ from ATen by more than this in float32; the 16-bit types round it away
// unless the output itself is near zero. Not yet checked on a GPU.
double noise(int64_t cols) {
  return 4e-6 * std::max(1.0, std::sqrt(static_cast<double>(std::max<int64_t>(cols, 1)) / 16384.0));
}

}  // namespace

bool LayerNormFamily::guardVariant(const LayerNormVariant& v) {
  return detail::normGuardShape(v.dtype, v.rows, v.cols);
}

bool LayerNormFamily::guardParams(const LayerNormVariant& v, const LayerNormParams& p) {
  return detail::normGuardParams(v.dtype, v.rows, v.cols, p);
}

size_t LayerNormFamily::requiredAlignment(DType dtype, const LayerNormParams& p) {
  return static_cast<size_t>(std::max(p.vec, 1)) * elementSize(dtype);
}

bool LayerNormFamily::guardPointers(const void* in, const void* weight, const void* bias, const void* out,
                                    const float* mean, const float* rstd, const LayerNormVariant& v,
                                    const LayerNormParams& p) {
  if (p.vec < 1) return false;
  const size_t align = requiredAlignment(v.dtype, p);
  if (!detail::normAligned(in, align) || !detail::normAligned(out, align)) return false;
  if (v.hasWeight && !detail::normAligned(weight, align)) return false;
  if (v.hasBias && !detail::normAligned(bias, align)) return false;
  return detail::normAligned(mean, alignof(float)) && detail::normAligned(rstd, alignof(float));
}

std::vector<LayerNormParams> LayerNormFamily::parameterSpace(const LayerNormVariant& v, int computeCapability) {
  return detail::normParameterSpace(v.dtype, v.rows, v.cols, computeCapability);
}

std::vector<LayerNormParams> LayerNormFamily::allParameterPoints(DType dtype) {
  return detail::normAllPoints(dtype);
}

std::string LayerNormFamily::source() { return expandPrelude(kernelSource(kName).text); }

std::vector<std::string> LayerNormFamily::compileOptions(DType dtype, const LayerNormParams& p, bool hasWeight,
                                                         bool hasBias, int64_t cols) {
  HOTKERNEL_CHECK(detail::normIsPoint(dtype, p), "not a layer_norm parameter point for ",
                  dtypeName(dtype), ": ", p.describe());
  std::vector<std::string> options = detail::normCompileOptions(dtype, p);
  options.push_back(std::string("-DHK_HAS_WEIGHT=") + (hasWeight ? "1" : "0"));
  options.push_back(std::string("-DHK_HAS_BIAS=") + (hasBias ? "1" : "0"));
  detail::normAppendCols(options, cols);
  return options;
}

LaunchGeometry LayerNormFamily::launchGeometry(const LayerNormVariant& v, const LayerNormParams& p) {
  return detail::normLaunchGeometry(v.rows, p);
}

int64_t LayerNormFamily::workspaceFloats(const LayerNormVariant& v, const LayerNormParams& p) {
  return detail::normWorkspaceFloats(v.rows, p, 2);
}

int64_t LayerNormFamily::maxWorkspaceFloats(int64_t rows) { return detail::normMaxWorkspaceFloats(rows, 2); }

double LayerNormFamily::bytesMoved(const LayerNormVariant& v) {
  const double e = static_cast<double>(elementSize(v.dtype));
  const double rows = static_cast<double>(v.rows), cols = static_cast<double>(v.cols);
  return 2.0 * rows * cols * e + (v.hasWeight ? cols * e : 0.0) + (v.hasBias ? cols * e : 0.0) + rows * 8.0;
}

NormTolerance LayerNormFamily::tolerance(DType dtype, int64_t cols) {
  const double s = noise(cols);
  switch (dtype) {
    case DType::Float32:
      return {4 * s, s, s};
    case DType::Float16:
      return {4 * s, 1.0 / 1024.0 + s, s};
    case DType::BFloat16:
      return {4 * s, 1.0 / 128.0 + s, s};
  }
  HOTKERNEL_INTERNAL_ASSERT(false, "unknown DType ", static_cast<int>(dtype));
}

}  // namespace hotkernel::kernels
