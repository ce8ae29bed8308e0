#pragma once
// The softmax_lastdim kernel family: out = softmax(in, dim=-1) (or
// log_softmax) over a contiguous [rows, cols] view, input and output of one
// dtype, fp32 arithmetic (aten::_softmax / aten::_log_softmax with
// half_to_float=false). The CUDA template is
// kernels/softmax/softmax_lastdim.cu; kernels/README.md describes the
// algorithm and the parameter space.
//
// Note [Three guards]
// guardVariant: can the family serve this shape and dtype at all.
// guardParams: is this parameter point correct for this variant (the kernel
//   trusts it: it does not re-check row length or divisibility on the device).
// guardPointers: per call, are these data pointers aligned for the point's
//   vector width. The trampoline runs it on every call and falls back to ATen
//   when it fails; ATen's allocator gives 256-byte aligned storage, but views
//   (x[1:], narrow) can start anywhere.
// Contiguity, device and in/out shape checks belong to the caller.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "hotkernel/kernels/DType.h"

namespace hotkernel {
struct VariantKey;
}  // namespace hotkernel

namespace hotkernel::kernels {

// Which op a softmax-family kernel computes (the template's HK_LOG).
enum class SoftmaxOp { Softmax = 0, LogSoftmax = 1 };
const char* softmaxOpName(SoftmaxOp op);      // "aten::_softmax", "aten::_log_softmax"
const char* softmaxFamilyName(SoftmaxOp op);  // "softmax_lastdim", "log_softmax_lastdim" (cache family names)

// One variant of the op: the last dim is `cols`, every leading dim is folded into `rows`.
struct SoftmaxVariant {
  DType dtype = DType::Float32;
  int64_t rows = 0;
  int64_t cols = 0;
};

struct FamilyDescriptor;
// The variant a plan-table key stands for (Note [Variant options]: softmax keys carry none).
SoftmaxVariant softmaxVariantOf(const VariantKey& key);
// The descriptor of `op`'s cache family (Note [Family descriptors]).
const FamilyDescriptor& softmaxDescriptor(SoftmaxOp op);

// One point of the parameter space; becomes the HK_* defines of the template.
struct SoftmaxParams {
  int threads = 256;   // threads per CTA: a power of two in [32, 1024]
  int vec = 1;         // elements per vector access: a power of two, vec * elementSize <= 16 bytes
  int items = 0;       // > 0: register-resident, each thread holds `items` vectors (one read of the row);
                       // 0: streaming, any row length (two reads of the row)
  int rowsPerCta = 1;  // 1: a CTA per row; > 1: short rows, rowThreads() <= 32 threads (part of one warp) per row
  int cluster = 1;     // 1: one CTA per row; 2, 4, 8, 16: a thread-block cluster per row, each CTA a slice of
                       // it (rowsPerCta == 1, sm_90+ only; 16 is a non-portable size, which the launcher
                       // opts in to), in registers (items > 0) or streamed twice (items == 0: 512 or
                       // 1024 threads, 16-byte vectors; "split streaming")
  bool smem = false;   // with cluster > 1: the slice staged in shared memory (cp.async, 16-byte vectors)
                       // instead of registers: `items` vectors a thread, threads * items * 16 bytes a CTA
  int clusterRows = 1;  // with smem: rows each cluster serves in turn; > 1 (16 or 4): the write pass refills
                        // each slot of the stage with the next row's vector (one stage; Note [Pipelined
                        // slices] in src/SoftmaxSpace.cpp)

  int rowThreads() const { return threads / rowsPerCta; }
  bool registerResident() const { return items > 0; }
  // The lowest compute capability (major * 10 + minor) that runs this point: 90 for clusters, else 0.
  int minComputeCapability() const { return cluster > 1 ? 90 : 0; }
  bool operator==(const SoftmaxParams& o) const {
    return threads == o.threads && vec == o.vec && items == o.items && rowsPerCta == o.rowsPerCta &&
           cluster == o.cluster && smem == o.smem && clusterRows == o.clusterRows;
  }
  bool operator!=(const SoftmaxParams& o) const { return !(*this == o); }

  // {"items":8,"rowsPerCta":1,"threads":512,"vec":8}, plus "cluster" and "clusterRows" when they are not 1
  // and "smem":true when set.
  nlohmann::json toJson() const;
  // Throws Error unless `j` is an object with integer threads, vec and items
  // (and rowsPerCta, cluster and clusterRows, 1 when absent; a boolean smem,
  // false when absent). Does not check validity: guardParams does.
  static SoftmaxParams fromJson(const nlohmann::json& j);
  // "threads=512 vec=8 items=8 (register-resident)",
  // "threads=128 vec=8 items=1 rowsPerCta=8 (register-resident)",
  // "threads=1024 vec=8 items=2 cluster=8 (register-resident)",
  // "threads=256 vec=8 items=8 cluster=8 (shared-memory-resident)",
  // "threads=512 vec=4 items=13 cluster=16 clusterRows=4 (shared-memory-resident)",
  // "threads=1024 vec=8 items=0 cluster=4 (streaming)"
  std::string describe() const;
};

// How to launch one compiled point for one variant. sharedBytes is the
// dynamic shared memory: the staged slice of a shared-memory-resident point
// (threads * items * 16 bytes, twice that when pipelined; the same for every
// variant), else 0.
struct LaunchGeometry {
  unsigned gridX = 1;
  unsigned blockX = 1;
  unsigned sharedBytes = 0;
  // Every CTA of the grid must be resident at once: the grid-split norms
  // (Note [Cooperative launches] in runtime/CudaKernelLauncher.h).
  bool cooperative = false;
};

class SoftmaxFamily {
 public:
  static constexpr const char* kName = "softmax_lastdim";  // also the embedded source's name
  static constexpr const char* kKernelName = "hk_softmax_lastdim";
  // Longest row the family serves (the kernel indexes vectors in int).
  static constexpr int64_t kMaxCols = int64_t{1} << 30;
  // Register-resident points keep at most this many fp32 values per thread...
  static constexpr int kMaxRegisterElements = 128;
  // ... and at most kRegisterFileElements / threads, i.e. half the registers
  // __launch_bounds__(threads) allows, so that ptxas does not spill
  // (SoftmaxFamilyCompileTest checks the ptxas report of every point).
  static constexpr int kRegisterFileElements = 32768;
  // The rows a pipelined staged point's cluster serves in turn (SoftmaxParams::clusterRows; Note [Pipelined
  // slices] in src/SoftmaxSpace.cpp): the space offers the first as each staged point's twin, the tuner searches
  // both (the two are within a few percent of each other where measured: docs/design/softmax.md).
  static constexpr int kPipelinedClusterRows[] = {16, 4};

  // Whether the family can serve the variant at all: rows >= 1, 1 <= cols <= kMaxCols,
  // rows * cols without overflow.
  static bool guardVariant(const SoftmaxVariant& v);

  // Whether `p` is a point of the family for v.dtype (allParameterPoints) and
  // correct for v: cols % vec == 0 when vec > 1 (each row must start aligned),
  // cols <= cluster * rowThreads * vec * items when register-resident.
  // (Whether the GPU runs clusters is the caller's check: minComputeCapability.)
  static bool guardParams(const SoftmaxVariant& v, const SoftmaxParams& p);

  // Per-call guard: both pointers non-null and aligned to requiredAlignment().
  // In-place calls (in == out) are correct: every element is read before the
  // thread that owns it writes it. Partial overlap is not; the caller refuses it.
  static bool guardPointers(const void* in, const void* out, DType dtype, const SoftmaxParams& p);

  // Bytes of alignment guardPointers requires: vec * elementSize(dtype).
  static size_t requiredAlignment(DType dtype, const SoftmaxParams& p);

  // Up to 12 parameter points worth measuring for `v` on a GPU of compute
  // capability `computeCapability` (major * 10 + minor; 0: points any GPU
  // runs), best guess first; every one passes guardParams and runs there.
  // Always holds a streaming point and a vec == 1 point (the fallback for
  // unaligned data). Empty iff !guardVariant(v).
  static std::vector<SoftmaxParams> parameterSpace(const SoftmaxVariant& v, int computeCapability = 0);

  // Every point the family can produce for `dtype` (the guard's whitelist),
  // cluster points (sm_90+) included.
  static std::vector<SoftmaxParams> allParameterPoints(DType dtype);

  // The CUDA template (kernelSource(kName).text).
  static std::string source();

  // The defines that instantiate the template: -DHK_DTYPE=, -DHK_THREADS=,
  // -DHK_ROWS=, -DHK_VEC=, -DHK_ITEMS=, and -DHK_CLUSTER= for cluster points,
  // -DHK_LOG=1 for log_softmax. Throws Error if `p` is not a point for `dtype`.
  static std::vector<std::string> compileOptions(DType dtype, const SoftmaxParams& p,
                                                 SoftmaxOp op = SoftmaxOp::Softmax);

  // One CTA of `threads` per `rowsPerCta` rows, or `cluster` CTAs per row (per
  // `clusterRows` rows when pipelined); the kernel strides over rows when they
  // exceed the grid.
  static LaunchGeometry launchGeometry(const SoftmaxVariant& v, const SoftmaxParams& p);

  // Ideal DRAM traffic: the input read once and the output written once.
  static double bytesMoved(const SoftmaxVariant& v);

  // Largest absolute difference from ATen's _softmax allowed (the one table):
  //   float32   2e-6
  //   float16   2^-11  (1 ulp of float16 in [0.5, 1); outputs lie in [0, 1])
  //   bfloat16  2^-8   (1 ulp of bfloat16 in [0.5, 1))
  // Note [Softmax tolerance]
  // 16-bit: both sides compute in fp32 and round once, so outputs differ by at
  // most one rounding step. float32: the terms match ATen's bit for bit (both
  // use expf) but the sum's order differs, and fp32 summation error is of the
  // order of 1e-6 relative on long rows: on H200, over 19 shapes x 8 input
  // kinds, ATen was up to 6.6e-7 from the fp64 result, this family up to
  // 9.5e-7, and the two up to 8.3e-7 apart. 2e-6 bounds two such errors.
  // `cols` is in the signature for families whose error grows with the
  // reduction length; here the observed error does not need it.
  static double tolerance(DType dtype, int64_t cols);

  // log_softmax's outputs are unbounded (x - max - log(sum)), so its bound is
  // |out - ref| <= absolute + relative * |ref|:
  //   float32   absolute 4e-6, relative 2^-22 (2 ulp)
  //   float16   absolute 4e-6, relative 2^-10 (1 ulp of float16)
  //   bfloat16  absolute 4e-6, relative 2^-7  (1 ulp of bfloat16)
  // Note [Log-softmax tolerance]
  // Both sides compute (x - max) - log(sum) in fp32 with the same operations;
  // only the sum's order differs (up to ~1e-6 relative on long rows, Note
  // [Softmax tolerance]), which moves log(sum) by ~1e-6 absolute: the
  // absolute part, twice that. (x - max) is bit-identical on both sides, so
  // the rest is the final rounding: 1 ulp of the output type.
  struct Bound {
    double absolute = 0;
    double relative = 0;
  };
  static Bound logSoftmaxTolerance(DType dtype);

  // The harness's elementwise bound for softmax against ATen's _softmax
  // (Note [Softmax bound] in src/SoftmaxFamily.cpp):
  //   |out - ref| <= absolute + relative * |ref|
  //   float32   absolute 2^-126, relative 2 s(cols) + 2^-22
  //   float16   absolute 2^-24,  relative 2^-10 (1 ulp of float16)
  //   bfloat16  absolute 2^-126, relative 2^-7  (1 ulp of bfloat16)
  // with s(cols) = 4e-6 max(1, sqrt(cols / 16384)). `tolerance` above stays
  // the coarse figure (the largest error over outputs in [0, 1]) the agent's
  // task and the GPU tests quote.
  static Bound softmaxBound(DType dtype, int64_t cols);

  // Softmax rows sum to 1 (Note [Softmax row sums] in src/SoftmaxFamily.cpp):
  // against a float64 reference p, a row of the candidate's output may sum to
  // 1 within relative + (count of p below `smallBelow`) * perSmall.
  struct RowSumBound {
    double relative = 0;
    double smallBelow = 0;
    double perSmall = 0;
  };
  static RowSumBound rowSumBound(DType dtype, int64_t cols);

  // log_softmax's logsumexp is 0 (Note [Log-softmax logsumexp] in
  // src/SoftmaxFamily.cpp): |logsumexp(out row)| <= absolute + relative * H,
  // H = sum_c p_c |log p_c| of the float64 reference (the row's entropy).
  static Bound logSumExpBound(DType dtype, int64_t cols);
};

}  // namespace hotkernel::kernels
