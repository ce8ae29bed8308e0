#include "hotkernel/kernels/GroupNormFamily.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "hotkernel/kernels/KernelSource.h"
#include "hotkernel/kernels/LayerNormFamily.h"
#include "hotkernel/kernels/Rounding.h"
#include "hotkernel/runtime/Check.h"

// Note [What ATen's native_group_norm returns]
// Read in aten/src/ATen/native/group_norm.cpp and cuda/group_norm_kernel.cu;
// the kernels' signatures were checked against the symbols of torch 2.11's
// libtorch_cuda.so (RowwiseMomentsCUDAKernel<T>(N, T eps, const T* X, T* mean,
// T* rstd), ComputeFusedParamsCUDAKernel<T>(N, C, group, const T* mean, const T*
// rstd, const T* gamma, const T* beta, acc* a, acc* b)):
//  - Y = empty_like(X contiguous); mean and rstd at::empty({N, group}) of
//    param_scalar_type(X, mixed_type): X's dtype unless X is 16-bit and weight
//    or bias float32 (mixed type; the override leaves those to ATen).
//  - eps is cast to T; the moments kernel runs Welford in float over each of
//    the N * G rows of D * HxW elements, var = M2 / n, rstd = rsqrt(var + eps),
//    and stores both as T.
//  - HxW > 1 with weight or bias: a[n, c] = rstd * gamma[c] (rstd alone without
//    gamma), b[n, c] = -a * mean + beta[c] (0 without beta), all in float from
//    the stored T statistics, then Y = a * x + b; without either, Y = (x - mean)
//    * rstd. HxW == 1 (GroupNorm1dForward) computes (x - mean) * rstd * gamma +
//    beta: the family refuses it.
//  - X empty: ATen returns early (N == 0): the override leaves empty inputs to it.

namespace hotkernel::kernels {
namespace {

// Note [Group norm tolerance]
// The output's bound is layer_norm's (Note [Layer norm tolerance]): the same
// float32 statistics and the same affine, and ATen's own rounding charged by
// the harness. The statistics are rounded to the dtype on both sides; where the
// two float32 values straddle a rounding boundary they differ by one unit in
// the last place, the unit layer_norm's output bound already holds (outRel =
// the dtype's unit + s; s alone for float32), so statRel takes outRel, and the
// harness carries that unit into the output's bound (Note [Group norm harness
// bounds] in optimizer/search/GroupNormTuner.cpp).

bool hwFits(const GroupNormVariant& v, int vec) { return vec >= 1 && v.hw % vec == 0; }

// Note [Group norm split rows]
// A group norm has few rows (N * G: 64 for a batch of two at 32 groups) of a
// group's channels times the spatial extent, tens of thousands of elements in
// the layers of a diffusion UNet: a CTA a row leaves most SMs idle there well
// below layer_norm's split threshold. The space starts with split-row points
// from rows of this many elements on (the norm families' ranking otherwise).
constexpr int64_t kGroupSplitMinCols = 8192;

}  // namespace

bool GroupNormFamily::guardVariant(const GroupNormVariant& v) {
  if (!detail::normGuardShape(v.dtype, v.rows, v.cols)) return false;
  // Any rows: row r is group r % G (a call's rows are N * G; the harness also runs other counts).
  if (v.groups < 1) return false;
  return v.hw >= 2 && v.cols % v.hw == 0;
}

bool GroupNormFamily::guardParams(const GroupNormVariant& v, const NormParams& p) {
  return guardVariant(v) && hwFits(v, p.vec) && detail::normGuardParams(v.dtype, v.rows, v.cols, p);
}

size_t GroupNormFamily::requiredAlignment(DType dtype, const NormParams& p) {
  return static_cast<size_t>(std::max(p.vec, 1)) * elementSize(dtype);
}

bool GroupNormFamily::guardPointers(const void* in, const void* weight, const void* bias, const void* out,
                                    const void* mean, const void* rstd, const GroupNormVariant& v,
                                    const NormParams& p) {
  if (p.vec < 1) return false;
  const size_t align = requiredAlignment(v.dtype, p);
  const size_t element = elementSize(v.dtype);
  if (!detail::normAligned(in, align) || !detail::normAligned(out, align)) return false;
  if (v.hasWeight && !detail::normAligned(weight, element)) return false;
  if (v.hasBias && !detail::normAligned(bias, element)) return false;
  return detail::normAligned(mean, element) && detail::normAligned(rstd, element);
}

std::vector<NormParams> GroupNormFamily::parameterSpace(const GroupNormVariant& v, int computeCapability) {
  if (!guardVariant(v)) return {};
  std::vector<NormParams> out;
  for (const NormParams& p : detail::normParameterSpace(v.dtype, v.rows, v.cols, computeCapability, kGroupSplitMinCols)) {
    if (hwFits(v, p.vec)) out.push_back(p);
  }
  return out;
}

std::vector<NormParams> GroupNormFamily::allParameterPoints(DType dtype) { return detail::normAllPoints(dtype); }

std::string GroupNormFamily::source() { return LayerNormFamily::source(); }

std::vector<std::string> GroupNormFamily::compileOptions(const GroupNormVariant& v, const NormParams& p) {
  HOTKERNEL_CHECK(detail::normIsPoint(v.dtype, p), "not a group_norm parameter point for ", dtypeName(v.dtype), ": ",
                  p.describe());
  HOTKERNEL_CHECK(guardVariant(v), "not a group_norm variant: rows=", v.rows, " cols=", v.cols,
                  " groups=", v.groups, " hw=", v.hw);
  HOTKERNEL_CHECK(hwFits(v, p.vec), "group_norm's HxW ", v.hw, " is not a multiple of vec ", p.vec);
  std::vector<std::string> options = detail::normCompileOptions(v.dtype, p);
  options.push_back(std::string("-DHK_HAS_WEIGHT=") + (v.hasWeight ? "1" : "0"));
  options.push_back(std::string("-DHK_HAS_BIAS=") + (v.hasBias ? "1" : "0"));
  detail::normAppendCols(options, v.cols);
  options.push_back("-DHK_GROUPS=" + std::to_string(v.groups));
  options.push_back("-DHK_GROUP_HW=" + std::to_string(v.hw));
  return options;
}

LaunchGeometry GroupNormFamily::launchGeometry(const GroupNormVariant& v, const NormParams& p) {
  return detail::normLaunchGeometry(v.rows, p);
}

int64_t GroupNormFamily::workspaceFloats(const GroupNormVariant& v, const NormParams& p) {
  return detail::normWorkspaceFloats(v.rows, p, 2);
}

int64_t GroupNormFamily::maxWorkspaceFloats(int64_t rows) { return detail::normMaxWorkspaceFloats(rows, 2); }

double GroupNormFamily::bytesMoved(const GroupNormVariant& v) {
  const double e = static_cast<double>(elementSize(v.dtype));
  const double rows = static_cast<double>(v.rows), cols = static_cast<double>(v.cols);
  const double channels = static_cast<double>(v.groups * v.channelsPerGroup());
  return 2.0 * rows * cols * e + (v.hasWeight ? channels * e : 0.0) + (v.hasBias ? channels * e : 0.0) +
         rows * 2.0 * e;
}

float GroupNormFamily::kernelEps(DType dtype, double eps) { return roundTo(dtype, static_cast<float>(eps)); }

NormTolerance GroupNormFamily::tolerance(DType dtype, int64_t cols) {
  NormTolerance t = LayerNormFamily::tolerance(dtype, cols);
  t.statRel = t.outRel;  // Note [Group norm tolerance]
  return t;
}

}  // namespace hotkernel::kernels
