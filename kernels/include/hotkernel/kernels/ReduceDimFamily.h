#pragma once
// The middle-dim reduction family: the ops of the last-dim family
// (ReduceOp: sum, mean, amax, argmax, amin, argmin, max.dim, min.dim) over one dimension d of a
// contiguous tensor that is not the last, seen as [outer, reduced, inner]
// (inner: the elements after d, >= 2), float32 / float16 / bfloat16, one
// read of the input and one result per (outer, inner) position, coalesced
// along the kept inner dimension (Note [Coalesced middle-dim reductions] in
// kernels/reduce/reduce_dim.cu). Results and tolerances are the last-dim
// family's (ReduceFamily::tolerance with the reduced extent as cols).
//
// Guards follow Note [Three guards] (SoftmaxFamily.h), plus guardCall as
// the last-dim family's (Note [What the reduction overrides refuse] in
// src/ReduceFamily.cpp). Served under the reduction ops' own cache families
// and descriptors: a plan-table key with an inner extent is this family's
// (Note [Two layouts, one family] in src/ReduceDescriptor.cpp).

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "hotkernel/kernels/DType.h"
#include "hotkernel/kernels/MiddleDimParams.h"
#include "hotkernel/kernels/ReduceFamily.h"  // ReduceOp, ReduceCall, LaunchGeometry
#include "hotkernel/runtime/PlanTable.h"        // VariantKey

namespace hotkernel::kernels {

struct ReduceDimVariant {
  DType dtype = DType::Float32;
  int64_t outer = 0;    // the product of the dims before the reduced one (1 when it is the first)
  int64_t reduced = 0;  // the reduced dim's size
  int64_t inner = 0;    // the product of the dims after it
  ReduceOp op = ReduceOp::Sum;
};

// The middle-dim variant of `op` a plan-table key with an inner extent
// stands for: outer = key.rows, reduced = key.cols, inner = key.inner.
ReduceDimVariant reduceDimVariantOf(const VariantKey& key, ReduceOp op);
// The plan-table key of `v` on `device` (the inverse of reduceDimVariantOf).
VariantKey reduceDimKeyOf(const ReduceDimVariant& v, int32_t device);

// One point of the parameter space (MiddleDimParams.h): the template's HK_TX, HK_TY, HK_VEC, HK_UNROLL.
using ReduceDimParams = MiddleDimParams;

class ReduceDimFamily {
 public:
  static constexpr const char* kName = "reduce_dim";  // the embedded source's name
  // extern "C" __global__ void hk_reduce_dim(const void* in, void* out, long long outer,
  //                                          long long reduced, long long inner);
  // the pair ops (max.dim, min.dim) take the indices after the values:
  // hk_reduce_dim(const void* in, void* values, void* indices, long long outer, long long reduced, long long inner).
  static constexpr const char* kKernelName = "hk_reduce_dim";
  static constexpr size_t kMaxSpaceSize = 14;
  // The template's indices are int32.
  static constexpr int64_t kMaxReduced = (int64_t{1} << 31) - 1;
  // Static shared memory a CTA may use: the partials of its tile (floats, and
  // int32 indices for the index ops) for each of its ty rows.
  static constexpr size_t kMaxSharedBytes = 48 * 1024;

  // The one dim `dims` (count of them) names when it is exactly one dim of
  // `ndim` that is not the last, negative or not; else -1. No allocation:
  // the overrides call it on every call's dim list.
  static int64_t middleDim(int64_t ndim, const int64_t* dims, size_t count);

  // The variant of a call the family serves, or false (anything else runs
  // ATen, or the last-dim family: Note [What the reduction overrides refuse]):
  // a contiguous float32 / float16 / bfloat16 input, exactly one dim that is
  // not the last (middleDim) with inner >= 2, no dtype=, guardVariant.
  static bool guardCall(const ReduceCall& call, ReduceDimVariant* variant);

  // The result's sizes for a call guardCall accepts: the input's without the
  // reduced dim, or with 1 in its place when keepdim.
  static std::vector<int64_t> outputSizes(const ReduceCall& call);

  // A known dtype and op, outer >= 1, 1 <= reduced <= kMaxReduced, inner >= 2,
  // outer * reduced * inner * elementSize without int64 overflow.
  static bool guardVariant(const ReduceDimVariant& v);
  // `p` is one of allParameterPoints(v.dtype, v.op) and inner % vec == 0.
  static bool guardParams(const ReduceDimVariant& v, const ReduceDimParams& p);
  // Per call: in and out non-null, different, aligned to vec elements of their types.
  static bool guardPointers(const void* in, const void* out, const ReduceDimVariant& v, const ReduceDimParams& p);
  static size_t requiredAlignment(DType dtype, const ReduceDimParams& p);  // the input's: vec * elementSize
  // The output's alignment for a plan whose input alignment is
  // `inputAlignment` (requiredAlignment: vec input elements): vec output
  // elements. What the trampoline checks, knowing the plan's alignment only.
  // A pair op's output is its values; its indices are written one at a time
  // (ReduceFamily::guardIndices).
  static size_t outputAlignment(ReduceOp op, DType dtype, size_t inputAlignment);

  // Every point for `dtype` and `op` (the guard's whitelist): tx, ty and vec
  // within the template's limits and the shared memory bound (the index ops
  // keep twice the bytes a position), each with every unroll of kMiddleDimUnrolls.
  static std::vector<ReduceDimParams> allParameterPoints(DType dtype, ReduceOp op);
  // Up to kMaxSpaceSize points worth measuring for v, best guess first (Note
  // [Middle-dim parameter ranking], then Note [Rows in flight]'s unrolls);
  // always a vec == 1 point. Empty iff !guardVariant(v).
  static std::vector<ReduceDimParams> parameterSpace(const ReduceDimVariant& v);

  static std::string source();
  // What a middle-dim plan's or candidate's description starts with: "<op>_dim" ("argmax_dim"). The cache
  // family stays the last-dim one's (Note [Two layouts, one family] in src/ReduceDescriptor.cpp); the name says
  // which kernel serves.
  static std::string displayName(ReduceOp op);
  // -DHK_DTYPE=, -DHK_OP=, -DHK_TX=, -DHK_TY=, -DHK_VEC=, -DHK_UNROLL=. Throws Error if `p`
  // is not a point for (dtype, op).
  static std::vector<std::string> compileOptions(DType dtype, const ReduceDimParams& p, ReduceOp op);
  // One CTA per (outer index, tile of tx * vec inner positions), at most
  // 2^31 - 1 (the kernel strides over the rest). Static shared memory only.
  static LaunchGeometry launchGeometry(const ReduceDimVariant& v, const ReduceDimParams& p);
  // Ideal DRAM traffic: the input read once, one result per (outer, inner).
  static double bytesMoved(const ReduceDimVariant& v);
  static size_t outputElementSize(ReduceOp op, DType dtype) { return ReduceFamily::outputElementSize(op, dtype); }
  // The last-dim family's bound with the reduced extent as the row length.
  static ReduceTolerance tolerance(ReduceOp op, DType dtype, int64_t reduced) {
    return ReduceFamily::tolerance(op, dtype, reduced);
  }
};

}  // namespace hotkernel::kernels
