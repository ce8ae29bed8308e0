#pragma once
// What the two normalization families share (RmsNormFamily, LayerNormFamily):
// the parameter point, the tolerance record, and (in `detail`) the whitelist,
// the parameter-space heuristic and the launch geometry. Both normalize each
// row of a contiguous [rows, cols] view like softmax_lastdim does: a CTA per
// row, or several short rows per CTA, register-resident or streaming, with
// the same parameter axes and register budget (Note [Norm register budget]).

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "hotkernel/kernels/DType.h"
#include "hotkernel/kernels/SoftmaxFamily.h"  // LaunchGeometry

namespace hotkernel::kernels {

// One point of a norm family's parameter space; becomes the HK_* defines of its template.
struct NormParams {
  int threads = 256;   // threads per CTA: a power of two in [32, 1024]
  int vec = 1;         // elements per vector access: a power of two, vec * elementSize <= 16 bytes
  int items = 0;       // > 0: register-resident, each thread holds `items` vectors (one read of the row);
                       // 0: streaming, any row length (two reads of the row)
  int rowsPerCta = 1;  // 1: a CTA per row; > 1: short rows, rowThreads() <= 32 threads (part of one warp) per row
  int cluster = 1;     // > 1: a thread-block cluster of `cluster` CTAs per row, each a slice (sm_90+;
                       // Note [Split norm rows over a cluster] in kernels/norm/rms_norm.cu); rowsPerCta 1
  int split = 1;       // > 1: `split` CTAs of a cooperative grid per row, each a slice, exchanging their sums
                       // through a workspace (Note [Split norm rows over a cooperative grid] in
                       // kernels/norm/rms_norm.cu); rowsPerCta 1, cluster 1, streaming

  int rowThreads() const { return threads / rowsPerCta; }
  bool registerResident() const { return items > 0; }
  // The oldest compute capability that runs the point (x10: 90 = sm_90); 0: any.
  // Clusters need sm_90; the grid split's acquire / release atomics sm_70.
  int minComputeCapability() const { return cluster > 1 ? 90 : split > 1 ? 70 : 0; }
  bool operator==(const NormParams& o) const {
    return threads == o.threads && vec == o.vec && items == o.items && rowsPerCta == o.rowsPerCta &&
           cluster == o.cluster && split == o.split;
  }
  bool operator!=(const NormParams& o) const { return !(*this == o); }

  // {"items":4,"rowsPerCta":1,"threads":256,"vec":8}; "cluster" and "split" only when != 1, so the
  // entries of one-CTA points keep their bytes (and digests).
  nlohmann::json toJson() const;
  // Throws Error unless `j` is an object with integer threads, vec and items
  // (and rowsPerCta, cluster, split: 1 when absent). Does not check validity: guardParams does.
  static NormParams fromJson(const nlohmann::json& j);
  // "threads=256 vec=8 items=4 (register-resident)", "threads=1024 vec=8 items=0 (streaming)",
  // "threads=128 vec=8 items=1 rowsPerCta=8 (register-resident)",
  // "threads=1024 vec=8 items=0 cluster=16 (streaming)", "threads=1024 vec=8 items=0 split=32 (streaming)"
  std::string describe() const;
};

// How far a norm family's results may be from ATen's (one record per dtype
// and row length; the values and their reasoning are each family's
// tolerance()). NaN must meet NaN and infinities must be equal; otherwise
//   output:  |got - ref| <= outAbs + outRel * |ref|
//   rstd:    |got - ref| <= statRel * |ref|
//   mean:    |got - ref| <= statRel * (|ref| + 1 / refRstd)   (the row's scale:
//            a relative bound alone fails rows whose mean is near 0)
struct NormTolerance {
  double outAbs = 0;
  double outRel = 0;
  double statRel = 0;

  bool outputWithin(double got, double ref) const;
  bool rstdWithin(double got, double ref) const;
  bool meanWithin(double got, double ref, double refRstd) const;
};

namespace detail {

// Note [Norm register budget]
// A register-resident point keeps items * vec values of its row per thread as
// fp32 across the row's reductions, within min(128, 32768 / threads): half of
// what __launch_bounds__(threads) allows, softmax_lastdim's budget. The
// per-column arrays (weight, bias) do not count: the templates load them after
// the reductions, next to the output they feed, where ptxas can interleave
// them with the stores. (Loading them once before the row loop instead, to
// reuse them across rows, kept them live, converted to fp32, through the
// reductions: bf16 layer_norm at 256 x 8 x 4 took 120 registers instead of
// about 64, and 1024-thread points spilled.) The families' compile tests check the
// ptxas report of every point.
constexpr int kNormMaxRegisterValues = 128;
constexpr int kNormRegisterFile = 32768;
constexpr int64_t kNormMaxCols = int64_t{1} << 30;
// cuLaunchKernel's limit for gridDim.x: the most row groups a launch covers.
constexpr int64_t kNormMaxCtas = (int64_t{1} << 31) - 1;
// The widest grid of a grid-split point (rows * split CTAs): above what any GPU keeps resident at
// once, so the launch, not this bound, says whether a grid fits (Note [Cooperative launches]); it
// bounds the workspace (normMaxWorkspaceFloats).
constexpr int64_t kNormMaxGridCtas = 1024;

// Whether `p` is a point of the norm families for `dtype` (the whitelist; both templates have the
// cluster and the grid-split kernels).
bool normIsPoint(DType dtype, const NormParams& p);

// Every point for `dtype`, in a fixed order (the cluster points, then the grid-split points last).
std::vector<NormParams> normAllPoints(DType dtype);

// 1 <= rows <= kNormMaxCtas (a launch covers the rows: Note [One row group a CTA] in
// kernels/norm/rms_norm.cu), 1 <= cols <= kNormMaxCols, rows * cols * elementSize
// without overflow, a known dtype.
bool normGuardShape(DType dtype, int64_t rows, int64_t cols);

// normGuardShape, normIsPoint, cols % vec == 0 when vec > 1, the row (a cluster's row) fits when
// register-resident, a cluster point's grid (rows * cluster CTAs) within kNormMaxCtas, a grid-split
// point's (rows * split CTAs) within kNormMaxGridCtas.
bool normGuardParams(DType dtype, int64_t rows, int64_t cols, const NormParams& p);

// Up to 12 points, best guess first (Note [Norm parameter ranking]); every one
// passes normGuardParams; always a streaming point and a vec == 1 point.
// Split-row points (Note [Norm split-row points]) first for few long rows: cluster points when
// computeCapability >= 90 (x10; 0: unknown, no split point), grid-split points when >= 70. Empty iff
// !normGuardShape.
// The shortest row whose space starts with split-row points when the rows are few (Note [Norm split-row
// points] in src/NormCommon.cpp); group_norm passes its own (Note [Group norm split rows]).
constexpr int64_t kNormClusterMinCols = 65536;
std::vector<NormParams> normParameterSpace(DType dtype, int64_t rows, int64_t cols, int computeCapability,
                                           int64_t splitMinCols = kNormClusterMinCols);

// One CTA of `threads` per `rowsPerCta` rows, or `cluster` (`split`) CTAs per row: the grid covers
// the rows; a grid-split point's launch is cooperative. Precondition: normGuardParams.
LaunchGeometry normLaunchGeometry(int64_t rows, const NormParams& p);

// The float32 workspace a launch of `p` on `rows` rows takes: 0, or for a grid-split point
// `valuesPerCta` partials a CTA (rms_norm's sum of squares: 1; layer_norm's mean and M2: 2) and
// then the counter, which must be 0 at launch and is 0 again when the kernel ends (Note [Split norm
// rows over a cooperative grid] in kernels/norm/rms_norm.cu).
int64_t normWorkspaceFloats(int64_t rows, const NormParams& p, int valuesPerCta);
// At least normWorkspaceFloats(rows, p, valuesPerCta) for every point p: what a caller that does not
// know the point allocates (the harness).
int64_t normMaxWorkspaceFloats(int64_t rows, int valuesPerCta);

// The common defines: -DHK_DTYPE=, -DHK_THREADS=, -DHK_ROWS=, -DHK_VEC=, -DHK_ITEMS=, and
// -DHK_CLUSTER= when cluster != 1, -DHK_SPLIT= when split != 1.
std::vector<std::string> normCompileOptions(DType dtype, const NormParams& p);

// Appends -DHK_COLS=cols when cols > 0: a cubin for that column count only
// (Note [Specialized columns] in kernels/norm/rms_norm.cu). Throws Error
// unless 0 <= cols <= kNormMaxCols.
void normAppendCols(std::vector<std::string>& options, int64_t cols);

// `ptr` non-null and a multiple of `alignment`.
bool normAligned(const void* ptr, size_t alignment);

}  // namespace detail
}  // namespace hotkernel::kernels
