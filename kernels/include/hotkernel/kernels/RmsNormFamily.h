#pragma once
// The rms_norm kernel family: aten::_fused_rms_norm(input, normalized_shape,
// weight, eps) -> (out, rstd) on CUDA, over a contiguous [rows, cols] view
// (normalized dims folded into cols, leading dims into rows):
//   rstd[r]   = rsqrt(mean_c(in[r, c]^2) + eps)   float32, fp32 accumulation
//   out[r, c] = weight[c] * (rstd[r] * in[r, c])  the input's dtype; weight optional
// The CUDA template is kernels/norm/rms_norm.cu; kernels/README.md describes
// the algorithm, the parameter space and what ATen returns (Note [What ATen's
// _fused_rms_norm returns] in src/RmsNormFamily.cpp).
//
// Guards follow Note [Three guards] (SoftmaxFamily.h). The caller (the op
// override) checks what the family cannot see: input contiguous, weight
// contiguous with `cols` elements and the input's dtype (anything else: ATen),
// one device; it allocates out like the input and rstd as float32 of shape
// leading dims + [1] * len(normalized_shape), and resolves eps (defaultEps).

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
struct RmsNormVariant {
  DType dtype = DType::Float32;
  int64_t rows = 0;
  int64_t cols = 0;
  bool hasWeight = true;
};

struct FamilyDescriptor;
// The variant a plan-table key stands for (its weight option, Note [Variant options]).
RmsNormVariant rmsNormVariantOf(const VariantKey& key);
// The descriptor of rms_norm (Note [Family descriptors]).
const FamilyDescriptor& rmsNormDescriptor();

using RmsNormParams = NormParams;

class RmsNormFamily {
 public:
  static constexpr const char* kName = "rms_norm";  // also the embedded source's name
  // extern "C" __global__ void hk_rms_norm(const void* in, const void* weight /* nullable */, void* out,
  //                                        float* rstd, long long rows, long long cols, float eps,
  //                                        float* partials, unsigned* counter /* both nullable */)
  // partials and counter: a grid-split point's workspace (workspaceFloats), else null.
  static constexpr const char* kKernelName = "hk_rms_norm";
  static constexpr int64_t kMaxCols = detail::kNormMaxCols;

  // ATen's eps when the op's eps is None: std::numeric_limits<float>::epsilon()
  // (2^-23) for float32, float16 and bfloat16 alike (their opmath type is
  // float), not torch.finfo(input.dtype).eps.
  static float defaultEps(DType dtype);

  // Whether the family can serve the variant at all: a known dtype, rows >= 1,
  // 1 <= cols <= kMaxCols, rows * cols * elementSize without overflow.
  static bool guardVariant(const RmsNormVariant& v);

  // Whether `p` is one of allParameterPoints(v.dtype) and correct for v:
  // cols % vec == 0 when vec > 1, cols <= cluster * rowThreads * vec * items when register-resident,
  // rows * cluster <= 2^31 - 1, rows * split <= detail::kNormMaxGridCtas.
  static bool guardParams(const RmsNormVariant& v, const RmsNormParams& p);

  // Per-call guard: in, out non-null and aligned to requiredAlignment(); weight
  // likewise when v.hasWeight (and ignored otherwise); rstd non-null and
  // 4-byte aligned. in == out is correct (every element is read before the
  // thread that owns it writes it); other overlaps are not (the caller refuses them).
  static bool guardPointers(const void* in, const void* weight, const void* out, const float* rstd,
                            const RmsNormVariant& v, const RmsNormParams& p);

  // Bytes of alignment in, weight and out need: vec * elementSize(dtype).
  static size_t requiredAlignment(DType dtype, const RmsNormParams& p);

  // Up to 12 points worth measuring for v, best guess first; every one passes
  // guardParams; always a streaming point and a vec == 1 point; split-row points first for few long
  // rows: cluster points when computeCapability (x10) >= 90, grid-split points when >= 70 (Note
  // [Norm split-row points] in src/NormCommon.cpp). Empty iff !guardVariant(v). (Whether the GPU
  // runs them is the caller's: minComputeCapability.)
  static std::vector<RmsNormParams> parameterSpace(const RmsNormVariant& v, int computeCapability = 0);

  // Every point the family can produce for `dtype` (the guard's whitelist).
  static std::vector<RmsNormParams> allParameterPoints(DType dtype);

  // The CUDA template (kernelSource(kName).text).
  static std::string source();

  // -DHK_DTYPE=, -DHK_THREADS=, -DHK_ROWS=, -DHK_VEC=, -DHK_ITEMS=, -DHK_HAS_WEIGHT=, and
  // -DHK_COLS= when cols > 0: a cubin for that column count only (Note [Specialized
  // columns] in kernels/norm/rms_norm.cu; the optimizer passes the variant's).
  // Throws Error if `p` is not a point for `dtype` or cols is out of range.
  static std::vector<std::string> compileOptions(DType dtype, const RmsNormParams& p, bool hasWeight,
                                                 int64_t cols = 0);

  // One CTA of `threads` per `rowsPerCta` rows, or `cluster` (`split`) CTAs per row, covering the rows
  // (the guards refuse grids of more than 2^31 - 1 CTAs); cooperative for a grid-split point. No
  // dynamic shared memory.
  static LaunchGeometry launchGeometry(const RmsNormVariant& v, const RmsNormParams& p);

  // The float32 workspace a launch of `p` takes (0: none; partials null, counter null): for a
  // grid-split point rows * split partial sums, then the counter (its last float, 0 at launch,
  // left 0; StreamWorkspaces). maxWorkspaceFloats(rows) covers every point on `rows` rows.
  static int64_t workspaceFloats(const RmsNormVariant& v, const RmsNormParams& p);
  static int64_t maxWorkspaceFloats(int64_t rows);

  // Ideal DRAM traffic: x read once, out written once, the weight read once,
  // rstd written (4 bytes a row).
  static double bytesMoved(const RmsNormVariant& v);

  // How far from ATen's _fused_rms_norm results may be (the one table; Note
  // [Rms norm tolerance] in src/RmsNormFamily.cpp). With
  // s(cols) = 4e-6 * max(1, sqrt(cols / 16384)):
  //   dtype      outRel          outAbs   statRel (rstd)
  //   float32    s               s        s
  //   float16    2^-10 + s       s        s
  //   bfloat16   2^-7 + s        s        s
  static NormTolerance tolerance(DType dtype, int64_t cols);
};

}  // namespace hotkernel::kernels
