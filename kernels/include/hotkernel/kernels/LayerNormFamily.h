#pragma once
// The layer_norm kernel family: aten::native_layer_norm(input,
// normalized_shape, weight, bias, eps) -> (out, mean, rstd) on CUDA, over a
// contiguous [rows, cols] view (normalized dims folded into cols, leading dims
// into rows):
//   mean[r]   = mean_c(in[r, c])                                     float32
//   rstd[r]   = rsqrt(mean_c((in[r, c] - mean[r])^2) + eps)          float32 (biased variance)
//   out[r, c] = weight[c] * (rstd[r] * (in[r, c] - mean[r])) + bias[c]  the input's dtype
// weight and bias optional. The CUDA template is kernels/norm/layer_norm.cu;
// kernels/README.md describes the algorithm, the parameter space and what
// ATen returns (Note [What ATen's native_layer_norm returns] in
// src/LayerNormFamily.cpp).
//
// Guards follow Note [Three guards] (SoftmaxFamily.h). The caller (the op
// override) checks what the family cannot see: input contiguous, weight and
// bias contiguous with `cols` elements and the input's dtype (anything else:
// ATen), one device; it allocates out like the input and mean, rstd as
// float32 of shape leading dims + [1] * len(normalized_shape).

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "hotkernel/kernels/DType.h"
#include "hotkernel/kernels/NormCommon.h"

namespace hotkernel {
struct VariantKey;
}  // namespace hotkernel

namespace hotkernel::kernels {

// One variant of the op.
struct LayerNormVariant {
  DType dtype = DType::Float32;
  int64_t rows = 0;
  int64_t cols = 0;
  bool hasWeight = true;
  bool hasBias = true;
};

struct FamilyDescriptor;
// The variant a plan-table key stands for (its weight and bias options, Note [Variant options]).
LayerNormVariant layerNormVariantOf(const VariantKey& key);
// The descriptor of layer_norm (Note [Family descriptors]).
const FamilyDescriptor& layerNormDescriptor();

using LayerNormParams = NormParams;

class LayerNormFamily {
 public:
  static constexpr const char* kName = "layer_norm";  // also the embedded source's name
  // extern "C" __global__ void hk_layer_norm(const void* in, const void* weight /* nullable */,
  //                                          const void* bias /* nullable */, void* out, float* mean,
  //                                          float* rstd, long long rows, long long cols, float eps,
  //                                          float* partials, unsigned* counter /* both nullable */)
  // partials and counter: a grid-split point's workspace (workspaceFloats), else null.
  static constexpr const char* kKernelName = "hk_layer_norm";
  static constexpr int64_t kMaxCols = detail::kNormMaxCols;

  // Whether the family can serve the variant at all: a known dtype, rows >= 1,
  // 1 <= cols <= kMaxCols, rows * cols * elementSize without overflow.
  static bool guardVariant(const LayerNormVariant& v);

  // Whether `p` is one of allParameterPoints(v.dtype) and correct for v:
  // cols % vec == 0 when vec > 1, cols <= cluster * rowThreads * vec * items when register-resident,
  // rows * cluster <= 2^31 - 1, rows * split <= detail::kNormMaxGridCtas.
  static bool guardParams(const LayerNormVariant& v, const LayerNormParams& p);

  // Per-call guard: in, out non-null and aligned to requiredAlignment(); weight
  // (bias) likewise when v.hasWeight (v.hasBias), ignored otherwise; mean and
  // rstd non-null and 4-byte aligned. in == out is correct; other overlaps are
  // not (the caller refuses them).
  static bool guardPointers(const void* in, const void* weight, const void* bias, const void* out,
                            const float* mean, const float* rstd, const LayerNormVariant& v,
                            const LayerNormParams& p);

  // Bytes of alignment in, weight, bias and out need: vec * elementSize(dtype).
  static size_t requiredAlignment(DType dtype, const LayerNormParams& p);

  // Up to 12 points worth measuring for v, best guess first; every one passes
  // guardParams; always a streaming point and a vec == 1 point; split-row points first for few long
  // rows: cluster points when computeCapability (x10) >= 90, grid-split points when >= 70 (Note
  // [Norm split-row points] in src/NormCommon.cpp). Empty iff !guardVariant(v). (Whether the GPU
  // runs them is the caller's: minComputeCapability.)
  static std::vector<LayerNormParams> parameterSpace(const LayerNormVariant& v, int computeCapability = 0);

  // Every point the family can produce for `dtype` (the guard's whitelist).
  static std::vector<LayerNormParams> allParameterPoints(DType dtype);

  // The CUDA template (kernelSource(kName).text).
  static std::string source();

  // -DHK_DTYPE=, -DHK_THREADS=, -DHK_ROWS=, -DHK_VEC=, -DHK_ITEMS=, -DHK_HAS_WEIGHT=, -DHK_HAS_BIAS=,
  // and -DHK_COLS= when cols > 0 (RmsNormFamily::compileOptions).
  // Throws Error if `p` is not a point for `dtype` or cols is out of range.
  static std::vector<std::string> compileOptions(DType dtype, const LayerNormParams& p, bool hasWeight,
                                                 bool hasBias, int64_t cols = 0);

  // One CTA of `threads` per `rowsPerCta` rows, or `cluster` (`split`) CTAs per row, covering the rows
  // (the guards refuse grids of more than 2^31 - 1 CTAs); cooperative for a grid-split point. No
  // dynamic shared memory.
  static LaunchGeometry launchGeometry(const LayerNormVariant& v, const LayerNormParams& p);

  // The float32 workspace a launch of `p` takes (0: none; partials null, counter null): for a
  // grid-split point a (mean, M2) pair a CTA (2 * rows * split floats), then the counter (its last
  // float, 0 at launch, left 0; StreamWorkspaces). maxWorkspaceFloats(rows) covers every point.
  static int64_t workspaceFloats(const LayerNormVariant& v, const LayerNormParams& p);
  static int64_t maxWorkspaceFloats(int64_t rows);

  // Ideal DRAM traffic: x read once, out written once, weight and bias read
  // once each, mean and rstd written (8 bytes a row).
  static double bytesMoved(const LayerNormVariant& v);

  // How far from ATen's native_layer_norm results may be (the one table; Note
  // [Layer norm tolerance] in src/LayerNormFamily.cpp). With
  // s(cols) = 4e-6 * max(1, sqrt(cols / 16384)):
  //   dtype      outRel          outAbs   statRel (mean, rstd)
  //   float32    s               4 s      s
  //   float16    2^-10 + s       4 s      s
  //   bfloat16   2^-7 + s        4 s      s
  static NormTolerance tolerance(DType dtype, int64_t cols);
};

}  // namespace hotkernel::kernels
