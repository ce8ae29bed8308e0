#pragma once
// The middle-dim softmax family: softmax / log_softmax (SoftmaxOp) over one
// dimension d of a contiguous tensor that is not the last, seen as
// [outer, dim, inner] (inner: the product of the sizes after d, >= 2),
// float32 / float16 / bfloat16, input and output of one dtype, fp32
// arithmetic (aten::_softmax / aten::_log_softmax with half_to_float=false),
// coalesced along the kept inner dimension (Note [Coalesced middle-dim
// softmax] in kernels/softmax/softmax_dim.cu). Tolerances are the last-dim
// family's with `dim` as the row length (SoftmaxFamily::softmaxBound,
// logSoftmaxTolerance).
//
// Guards follow Note [Three guards] (SoftmaxFamily.h). Served under the
// softmax ops' own cache families and descriptors: a plan-table key with an
// inner extent is this family's (Note [Two softmax layouts] in
// src/SoftmaxDescriptor.cpp).

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "hotkernel/kernels/DType.h"
#include "hotkernel/kernels/MiddleDimParams.h"
#include "hotkernel/kernels/SoftmaxFamily.h"  // SoftmaxOp, LaunchGeometry
#include "hotkernel/runtime/PlanTable.h"       // VariantKey

namespace hotkernel::kernels {

struct SoftmaxDimVariant {
  DType dtype = DType::Float32;
  int64_t outer = 0;  // the product of the dims before the softmax dim (1 when it is the first)
  int64_t dim = 0;    // the softmax dim's size
  int64_t inner = 0;  // the product of the dims after it
};

// The middle-dim variant a plan-table key with an inner extent stands for:
// outer = key.rows, dim = key.cols, inner = key.inner.
SoftmaxDimVariant softmaxDimVariantOf(const VariantKey& key);
// The plan-table key of `v` on `device` (the inverse of softmaxDimVariantOf).
VariantKey softmaxDimKeyOf(const SoftmaxDimVariant& v, int32_t device);

// How softmax over dim `dim` (wrapped or negative) of a contiguous tensor of
// `sizes` (ndim of them) reads: [outer, size(dim), inner]. False when dim is
// out of range or a size is below 1. inner == 1 (dim is the last, or only
// sizes of 1 follow it) is the last-dim layout [outer, size(dim)]. No
// allocation: the trampoline calls it on every call.
struct SoftmaxLayout {
  int64_t outer = 1;
  int64_t dim = 1;
  int64_t inner = 1;
};
bool softmaxLayoutOf(const int64_t* sizes, int64_t ndim, int64_t dim, SoftmaxLayout* layout);

// One point of the parameter space (MiddleDimParams.h): the template's HK_TX, HK_TY, HK_VEC, HK_UNROLL.
using SoftmaxDimParams = MiddleDimParams;

class SoftmaxDimFamily {
 public:
  static constexpr const char* kName = "softmax_dim";  // the embedded source's name
  // extern "C" __global__ void hk_softmax_dim(const void* in, void* out, long long outer,
  //                                           long long dim, long long inner)
  static constexpr const char* kKernelName = "hk_softmax_dim";
  // The softmax dim's longest extent (the last-dim family's row limit).
  static constexpr int64_t kMaxDim = SoftmaxFamily::kMaxCols;
  // Static shared memory a CTA uses: a (max, sum) pair of floats for each of
  // its tx * vec positions and ty rows.
  static constexpr size_t kMaxSharedBytes = 48 * 1024;
  static constexpr size_t kMaxSpaceSize = 14;

  // A known dtype, outer >= 1, 1 <= dim <= kMaxDim, inner >= 2,
  // outer * dim * inner * elementSize without int64 overflow.
  static bool guardVariant(const SoftmaxDimVariant& v);
  // `p` is one of allParameterPoints(v.dtype) and inner % vec == 0.
  static bool guardParams(const SoftmaxDimVariant& v, const SoftmaxDimParams& p);
  // Per call: in and out non-null and aligned to vec elements (in == out is
  // correct: Note [Coalesced middle-dim softmax]).
  static bool guardPointers(const void* in, const void* out, DType dtype, const SoftmaxDimParams& p);
  static size_t requiredAlignment(DType dtype, const SoftmaxDimParams& p);  // vec * elementSize

  // Every point for `dtype` (the guard's whitelist): tx, ty and vec within
  // the template's limits and kMaxSharedBytes, each with every unroll of kMiddleDimUnrolls.
  static std::vector<SoftmaxDimParams> allParameterPoints(DType dtype);
  // Up to kMaxSpaceSize points worth measuring for v, best guess first (Note
  // [Middle-dim softmax ranking] in src/SoftmaxDimFamily.cpp); always a
  // vec == 1 point. Empty iff !guardVariant(v).
  static std::vector<SoftmaxDimParams> parameterSpace(const SoftmaxDimVariant& v);

  static std::string source();
  // -DHK_DTYPE=, -DHK_TX=, -DHK_TY=, -DHK_VEC=, -DHK_UNROLL=, -DHK_LOG=. Throws Error if `p`
  // is not a point for dtype.
  static std::vector<std::string> compileOptions(DType dtype, const SoftmaxDimParams& p,
                                                 SoftmaxOp op = SoftmaxOp::Softmax);
  // One CTA per (outer index, tile of tx * vec inner positions), at most
  // 2^31 - 1 (the kernel strides over the rest). Static shared memory only.
  static LaunchGeometry launchGeometry(const SoftmaxDimVariant& v, const SoftmaxDimParams& p);
  // Ideal DRAM traffic: the input read once and the output written once.
  static double bytesMoved(const SoftmaxDimVariant& v);
};

}  // namespace hotkernel::kernels
