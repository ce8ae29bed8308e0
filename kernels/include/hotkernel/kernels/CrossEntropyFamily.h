#pragma once
// The cross_entropy kernel family: aten::cross_entropy_loss(logits, labels,
// weight=None, reduction, ignore_index, label_smoothing=0.0) for 2-D logits
// [rows, cols] (classes last, contiguous) and int64 class-index labels
// [rows], in one read of the logits: an online log-sum-exp per row, the
// label's logit gathered, loss = lse - x[labels] (0 for ignore_index rows),
// then reduction none / sum / mean with a deterministic final reduction. The
// CUDA template is kernels/cross_entropy/cross_entropy.cu (its Notes give the
// algorithm and the special values); kernels/README.md the parameter space.
//
// Guards follow Note [Three guards] (SoftmaxFamily.h), plus guardCall: the
// torch-free description of a whole call (Note [What the cross entropy
// override refuses]), so that the op override stays thin and the refusals are
// tested on the CPU.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "hotkernel/kernels/DType.h"
#include "hotkernel/kernels/SoftmaxFamily.h"  // LaunchGeometry

namespace hotkernel {
struct VariantKey;
}  // namespace hotkernel

namespace hotkernel::kernels {

// at::Reduction's values (the template's HK_REDUCTION).
enum class CrossEntropyReduction : int32_t { None = 0, Mean = 1, Sum = 2 };
const char* reductionName(CrossEntropyReduction r);  // "none", "sum", "mean"

// One variant of the op. ignore_index is a per-call kernel argument, not part of it.
struct CrossEntropyVariant {
  DType dtype = DType::Float32;
  int64_t rows = 0;
  int64_t cols = 0;  // classes
  CrossEntropyReduction reduction = CrossEntropyReduction::Mean;
};

struct FamilyDescriptor;
// The variant a plan-table key stands for (its reduction option, Note [Variant options]).
CrossEntropyVariant crossEntropyVariantOf(const VariantKey& key);
// The descriptor of cross_entropy (Note [Family descriptors]).
const FamilyDescriptor& crossEntropyDescriptor();

// One point of the parameter space; becomes the HK_* defines of the template.
struct CrossEntropyParams {
  int threads = 256;   // threads per CTA: a power of two in [32, 1024]
  int vec = 1;         // elements per vector access: a power of two, vec * elementSize <= 16 bytes
  int unroll = 1;      // vectors a thread loads before it uses the first: 1, 2, 4, 8
  int rowsPerCta = 1;  // 1: a CTA (or cluster) per row; > 1: short rows, rowThreads() <= 32 threads per row
  int cluster = 1;     // 1; 2, 4, 8, 16: a thread-block cluster per row, each CTA a slice (rowsPerCta == 1,
                       // sm_90+; 16 is a non-portable size, which the launcher opts in to)

  int rowThreads() const { return threads / rowsPerCta; }
  // The lowest compute capability (major * 10 + minor) that runs this point: 90 for clusters, else 0.
  int minComputeCapability() const { return cluster > 1 ? 90 : 0; }
  bool operator==(const CrossEntropyParams& o) const {
    return threads == o.threads && vec == o.vec && unroll == o.unroll && rowsPerCta == o.rowsPerCta &&
           cluster == o.cluster;
  }
  bool operator!=(const CrossEntropyParams& o) const { return !(*this == o); }

  // {"cluster":1,"rowsPerCta":1,"threads":512,"unroll":8,"vec":8}
  nlohmann::json toJson() const;
  // Throws Error unless `j` is an object with integer threads, vec and unroll
  // (rowsPerCta and cluster: 1 when absent). Does not check validity: guardParams does.
  static CrossEntropyParams fromJson(const nlohmann::json& j);
  // "threads=512 vec=8 unroll=8", "... rowsPerCta=8", "... cluster=8"
  std::string describe() const;
};

// How far the family's results may be from ATen's (Note [Cross entropy
// tolerance] in src/CrossEntropyFamily.cpp). NaN must meet NaN and infinities
// must be equal regardless.
struct CrossEntropyTolerance {
  DType dtype = DType::Float32;
  double rowAbs = 0;  // per-row loss: |got - ref| <= rowAbs + rowRel * |ref|
  double rowRel = 0;

  bool rowWithin(double got, double ref) const;
  // The bound of a sum or mean given the reference's per-row losses:
  // `count` rows not ignored, `sumAbs` = sum |loss|, `maxAbs` = max |loss|
  // over them, `ref` the reference result.
  double reducedBound(CrossEntropyReduction r, int64_t count, double sumAbs, double maxAbs, double ref) const;
};

// A call of aten::cross_entropy_loss as the override sees it, without torch
// (Note [What the cross entropy override refuses]).
struct CrossEntropyCall {
  bool logitsFloating = true;   // float32 / float16 / bfloat16 (dtype below); false: any other dtype
  DType dtype = DType::Float32;
  std::vector<int64_t> logitsSizes, logitsStrides;
  bool labelsInt64 = true;      // class indices as int64 (false: other integer types, or probabilities)
  std::vector<int64_t> labelsSizes, labelsStrides;
  bool sameDevice = true;       // logits and labels on one CUDA device
  bool hasWeight = false;       // class weights given
  double labelSmoothing = 0.0;
  int64_t reduction = 1;        // at::Reduction: 0 none, 1 mean, 2 sum (CrossEntropyReduction's values)
};

class CrossEntropyFamily {
 public:
  static constexpr const char* kName = "cross_entropy";  // also the embedded source's name
  // extern "C" __global__ void hk_cross_entropy(const void* logits, const long long* labels, void* out,
  //                                             float* work, long long rows, long long cols, long long ignoreIndex)
  static constexpr const char* kKernelName = "hk_cross_entropy";
  static constexpr int64_t kMaxCols = int64_t{1} << 30;
  // Counts of non-ignored rows stay exact in float32 (ATen's total_weight) up to here.
  static constexpr int64_t kMaxRows = int64_t{1} << 24;

  // The variant of a call the family serves, or false (anything else runs ATen).
  static bool guardCall(const CrossEntropyCall& call, CrossEntropyVariant* variant);

  // A known dtype and reduction, 1 <= rows <= kMaxRows, 1 <= cols <= kMaxCols,
  // rows * cols * elementSize without overflow.
  static bool guardVariant(const CrossEntropyVariant& v);

  // `p` is one of allParameterPoints(v.dtype) and cols % vec == 0 when vec > 1.
  // (Whether the GPU runs clusters is the caller's check: minComputeCapability.)
  static bool guardParams(const CrossEntropyVariant& v, const CrossEntropyParams& p);

  // Per call: logits aligned to vec * elementSize, labels to 8, out to
  // elementSize, all non-null; work non-null and 4-byte aligned unless the
  // reduction is none (then ignored).
  static bool guardPointers(const void* logits, const void* labels, const void* out, const void* work,
                            const CrossEntropyVariant& v, const CrossEntropyParams& p);
  static size_t requiredAlignment(DType dtype, const CrossEntropyParams& p);

  // Floats of workspace a launch needs: 0 for none and for one row (the
  // kernel then leaves `work` alone: it may be null), rows + 1 (the losses and
  // the counter) for sum and mean over more rows.
  static int64_t workspaceFloats(const CrossEntropyVariant& v);
  // Whether the counter (work[rows]) must be zeroed before the launch: a sum
  // or mean over more than one row whose grid holds more than one CTA, or
  // clusters (the template's Note [Deterministic cross entropy reduction]).
  // The kernel leaves it 0.
  static bool needsCounter(const CrossEntropyVariant& v, const CrossEntropyParams& p);

  // Up to 12 points worth measuring for v on a GPU of compute capability
  // `computeCapability` (0: points any GPU runs), best guess first (Note
  // [Cross entropy parameter ranking]); every one passes guardParams; always
  // a vec == 1 point. Empty iff !guardVariant(v).
  static std::vector<CrossEntropyParams> parameterSpace(const CrossEntropyVariant& v, int computeCapability = 0);

  // Every point for `dtype` (the guard's whitelist), cluster points included.
  static std::vector<CrossEntropyParams> allParameterPoints(DType dtype);

  static std::string source();

  // -DHK_DTYPE=, -DHK_THREADS=, -DHK_ROWS=, -DHK_VEC=, -DHK_UNROLL=, -DHK_REDUCTION=,
  // and -DHK_CLUSTER= for cluster points. Throws Error if `p` is not a point for `dtype`.
  static std::vector<std::string> compileOptions(DType dtype, const CrossEntropyParams& p,
                                                 CrossEntropyReduction reduction);

  // One CTA per rowsPerCta rows, or `cluster` CTAs per row; at most 2^31 - 1
  // CTAs (the kernel strides over rows). No dynamic shared memory.
  static LaunchGeometry launchGeometry(const CrossEntropyVariant& v, const CrossEntropyParams& p);

  // Ideal DRAM traffic: the logits read once, the labels read (twice for a
  // reduction), the output (and the workspace) written.
  static double bytesMoved(const CrossEntropyVariant& v);
  // FLOPs: about 4 a logit (compare, subtract, exp, add).
  static double flops(const CrossEntropyVariant& v);

  static CrossEntropyTolerance tolerance(DType dtype, int64_t cols);
};

}  // namespace hotkernel::kernels
