#pragma once
// The group_norm kernel family: aten::native_group_norm(X, weight, bias, N, C,
// HxW, group, eps) -> (out, mean, rstd) on CUDA for a contiguous X of N * C *
// HxW elements, as rows = N * G rows of cols = (C / G) * HxW (a group's
// channels are contiguous):
//   mean[r]   = mean_c(x[r, c])                       rounded to the input's dtype
//   rstd[r]   = rsqrt(var_c(x[r, c]) + eps)           rounded to the input's dtype (biased variance,
//                                                      eps rounded to the dtype first)
//   out[r, c] = a * x[r, c] + b, a = rstd[r] * w[ch], b = -a * mean[r] + bias[ch],
//               ch = (r % G) * (C / G) + c / HxW        the input's dtype; (x - mean) * rstd
//                                                       without weight and bias
// The CUDA template is layer_norm.cu in group mode (Note [Group norm rows]
// there); the parameter space, launch geometry and workspace are the norm
// families' (NormCommon.h). What ATen returns: Note [What ATen's
// native_group_norm returns] in src/GroupNormFamily.cpp.
//
// Guards follow Note [Three guards] (SoftmaxFamily.h). The caller (the op
// override) checks what the family cannot see: X contiguous, weight and bias
// contiguous with C elements and X's dtype (anything else: ATen), one device;
// it allocates out like X and mean, rstd as [N, G] of X's dtype.

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
struct GroupNormVariant {
  DType dtype = DType::Float32;
  int64_t rows = 0;    // N * G
  int64_t cols = 0;    // (C / G) * HxW
  int64_t groups = 0;  // G
  int64_t hw = 0;      // HxW
  bool hasWeight = true;
  bool hasBias = true;
  int64_t channelsPerGroup() const { return hw > 0 ? cols / hw : 0; }
};

struct FamilyDescriptor;
// The variant a plan-table key stands for: rows, cols, the weight and bias
// options, and more = {G, HxW, 1, 1} (Note [Group norm keys] in
// src/GroupNormDescriptor.cpp).
GroupNormVariant groupNormVariantOf(const VariantKey& key);
// The key of a variant on `device`.
VariantKey groupNormKeyOf(const GroupNormVariant& v, int device);
// The descriptor of group_norm (Note [Family descriptors]).
const FamilyDescriptor& groupNormDescriptor();

class GroupNormFamily {
 public:
  static constexpr const char* kName = "group_norm";  // the cache's family (the template is layer_norm's)
  // hk_layer_norm's ABI, with mean and rstd of the input's dtype:
  // (const void* in, const void* weight, const void* bias, void* out, void* mean, void* rstd,
  //  long long rows, long long cols, float eps, float* partials, unsigned* counter)
  static constexpr const char* kKernelName = "hk_layer_norm";

  // Whether the family can serve the variant at all: a known dtype, rows >= 1,
  // 1 <= cols <= kNormMaxCols, rows * cols * elementSize without overflow, G >= 1
  // (row r is group r % G: a call's rows are N * G, the harness runs other counts
  // too), HxW >= 2 dividing cols (HxW == 1 is ATen's other expression).
  static bool guardVariant(const GroupNormVariant& v);

  // LayerNormFamily's conditions, and HxW % vec == 0 (every vector in one channel).
  static bool guardParams(const GroupNormVariant& v, const NormParams& p);

  // Per-call guard: in, out non-null and aligned to requiredAlignment(); weight
  // and bias (when present) non-null and aligned to one element (they are read
  // one channel at a time); mean and rstd non-null and aligned to one element.
  static bool guardPointers(const void* in, const void* weight, const void* bias, const void* out, const void* mean,
                            const void* rstd, const GroupNormVariant& v, const NormParams& p);

  // Bytes of alignment in and out need: vec * elementSize(dtype).
  static size_t requiredAlignment(DType dtype, const NormParams& p);

  // LayerNormFamily's ranking of the norm points (NormCommon.h), those whose vec divides HxW.
  static std::vector<NormParams> parameterSpace(const GroupNormVariant& v, int computeCapability = 0);
  static std::vector<NormParams> allParameterPoints(DType dtype);

  // layer_norm.cu's text (the template serves both families).
  static std::string source();

  // The norm defines, -DHK_HAS_WEIGHT=, -DHK_HAS_BIAS=, -DHK_COLS=cols, -DHK_GROUPS=G and
  // -DHK_GROUP_HW=HxW. Throws Error unless `p` is a point for the dtype and the variant passes
  // guardVariant.
  static std::vector<std::string> compileOptions(const GroupNormVariant& v, const NormParams& p);

  static LaunchGeometry launchGeometry(const GroupNormVariant& v, const NormParams& p);
  static int64_t workspaceFloats(const GroupNormVariant& v, const NormParams& p);
  static int64_t maxWorkspaceFloats(int64_t rows);

  // eps as the kernel takes it: ATen's static_cast<T>(eps), float(eps) rounded to the dtype (Note
  // [Group norm rows] in kernels/norm/layer_norm.cu).
  static float kernelEps(DType dtype, double eps);

  // Ideal DRAM traffic: x read once, out written once, weight and bias read
  // once each (C elements), mean and rstd written (two elements a row).
  static double bytesMoved(const GroupNormVariant& v);

  // How far from ATen's native_group_norm results may be (Note [Group norm
  // tolerance] in src/GroupNormFamily.cpp): LayerNormFamily's for the output,
  // and for the statistics one unit in the last place of the dtype on top of it
  // (both sides round float32 statistics to the dtype: a float32 difference
  // that crosses a rounding boundary is one ulp there).
  static NormTolerance tolerance(DType dtype, int64_t cols);
};

}  // namespace hotkernel::kernels
