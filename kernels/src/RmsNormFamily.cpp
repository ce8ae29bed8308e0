#include "hotkernel/kernels/RmsNormFamily.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "hotkernel/kernels/KernelSource.h"
#include "hotkernel/runtime/Check.h"

// Note [What ATen's _fused_rms_norm returns]
// Read in aten/src/ATen/native/cuda/layer_norm_kernel.cu of a recent main
// branch (found through a line-numbered copy: _fused_rms_norm_cuda at lines
// 1812-1862, RmsNormKernelImpl 1152-1172, the vectorized kernel 241-318,
// RowwiseMomentsCUDAKernel 51-91), and the decomposition torch 2.11 ships
// (torch/_decomp/decompositions.py, _fused_rms_norm, lines 1807-1859), which agree:
//  - eps None -> std::numeric_limits<float>::epsilon() when the opmath type is
//    float, i.e. for float32, float16 and bfloat16 alike (double epsilon for
//    float64); eps is then cast to float.
//  - rstd: at::empty({M}, dtype = toAccumulateType(input, is_cuda=true)),
//    i.e. float32 for all three dtypes, then viewed as leading dims +
//    [1] * len(normalized_shape) (keepdim).
//  - out: empty_like(input) (contiguous), the input's dtype.
//  - math, vectorized path (LayerNormKernelImplInternal lines 1107-1117: N % 4
//    == 0, N <= 2^24, x, out, gamma aligned to 4 * sizeof(T)): 128 threads a
//    row, each summing x*x of its 4-element vectors in fp32, then a warp and
//    block tree; sigma2 = sum / float(N), rstd = rsqrt(sigma2 + eps) (rsqrtf),
//    out = gamma * (rstd * x) in fp32, rounded once. Otherwise
//    RowwiseMomentsCUDAKernel (Welford, 512 threads) computes
//    rsqrt(var + mean^2 + eps): the same quantity, other rounding.
//  - the CUDA kernel reads gamma as the input's type (const_data_ptr<T>), so a
//    weight of another dtype never reaches it; the guards here refuse it too.

namespace hotkernel::kernels {
namespace {

// Note [Rms norm tolerance]
// Both sides compute in fp32 from inputs that fp32 holds exactly. rstd differs
// by the summation order of the squares (positive terms: a sequential chain of
// k terms errs by at most k * 2^-24 relative, typically sqrt(k) * 2^-24; ATen's
// chains are cols / 128 long, ours items * vec plus a tree) and by rsqrtf's
// 2 ulp on slightly different arguments; the square root halves the sum's
// error. s(cols) = 4e-6 * max(1, sqrt(cols / 16384)) bounds that with margin
// (at 16384 columns ATen's worst case is 128 * 6e-8 / 2 = 3.8e-6, typical
// cases 10x less). The output adds two fp32 roundings (inside s), then the
// rounding to the output type: both sides' fp32 values are within s of each
// other, far below one 16-bit ulp, so they round at most one step apart, and
// one ulp of float16 (bfloat16) is at most 2^-10 (2^-7) of the value. outAbs
// = s covers exact zeros and denormals. Not yet checked on a GPU.
double noise(int64_t cols) {
  return 4e-6 * std::max(1.0, std::sqrt(static_cast<double>(std::max<int64_t>(cols, 1)) / 16384.0));
}

}  // namespace

float RmsNormFamily::defaultEps(DType /*dtype*/) { return std::numeric_limits<float>::epsilon(); }

bool RmsNormFamily::guardVariant(const RmsNormVariant& v) { return detail::normGuardShape(v.dtype, v.rows, v.cols); }

bool RmsNormFamily::guardParams(const RmsNormVariant& v, const RmsNormParams& p) {
  return detail::normGuardParams(v.dtype, v.rows, v.cols, p);
}

size_t RmsNormFamily::requiredAlignment(DType dtype, const RmsNormParams& p) {
  return static_cast<size_t>(std::max(p.vec, 1)) * elementSize(dtype);
}

bool RmsNormFamily::guardPointers(const void* in, const void* weight, const void* out, const float* rstd,
                                  const RmsNormVariant& v, const RmsNormParams& p) {
  if (p.vec < 1) return false;
  const size_t align = requiredAlignment(v.dtype, p);
  if (!detail::normAligned(in, align) || !detail::normAligned(out, align)) return false;
  if (v.hasWeight && !detail::normAligned(weight, align)) return false;
  return detail::normAligned(rstd, alignof(float));
}

std::vector<RmsNormParams> RmsNormFamily::parameterSpace(const RmsNormVariant& v, int computeCapability) {
  return detail::normParameterSpace(v.dtype, v.rows, v.cols, computeCapability);
}

std::vector<RmsNormParams> RmsNormFamily::allParameterPoints(DType dtype) {
  return detail::normAllPoints(dtype);
}

std::string RmsNormFamily::source() { return expandPrelude(kernelSource(kName).text); }

std::vector<std::string> RmsNormFamily::compileOptions(DType dtype, const RmsNormParams& p, bool hasWeight,
                                                       int64_t cols) {
  HOTKERNEL_CHECK(detail::normIsPoint(dtype, p), "not an rms_norm parameter point for ",
                  dtypeName(dtype), ": ", p.describe());
  std::vector<std::string> options = detail::normCompileOptions(dtype, p);
  options.push_back(std::string("-DHK_HAS_WEIGHT=") + (hasWeight ? "1" : "0"));
  detail::normAppendCols(options, cols);
  return options;
}

LaunchGeometry RmsNormFamily::launchGeometry(const RmsNormVariant& v, const RmsNormParams& p) {
  return detail::normLaunchGeometry(v.rows, p);
}

int64_t RmsNormFamily::workspaceFloats(const RmsNormVariant& v, const RmsNormParams& p) {
  return detail::normWorkspaceFloats(v.rows, p, 1);
}

int64_t RmsNormFamily::maxWorkspaceFloats(int64_t rows) { return detail::normMaxWorkspaceFloats(rows, 1); }

double RmsNormFamily::bytesMoved(const RmsNormVariant& v) {
  const double e = static_cast<double>(elementSize(v.dtype));
  const double rows = static_cast<double>(v.rows), cols = static_cast<double>(v.cols);
  return 2.0 * rows * cols * e + (v.hasWeight ? cols * e : 0.0) + rows * 4.0;
}

NormTolerance RmsNormFamily::tolerance(DType dtype, int64_t cols) {
  const double s = noise(cols);
  switch (dtype) {
    case DType::Float32:
      return {s, s, s};
    case DType::Float16:
      return {s, 1.0 / 1024.0 + s, s};
    case DType::BFloat16:
      return {s, 1.0 / 128.0 + s, s};
  }
  HOTKERNEL_INTERNAL_ASSERT(false, "unknown DType ", static_cast<int>(dtype));
}

}  // namespace hotkernel::kernels
