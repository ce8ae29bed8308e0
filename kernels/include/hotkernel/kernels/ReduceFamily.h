#pragma once
// The last-dim reduction family: aten::sum.dim_IntList, aten::mean.dim,
// aten::amax, aten::argmax, aten::amin, aten::argmin, aten::max.dim and
// aten::min.dim over the last dimension of a contiguous [rows, cols] view
// (leading dims folded into rows; the sums and the value extrema also over the
// last k dims, folded into cols), keepdim true or false, float32 / float16 /
// bfloat16, one read of the input and one result per row (the input's dtype;
// int64 for the index ops; a value and an int64 index for the pair ops
// max.dim and min.dim). The CUDA template is
// kernels/reduce/reduce_lastdim.cu (its Notes give what ATen computes and why
// the results are reproducible); kernels/README.md the parameter space.
//
// Guards follow Note [Three guards] (SoftmaxFamily.h), plus guardCall: the
// torch-free description of a whole call (Note [What the reduction overrides
// refuse] in src/ReduceFamily.cpp), so that the op overrides stay thin and
// the refusals are tested on the CPU.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "hotkernel/kernels/DType.h"
#include "hotkernel/kernels/SoftmaxFamily.h"  // LaunchGeometry

namespace hotkernel {
struct VariantKey;
}  // namespace hotkernel

namespace hotkernel::kernels {

// The template's HK_OP. Max and Min are aten::max.dim and aten::min.dim (values and indices).
enum class ReduceOp : int32_t { Sum = 0, Mean = 1, Amax = 2, Argmax = 3, Amin = 4, Argmin = 5, Max = 6, Min = 7 };
constexpr ReduceOp kAllReduceOps[] = {ReduceOp::Sum,  ReduceOp::Mean,   ReduceOp::Amax, ReduceOp::Argmax,
                                      ReduceOp::Amin, ReduceOp::Argmin, ReduceOp::Max,  ReduceOp::Min};
constexpr size_t kReduceOpCount = sizeof(kAllReduceOps) / sizeof(kAllReduceOps[0]);

// Note [The reduction ops]
// One row per op (src/ReduceFamily.cpp): its names and the two properties
// the rest of the family reads from it. Adding an op is a row here, its
// HK_OP branch in the template and its row in the served-op table.
struct ReduceOpInfo {
  ReduceOp op;
  const char* name;    // "amin"
  const char* family;  // the cache's family name: "amin_lastdim"
  const char* atenOp;  // the ATen op it serves, overload included: "aten::amin" (the name the
                       // recorder, the ranking, the cache and HOTKERNEL_OPS use)
  bool index;          // it writes int64 indices (argmax, argmin, max.dim, min.dim)
  bool exact;          // no rounding: ATen's result must be met exactly (the extrema)
  bool pair;           // it writes the values at those indices too, a second output (max.dim,
                       // min.dim: Note [Value and index pairs] in src/ReduceFamily.cpp)
};
// The row of a known op; throws Error for any other value.
const ReduceOpInfo& reduceOpInfo(ReduceOp op);

const char* reduceOpName(ReduceOp op);      // reduceOpInfo(op).name
const char* reduceFamilyName(ReduceOp op);  // reduceOpInfo(op).family
const char* reduceAtenOpName(ReduceOp op);  // reduceOpInfo(op).atenOp
// The op of a family name / of an ATen name; nullopt for any other name.
std::optional<ReduceOp> reduceOpOfFamily(const std::string& family);
std::optional<ReduceOp> reduceOpOfAtenName(const std::string& name);

// One variant of an op. keepdim is not part of it: the kernel writes [rows]
// either way, the override returns a view.
struct ReduceVariant {
  DType dtype = DType::Float32;
  int64_t rows = 0;
  int64_t cols = 0;
  ReduceOp op = ReduceOp::Sum;
};

struct FamilyDescriptor;
// The variant of `op` a plan-table key stands for (reduction keys carry no options).
ReduceVariant reduceVariantOf(const VariantKey& key, ReduceOp op);
// The descriptor of `op`'s cache family (Note [Family descriptors]).
const FamilyDescriptor& reduceDescriptor(ReduceOp op);

// One point of the parameter space; becomes the HK_* defines of the template.
struct ReduceParams {
  int threads = 256;   // threads per CTA: a power of two in [32, 1024]
  int vec = 1;         // elements per vector access: a power of two, vec * elementSize <= 16 bytes
  int unroll = 1;      // vectors a thread loads before it uses the first: 1, 2, 4, 8
  int rowsPerCta = 1;  // 1: a CTA per row; > 1: short rows, rowThreads() <= 32 threads per row

  int rowThreads() const { return threads / rowsPerCta; }
  bool operator==(const ReduceParams& o) const {
    return threads == o.threads && vec == o.vec && unroll == o.unroll && rowsPerCta == o.rowsPerCta;
  }
  bool operator!=(const ReduceParams& o) const { return !(*this == o); }

  nlohmann::json toJson() const;  // {"rowsPerCta":1,"threads":512,"unroll":4,"vec":8}
  // Throws Error unless `j` is an object with integer threads, vec and unroll
  // (rowsPerCta: 1 when absent). Does not check validity: guardParams does.
  static ReduceParams fromJson(const nlohmann::json& j);
  // "threads=512 vec=8 unroll=4", "threads=128 vec=8 unroll=1 rowsPerCta=8"
  std::string describe() const;
};

// How far a row's result may be from ATen's (Note [Reduction tolerance] in
// src/ReduceFamily.cpp). NaN must meet NaN and infinities must be equal
// regardless; the extrema (amax, amin, argmax, argmin) are exact.
struct ReduceTolerance {
  bool exact = false;
  double sumRel = 0;  // times sum |x| over the row (mean: times mean |x|)
  double outRel = 0;  // times |ref|: the rounding to the output dtype
  double outAbs = 0;  // the output dtype's subnormal step (float16)
  // The bound for one row: `ref` ATen's result, `absSum` sum |x| (mean: mean
  // |x|), `atenError` |ATen's result - the float64 result| of the row.
  double bound(double ref, double absSum, double atenError) const;
};

// A call of one of the ops as the override sees it, without torch (Note
// [What the reduction overrides refuse]).
struct ReduceCall {
  ReduceOp op = ReduceOp::Sum;
  bool floating = true;  // float32 / float16 / bfloat16 (dtype below); false: any other dtype
  DType dtype = DType::Float32;
  std::vector<int64_t> sizes, strides;
  // sum / mean / amax / amin: the dim list (nullopt: None); argmax / argmin: {dim}, or nullopt for
  // dim=None; max.dim / min.dim: {dim}.
  std::optional<std::vector<int64_t>> dims;
  bool keepdim = false;
  bool dtypeGiven = false;  // sum / mean: the dtype= argument is not None
};

class ReduceFamily {
 public:
  static constexpr const char* kName = "reduce_lastdim";  // the embedded source's name
  // extern "C" __global__ void hk_reduce_lastdim(const void* in, void* out, long long rows, long long cols);
  // the pair ops (ReduceOpInfo::pair) take the indices after the values:
  // hk_reduce_lastdim(const void* in, void* values, void* indices, long long rows, long long cols).
  static constexpr const char* kKernelName = "hk_reduce_lastdim";
  static constexpr int64_t kMaxCols = int64_t{1} << 30;

  // The variant of a call the family serves, or false (anything else runs ATen).
  static bool guardCall(const ReduceCall& call, ReduceVariant* variant);

  // k when `dims` (count of them) names exactly the last k of `ndim` dims,
  // each once, in any order, negative or not; else 0. No allocation: the
  // overrides call it on every call's dim list.
  static int64_t trailingDims(int64_t ndim, const int64_t* dims, size_t count);

  // The result's sizes for a call guardCall accepts: the leading dims, then
  // k ones when keepdim (reducing every dim without keepdim: 0-dim).
  static std::vector<int64_t> outputSizes(const ReduceCall& call);

  // A known dtype and op, rows >= 1, 1 <= cols <= kMaxCols, rows * cols *
  // elementSize without int64 overflow.
  static bool guardVariant(const ReduceVariant& v);

  // `p` is one of allParameterPoints(v.dtype) and cols % vec == 0 when vec > 1.
  static bool guardParams(const ReduceVariant& v, const ReduceParams& p);

  // Per call: in non-null and aligned to requiredAlignment, out non-null,
  // aligned to outputElementSize(v.op, v.dtype), and different from in. A
  // pair op's `out` is its values; its indices need kIndexAlignment
  // (guardIndices).
  static bool guardPointers(const void* in, const void* out, const ReduceVariant& v, const ReduceParams& p);
  static size_t requiredAlignment(DType dtype, const ReduceParams& p);  // vec * elementSize
  // The first output's element: 8 for argmax / argmin (int64 indices), else
  // elementSize (the values; of max.dim / min.dim too).
  static size_t outputElementSize(ReduceOp op, DType dtype);
  // A pair op's indices (int64, written one at a time by both layouts):
  // non-null, 8-byte aligned, different from the input and the values.
  static constexpr size_t kIndexAlignment = sizeof(int64_t);
  static bool guardIndices(const void* in, const void* values, const void* indices);

  // Up to 12 points worth measuring for v, best guess first (Note [Reduction
  // parameter ranking]); every one passes guardParams; always a vec == 1
  // point. Empty iff !guardVariant(v).
  static std::vector<ReduceParams> parameterSpace(const ReduceVariant& v);

  // Every point for `dtype` (the guard's whitelist), the same for every op.
  static std::vector<ReduceParams> allParameterPoints(DType dtype);

  static std::string source();

  // -DHK_DTYPE=, -DHK_OP=, -DHK_THREADS=, -DHK_ROWS=, -DHK_VEC=, -DHK_UNROLL=.
  // Throws Error if `p` is not a point for `dtype`.
  static std::vector<std::string> compileOptions(DType dtype, const ReduceParams& p, ReduceOp op);

  // One CTA per rowsPerCta rows, at most 2^31 - 1 CTAs (the kernel strides
  // over rows). No dynamic shared memory.
  static LaunchGeometry launchGeometry(const ReduceVariant& v, const ReduceParams& p);

  // Ideal DRAM traffic: the input read once, one result per row written (a
  // pair op's: a value and an int64 index).
  static double bytesMoved(const ReduceVariant& v);

  static ReduceTolerance tolerance(ReduceOp op, DType dtype, int64_t cols);
};

}  // namespace hotkernel::kernels
