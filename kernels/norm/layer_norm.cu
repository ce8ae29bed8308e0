// Layer normalization over the last dimension of a contiguous [rows, cols] tensor:
//   mean[r]   = sum_c in[r, c] / cols                                   (fp32)
//   rstd[r]   = rsqrt(sum_c (in[r, c] - mean[r])^2 / cols + eps)       (fp32, biased variance)
//   out[r, c] = weight[c] * (rstd[r] * (in[r, c] - mean[r])) + bias[c] (weight, bias optional)
// the semantics of aten::native_layer_norm(input, normalized_shape, weight,
// bias, eps) on CUDA: the normalized dims folded into cols, the leading dims
// into rows, out in the input's dtype, mean and rstd in float32 (ATen's
// opmath type), arithmetic in fp32, and the same expression as ATen's
// vectorized kernel (gamma * (rstd * (x - mean)) + beta).
//
// Compiled by NVRTC with the defines below (LayerNormFamily::compileOptions). Its
// one include, hk_prelude.cuh (element type, conversions, L2 hints, warp and
// row sums: what the family templates share), is expanded in place by
// LayerNormFamily::source(), so NVRTC still sees one self-contained source.
//   HK_DTYPE       0 = float32, 1 = float16, 2 = bfloat16 (hotkernel::kernels::DType)
//   HK_THREADS     threads per CTA, a power of two in [32, 1024]
//   HK_ROWS        rows per CTA: 1, or HK_THREADS / HK_ROWS <= 32 (each row within one warp)
//   HK_VEC         elements per vector access, a power of two, HK_VEC * sizeof(element) <= 16
//   HK_ITEMS       > 0: register-resident, each thread holds HK_ITEMS vectors of its row
//                  (one read of the row); 0: streaming, any row length, the row is read twice
//   HK_HAS_WEIGHT  1: multiply by weight (the input's dtype, `cols` elements); 0: no weight
//   HK_HAS_BIAS    1: add bias (the input's dtype, `cols` elements); 0: no bias
//   HK_COLS        (optional) the variant's column count: the `cols` argument is then ignored
//                  (Note [Specialized columns] in rms_norm.cu)
//   HK_CLUSTER     (optional, default 1) 2, 4, 8 or 16 (16: non-portable, the launcher opts in), with
//                  HK_ROWS == 1, sm_90+: a thread-block cluster of HK_CLUSTER CTAs serves each row
//                  (Note [Split layer norm rows])
//   HK_SPLIT       (optional, default 1) > 1, with HK_ROWS == 1, HK_CLUSTER == 1 and HK_ITEMS == 0,
//                  sm_70+: HK_SPLIT CTAs of a cooperative grid serve each row (Note [Split layer
//                  norm rows])
//   HK_GROUPS      (optional; group_norm's, GroupNormFamily::compileOptions) the groups G, with
//   HK_GROUP_HW    the spatial extent HxW and HK_COLS: aten::native_group_norm's semantics (Note
//                  [Group norm rows])
//
// Entry point (LayerNormFamily::kKernelName):
//   extern "C" __global__ void hk_layer_norm(const void* in, const void* weight, const void* bias,
//                                            void* out, float* mean, float* rstd,
//                                            long long rows, long long cols, float eps,
//                                            float* partials, unsigned* counter)
// `weight` / `bias` are ignored when their define is 0. mean[r] and rstd[r] are
// written for every row. `partials` and `counter` are used only when HK_SPLIT > 1
// (null otherwise): 2 * rows * HK_SPLIT floats of scratch, and a counter that is
// 0 at launch and 0 again when the kernel ends.
//
// Preconditions (checked on the host by LayerNormFamily's guards, not here):
//   cols % HK_VEC == 0; in, weight, bias and out aligned to HK_VEC * sizeof(element);
//   mean and rstd aligned to 4; cols <= HK_CLUSTER * HK_ROW_THREADS * HK_VEC * HK_ITEMS when
//   HK_ITEMS > 0; cols <= 2^30; gridDim.x == rows * HK_CLUSTER when HK_CLUSTER > 1, and
//   gridDim.x == rows * HK_SPLIT, launched cooperatively, when HK_SPLIT > 1.
//
// Note [Layer norm statistics]
// Register-resident: the corrected two-pass algorithm (Chan, Golub and
// LeVeque) over the registers. Pass 1: the row sum gives a first mean m.
// Pass 2: the deviations d = x - m give both S1 = sum d and S2 = sum d^2 (one
// paired reduction, one barrier); then mean = m + S1 / n and
// M2 = S2 - S1 * (S1 / n). A plain second pass (M2 = S2) is not enough for rows
// offset far from zero: m carries the rounding of a float32 sum of n values
// of size |mean| (about |mean| * 2^-24 * log2 n), S2 then exceeds the true M2
// by n (m - mean)^2, and x - m carries that error into out. Measured in a
// float32 emulation, rows of 4096 values uniform in [-1, 5) + 1e5 (the
// harness's "shifted" input): plain two-pass rstd 9e-6 from float64, mean
// 7.5e-3; corrected 4e-8 and 3.6e-3 (the mean's own float32 rounding). ATen's
// float32 Welford on the same rows: rstd 1.4e-4, mean 1.1e-2 (the harness
// charges ATen's own error to neither side: Note [Norm harness bounds]).
// Streaming: the row is read once for the statistics, so each thread keeps a
// running (count, mean, M2) triple of the shifted values x - K, folding in one
// batch of HK_STREAM_UNROLL vectors at a time (the batch's own mean and M2 by
// two passes over its registers, then Chan's update); the triples then merge
// across the row, and mean = K + the merged mean. K is the row's first element
// (one broadcast load; 0 when it is not finite or beyond 2^64, where x - K could
// overflow): every mean the merges see is then of the size of the row's spread,
// not of its offset, so Chan's d = mb - ma loses nothing to cancellation.
// The cross-thread merge is written to be commutative bit for bit (Note [Norm
// deterministic reductions]): mean = (na/n)*ma + (nb/n)*mb, M2 = (M2a + M2b) +
// d^2 * (na*nb/n), with no fma contraction, so every lane of the butterfly
// ends with the same bits.
//
// Note [Norm special values]
// No special cases: the arithmetic is ATen's, so a row holding inf or NaN
// gives NaN where ATen does. Lanes that hold no element contribute exact
// zeros to the sums and are left out of the deviations.
//
// Note [Layer norm overflow]
// ATen's Welford keeps a running mean, which stays finite for finite inputs
// near the type's maximum, where a plain sum overflows; its variance then
// overflows to inf, rstd = 0, and out = bias (or 0). To give the same, a row
// (streaming: a batch) whose sum is not finite recomputes its mean as the sum
// of x * (1 / n). A variance that overflows gives inf here too.
//
// Note [Split layer norm rows]
// Few very long rows split over a cluster as in rms_norm.cu (Note [Split norm
// rows over a cluster] there): CTA `rank` takes a slice of the row and
// computes its slice's (count, mean, M2) triple of x - shift, the shift the
// row's first element in every CTA (as when streaming): registers by the
// corrected two passes (with the overflow rescue, uniform within the CTA),
// streaming by shifted Welford batches. Without the shift, the slices' means
// of a row offset far from its spread carry float32 roundings of the offset's
// size into the merge's d^2 term, an rstd error beyond the family's bound on
// the harness's shifted rows (docs/design/norms.md, "group_norm"). The (mean, M2) pairs go
// to every peer (Note [Pushed cluster pairs] in hk_prelude.cuh); the counts
// follow from the ranks' slice sizes. Every CTA merges the HK_CLUSTER triples
// in rank order with the bitwise-symmetric merge, so the cluster agrees on
// mean and rstd bit for bit; an empty slice (a row of fewer vectors than
// CTAs) is a count of 0, which the merge skips. With HK_SPLIT > 1 the row's
// HK_SPLIT CTAs are CTAs of one cooperative grid, streamed slices: each writes
// its (mean, M2) pair to partials[2 * blockIdx.x], meets the grid at the
// counter and merges its row's pairs in rank order the same way (Note [Split
// norm rows over a cooperative grid] in rms_norm.cu, which resets the counter
// the same way).
//
// Note [Norm deterministic reductions]
// As in softmax_lastdim.cu: per-thread sums in index order, then an xor
// butterfly within each warp and the same butterfly across the warps'
// partials; every lane ends with the same bits (addition is commutative), so
// results are bitwise reproducible and do not depend on the grid. rms_norm.cu
// reduces the same way.

#if !defined(HK_DTYPE) || !defined(HK_THREADS) || !defined(HK_ROWS) || !defined(HK_VEC) || !defined(HK_ITEMS) || \
    !defined(HK_HAS_WEIGHT) || !defined(HK_HAS_BIAS)
#error "layer_norm.cu needs HK_DTYPE, HK_THREADS, HK_ROWS, HK_VEC, HK_ITEMS, HK_HAS_WEIGHT and HK_HAS_BIAS"
#endif

#define HK_ROW_THREADS (HK_THREADS / HK_ROWS)
#define HK_ROW_WARPS (HK_ROW_THREADS / 32)  // warps per row when a row spans warps (HK_ROWS == 1)
// Streaming: vectors each thread loads before it uses the first (16 elements,
// at most 8 accesses), as in softmax_lastdim.cu; at least 4 in a grid split
// (as rms_norm.cu's).
#define HK_STREAM_UNROLL (HK_VEC >= 2 ? (HK_SPLIT > 1 && 16 / HK_VEC < 4 ? 4 : 16 / HK_VEC) : 8)
// Pass 2 re-reads the row mostly from L2 (shorter latency) and loads the
// column arrays next to it: a batch of HK_STREAM_UNROLL >> (arrays present)
// vectors (at least 1) keeps x and its arrays within HK_STREAM_UNROLL
// vectors' worth of registers, as in pass 1.
#define HK_STREAM_UNROLL2 ((HK_STREAM_UNROLL >> (HK_HAS_WEIGHT + HK_HAS_BIAS)) > 0 ? (HK_STREAM_UNROLL >> (HK_HAS_WEIGHT + HK_HAS_BIAS)) : 1)

static_assert(HK_THREADS >= 32 && HK_THREADS <= 1024 && (HK_THREADS & (HK_THREADS - 1)) == 0,
              "HK_THREADS must be a power of two in [32, 1024]");
static_assert(HK_ROWS >= 1 && (HK_ROWS & (HK_ROWS - 1)) == 0 && HK_ROWS <= HK_THREADS &&
                  (HK_ROWS == 1 || HK_ROW_THREADS <= 32),
              "HK_ROWS must be 1 or leave each row at most one warp");
static_assert(HK_ITEMS >= 0 && HK_ITEMS <= 16, "HK_ITEMS must be in [0, 16]");
static_assert(HK_ROWS == 1 || HK_ITEMS > 0, "several rows per CTA are register-resident only");
static_assert(HK_HAS_WEIGHT == 0 || HK_HAS_WEIGHT == 1, "HK_HAS_WEIGHT must be 0 or 1");
static_assert(HK_HAS_BIAS == 0 || HK_HAS_BIAS == 1, "HK_HAS_BIAS must be 0 or 1");
#ifndef HK_CLUSTER
#define HK_CLUSTER 1
#endif
static_assert(HK_CLUSTER == 1 || ((HK_CLUSTER == 2 || HK_CLUSTER == 4 || HK_CLUSTER == 8 || HK_CLUSTER == 16) &&
                                  HK_ROWS == 1),
              "HK_CLUSTER must be 1, or 2, 4, 8 or 16 with HK_ROWS == 1");
#ifndef HK_SPLIT
#define HK_SPLIT 1
#endif
static_assert(HK_SPLIT == 1 || (HK_SPLIT > 1 && HK_ROWS == 1 && HK_CLUSTER == 1 && HK_ITEMS == 0),
              "HK_SPLIT > 1 needs HK_ROWS == 1, HK_CLUSTER == 1 and HK_ITEMS == 0");

// Note [Group norm rows]
// aten::native_group_norm(X [N, C, *], weight [C]?, bias [C]?, N, C, HxW, G,
// eps) on a contiguous X is this kernel over rows = N * G rows of cols =
// (C / G) * HxW elements (a group's channels are contiguous), with three
// differences, as ATen's CUDA kernels of torch 2.11 compute them:
//  - mean and rstd are the input's dtype (float32 for float32 only): the row's
//    float32 statistics rounded to it, and the output is computed from the
//    rounded values (ATen's RowwiseMomentsCUDAKernel<T> stores T, and
//    ComputeFusedParamsCUDAKernel reads them back); eps arrives already
//    rounded to the dtype (ATen passes static_cast<T>(eps)), so rstd =
//    rsqrt(var + eps) is ATen's;
//  - the affine is per channel c = (row % G) * (C / G) + col / HxW, and ATen
//    folds it into a = rstd * w[c], b = -a * mean + bias[c] (w 1 and bias 0
//    when absent; float32, fma-contracted) and out = a * x + b; with neither
//    weight nor bias, out = (x - mean) * rstd;
//  - HxW is a multiple of HK_VEC, so every vector lies in one channel: its a
//    and b are computed once from two scalar loads that hit L1.
// HxW == 1 (ATen's GroupNorm1dForward, another expression) is refused by the
// family's guard.
#ifdef HK_GROUPS
#define HK_GROUP_MODE 1
#ifndef HK_COLS
#error "group mode (HK_GROUPS) needs HK_COLS"
#endif
#define HK_GROUP_CHANNELS (HK_COLS / HK_GROUP_HW)  // C / G, the channels of a group
static_assert(HK_GROUPS >= 1 && HK_GROUP_HW >= 2 && HK_GROUP_HW % HK_VEC == 0 && HK_COLS % HK_GROUP_HW == 0,
              "HK_GROUP_HW must be >= 2, a multiple of HK_VEC and divide HK_COLS");
#else
#define HK_GROUP_MODE 0
#endif

// Note [Norm launch bounds]
// __launch_bounds__(HK_THREADS, 1): at most HK_THREADS threads, at least one
// CTA an SM. With the first argument alone, ptxas picks its own occupancy
// target and squeezed points just above a step into it with a few bytes of
// spills (1024 threads x 12 values into 32 registers, 512 x 48 into 64, some
// streaming points into 40 or 48). Stating the minimum lifts that target, so
// no point spills; the price is a few registers more on some points than
// ptxas' occupancy-driven choice (1024 x 8 values: 40 instead of 32, one CTA
// an SM instead of two). Whether an occupancy axis pays is for measurements.
#define HK_LAUNCH_BOUNDS __launch_bounds__(HK_THREADS, 1)

// L2 hints for the streaming variant's 16-byte accesses only (Note [Streaming
// L2 hints] in hk_prelude.cuh).
#define HK_STREAM_HINTS (HK_ITEMS == 0 && HK_VEC * (HK_DTYPE == 0 ? 4 : 2) == 16)
// L2 hints only: no L1 hints (Note [Streaming L1 hints] serves rms_norm and one-CTA softmax).
#define HK_STREAM_L1_HINTS 0

#include "hk_prelude.cuh"

__device__ __forceinline__ hk_pack hk_zero_pack() {
  hk_pack p;
#pragma unroll
  for (int j = 0; j < HK_VEC; ++j) p.v[j] = hk_from_float(0.0f);
  return p;
}

// Two row-wide sums with one barrier (hk_row_sum's rules, one buffer each).
__device__ __forceinline__ void hk_row_sum2(float& a, float& b, float* bufA, float* bufB) {
#if HK_ROW_THREADS <= 32
  a = hk_warp_sum(a, HK_ROW_THREADS);
  b = hk_warp_sum(b, HK_ROW_THREADS);
#else
  a = hk_warp_sum(a, 32);
  b = hk_warp_sum(b, 32);
  if ((threadIdx.x & 31) == 0) {
    bufA[threadIdx.x >> 5] = a;
    bufB[threadIdx.x >> 5] = b;
  }
  __syncthreads();
  a = hk_warp_sum(bufA[threadIdx.x & (HK_ROW_WARPS - 1)], HK_ROW_WARPS);
  b = hk_warp_sum(bufB[threadIdx.x & (HK_ROW_WARPS - 1)], HK_ROW_WARPS);
#endif
}

// Welford triples (Note [Layer norm statistics]). The merge is symmetric in
// its two arguments bit for bit: __fmul_rn / __fadd_rn / __fdiv_rn are never
// contracted into fmas.
struct hk_stats {
  float n, mean, m2;
};

__device__ __forceinline__ hk_stats hk_stats_merge(const hk_stats& a, const hk_stats& b) {
  // An empty side leaves the other as it is (and never multiplies an
  // overflowed d^2 by a zero count).
  if (a.n == 0.0f) return b;
  if (b.n == 0.0f) return a;
  const float n = __fadd_rn(a.n, b.n);
  const float d = __fsub_rn(b.mean, a.mean);
  hk_stats s;
  s.n = n;
  s.mean = __fadd_rn(__fmul_rn(__fdiv_rn(a.n, n), a.mean), __fmul_rn(__fdiv_rn(b.n, n), b.mean));
  s.m2 = __fadd_rn(__fadd_rn(a.m2, b.m2), __fmul_rn(__fmul_rn(d, d), __fdiv_rn(__fmul_rn(a.n, b.n), n)));
  return s;
}

__device__ __forceinline__ hk_stats hk_warp_stats(hk_stats s, int width) {
#pragma unroll
  for (int o = width / 2; o > 0; o >>= 1) {
    hk_stats t;
    t.n = __shfl_xor_sync(0xffffffffu, s.n, o);
    t.mean = __shfl_xor_sync(0xffffffffu, s.mean, o);
    t.m2 = __shfl_xor_sync(0xffffffffu, s.m2, o);
    s = hk_stats_merge(s, t);
  }
  return s;
}

// `buf` holds three floats per warp (same reuse rule as hk_row_sum).
__device__ __forceinline__ hk_stats hk_row_stats(hk_stats s, float (*buf)[HK_THREADS / 32]) {
#if HK_ROW_THREADS <= 32
  return hk_warp_stats(s, HK_ROW_THREADS);
#else
  s = hk_warp_stats(s, 32);
  if ((threadIdx.x & 31) == 0) {
    buf[0][threadIdx.x >> 5] = s.n;
    buf[1][threadIdx.x >> 5] = s.mean;
    buf[2][threadIdx.x >> 5] = s.m2;
  }
  __syncthreads();
  const int w = threadIdx.x & (HK_ROW_WARPS - 1);
  return hk_warp_stats(hk_stats{buf[0][w], buf[1][w], buf[2][w]}, HK_ROW_WARPS);
#endif
}

// One output element: weight * (rstd * (x - mean)) + bias, ATen's expression.
__device__ __forceinline__ float hk_affine(float x, float mean, float r, hk_elem w, hk_elem b) {
  float y = r * (x - mean);
#if HK_HAS_WEIGHT
  y = hk_to_float(w) * y;
#endif
#if HK_HAS_BIAS
  y = y + hk_to_float(b);
#endif
  return y;
}

// What the writers read weight and bias through: the whole row's packs, or
// in group mode the row's group's first channel (Note [Group norm rows]).
#if HK_GROUP_MODE
typedef const hk_elem* hk_affine_ptr;
#else
typedef const hk_pack* hk_affine_ptr;
#endif

__device__ __forceinline__ hk_affine_ptr hk_affine_of(const void* p, long long row) {
#if HK_GROUP_MODE
  return p == nullptr ? nullptr : static_cast<const hk_elem*>(p) + (row % HK_GROUPS) * HK_GROUP_CHANNELS;
#else
  (void)row;
  return static_cast<const hk_pack*>(p);
#endif
}

// The row's statistics as the kernel uses and stores them: group mode rounds
// both to the dtype first (Note [Group norm rows]).
__device__ __forceinline__ void hk_round_stats(float& mean, float& r) {
#if HK_GROUP_MODE
  mean = hk_to_float(hk_from_float(mean));
  r = hk_to_float(hk_from_float(r));
#else
  (void)mean;
  (void)r;
#endif
}

__device__ __forceinline__ void hk_store_stats(float* mean_out, float* rstd_out, long long row, float mean, float r) {
#if HK_GROUP_MODE
  reinterpret_cast<hk_elem*>(mean_out)[row] = hk_from_float(mean);
  reinterpret_cast<hk_elem*>(rstd_out)[row] = hk_from_float(r);
#else
  mean_out[row] = mean;
  rstd_out[row] = r;
#endif
}

#if HK_GROUP_MODE
// Vector v of the row (all its elements in one channel) normalized as ATen's
// group norm: a * x + b, or (x - mean) * r without weight and bias.
__device__ __forceinline__ hk_pack hk_group_apply(hk_affine_ptr weight, hk_affine_ptr bias, int v,
                                                  const float (&x)[HK_VEC], float mean, float r) {
  hk_pack p;
#if HK_HAS_WEIGHT || HK_HAS_BIAS
  const int ch = (v * HK_VEC) / HK_GROUP_HW;
#if HK_HAS_WEIGHT
  const float a = __fmul_rn(r, hk_to_float(weight[ch]));
#else
  const float a = r;
#endif
#if HK_HAS_BIAS
  const float b = fmaf(-a, mean, hk_to_float(bias[ch]));
#else
  const float b = fmaf(-a, mean, 0.0f);
#endif
#pragma unroll
  for (int j = 0; j < HK_VEC; ++j) p.v[j] = hk_from_float(fmaf(a, x[j], b));
#else
  (void)weight;
  (void)bias;
  (void)v;
#pragma unroll
  for (int j = 0; j < HK_VEC; ++j) p.v[j] = hk_from_float(__fmul_rn(__fsub_rn(x[j], mean), r));
#endif
  return p;
}
#endif

// The slice helpers: vectors [begin, end) of one row, thread `tid` of the
// row's HK_ROW_THREADS taking begin + tid, begin + tid + HK_ROW_THREADS, ...
// The whole row (begin 0) for a CTA's rows, a cluster rank's slice for split
// rows (Note [Split layer norm rows]).
#if HK_ITEMS > 0
// Register-resident: one read, all loads issued before first use; lanes past
// `end` hold zeros (Note [Norm special values]).
__device__ __forceinline__ void hk_load_slice(const hk_pack* src, int begin, int end, int tid,
                                              float (&x)[HK_ITEMS][HK_VEC]) {
#pragma unroll
  for (int i = 0; i < HK_ITEMS; ++i) {
    const int v = begin + i * HK_ROW_THREADS + tid;
    if (v < end) {
      hk_unpack(src[v], x[i]);
    } else {
#pragma unroll
      for (int j = 0; j < HK_VEC; ++j) x[i][j] = 0.0f;
    }
  }
}

// Pass 2 of the corrected two passes (Note [Layer norm statistics]) over the
// slice's registers, whose `n` elements shifted by `shift` have the first mean
// `mean`: the deviations (x - shift) - mean summed (S1) and squared (S2) over
// the row (the CTA's part of it, one barrier); then mean += S1 / n and m2 = S2
// - S1 * (S1 / n). A row's own CTA passes shift 0 (x - 0 is x).
__device__ __forceinline__ void hk_corrected_moments(const float (&x)[HK_ITEMS][HK_VEC], int begin, int end, int tid,
                                                     float n, float shift, float& mean, float& m2, float* bufA,
                                                     float* bufB) {
  float s1 = 0.0f;
  m2 = 0.0f;
#pragma unroll
  for (int i = 0; i < HK_ITEMS; ++i) {
    if (begin + i * HK_ROW_THREADS + tid < end) {
      float part1 = 0.0f, part2 = 0.0f;
#pragma unroll
      for (int j = 0; j < HK_VEC; ++j) {
        const float d = (x[i][j] - shift) - mean;
        part1 += d;
        part2 = fmaf(d, d, part2);
      }
      s1 += part1;
      m2 += part2;
    }
  }
  hk_row_sum2(s1, m2, bufA, bufB);
  const float c = __fdiv_rn(s1, n);
  // S1^2 / n <= S2: the correction never cancels more than S2 holds. A sum
  // that overflowed (or met inf / NaN) is left as it is: rstd = 0 or NaN, as
  // ATen's; a negative rounding residue of a constant row is 0.
  if (isfinite(m2)) m2 = fmaxf(__fsub_rn(m2, __fmul_rn(c, s1)), 0.0f);
  if (isfinite(c)) mean = __fadd_rn(mean, c);
}

// Weight and bias are loaded here, after the reductions, rather than once
// before the row loop: x alone is live across the reductions, and ptxas may
// interleave these loads with the output as registers allow (Note [Norm
// register budget]). They hit L1 / L2: every row reads the same.
__device__ __forceinline__ void hk_write_slice(hk_pack* dst, hk_affine_ptr weight, hk_affine_ptr bias, int begin,
                                               int end, int tid, const float (&x)[HK_ITEMS][HK_VEC], float mean,
                                               float r) {
  (void)weight;
  (void)bias;
#pragma unroll
  for (int i = 0; i < HK_ITEMS; ++i) {
    const int v = begin + i * HK_ROW_THREADS + tid;
#if HK_GROUP_MODE
    if (v < end) dst[v] = hk_group_apply(weight, bias, v, x[i], mean, r);
#else
    if (v < end) {
#if HK_HAS_WEIGHT
      const hk_pack wp = weight[v];
#endif
#if HK_HAS_BIAS
      const hk_pack bp = bias[v];
#endif
      hk_pack p;
#pragma unroll
      for (int j = 0; j < HK_VEC; ++j) {
#if HK_HAS_WEIGHT
        const hk_elem wj = wp.v[j];
#else
        const hk_elem wj = 0;
#endif
#if HK_HAS_BIAS
        const hk_elem bj = bp.v[j];
#else
        const hk_elem bj = 0;
#endif
        p.v[j] = hk_from_float(hk_affine(x[i][j], mean, r, wj, bj));
      }
      dst[v] = p;
    }
#endif
  }
}
#else
// Streaming pass 1: this thread's (count, mean, M2) triple of x - shift, one
// batch of HK_STREAM_UNROLL vectors at a time (Note [Layer norm statistics]).
__device__ __forceinline__ hk_stats hk_stream_stats(const hk_pack* src, int begin, int end, int tid, float shift,
                                                    unsigned long long keep) {
  hk_stats st{0.0f, 0.0f, 0.0f};
  for (int v0 = begin + tid; v0 < end; v0 += HK_ROW_THREADS * HK_STREAM_UNROLL) {
    hk_pack p[HK_STREAM_UNROLL];
#pragma unroll
    for (int u = 0; u < HK_STREAM_UNROLL; ++u) {
      const int v = v0 + u * HK_ROW_THREADS;
      p[u] = v < end ? hk_load_first(src + v, keep) : hk_zero_pack();
    }
    // Vectors of this batch inside the slice: at least 1 (v0 < end).
    const int inSlice = min(HK_STREAM_UNROLL, (end - v0 + HK_ROW_THREADS - 1) / HK_ROW_THREADS);
    float bs = 0.0f;
#pragma unroll
    for (int u = 0; u < HK_STREAM_UNROLL; ++u) {
      if (u < inSlice) {
        float part = 0.0f;
#pragma unroll
        for (int j = 0; j < HK_VEC; ++j) part += hk_to_float(p[u].v[j]) - shift;
        bs += part;
      }
    }
    hk_stats batch;
    batch.n = static_cast<float>(inSlice * HK_VEC);
    batch.mean = __fdiv_rn(bs, batch.n);
    if (!isfinite(batch.mean)) {
      // The batch sum overflowed (Note [Layer norm overflow]).
      const float inv = __frcp_rn(batch.n);
      batch.mean = 0.0f;
#pragma unroll
      for (int u = 0; u < HK_STREAM_UNROLL; ++u) {
        if (u < inSlice) {
#pragma unroll
          for (int j = 0; j < HK_VEC; ++j) batch.mean = fmaf(hk_to_float(p[u].v[j]) - shift, inv, batch.mean);
        }
      }
    }
    batch.m2 = 0.0f;
#pragma unroll
    for (int u = 0; u < HK_STREAM_UNROLL; ++u) {
      if (u < inSlice) {
        float part = 0.0f;
#pragma unroll
        for (int j = 0; j < HK_VEC; ++j) {
          const float d = (hk_to_float(p[u].v[j]) - shift) - batch.mean;
          part = fmaf(d, d, part);
        }
        batch.m2 += part;
      }
    }
    st = hk_stats_merge(st, batch);
  }
  return st;
}

// Pass 2: re-read the slice (mostly from L2), weight and bias, write.
__device__ __forceinline__ void hk_stream_write(const hk_pack* src, hk_pack* dst, hk_affine_ptr weight,
                                                hk_affine_ptr bias, int begin, int end, int tid, float mean, float r,
                                                unsigned long long drop) {
  (void)weight;
  (void)bias;
#if HK_GROUP_MODE
  for (int v0 = begin + tid; v0 < end; v0 += HK_ROW_THREADS * HK_STREAM_UNROLL) {
    hk_pack p[HK_STREAM_UNROLL];
#pragma unroll
    for (int u = 0; u < HK_STREAM_UNROLL; ++u) {
      const int v = v0 + u * HK_ROW_THREADS;
      if (v < end) p[u] = hk_load_again(src + v, drop);
    }
#pragma unroll
    for (int u = 0; u < HK_STREAM_UNROLL; ++u) {
      const int v = v0 + u * HK_ROW_THREADS;
      if (v < end) {
        float x[HK_VEC];
        hk_unpack(p[u], x);
        hk_store_stream(dst + v, hk_group_apply(weight, bias, v, x, mean, r), drop);
      }
    }
  }
#else
  for (int v0 = begin + tid; v0 < end; v0 += HK_ROW_THREADS * HK_STREAM_UNROLL2) {
    hk_pack p[HK_STREAM_UNROLL2];
#if HK_HAS_WEIGHT
    hk_pack wp[HK_STREAM_UNROLL2];
#endif
#if HK_HAS_BIAS
    hk_pack bp[HK_STREAM_UNROLL2];
#endif
#pragma unroll
    for (int u = 0; u < HK_STREAM_UNROLL2; ++u) {
      const int v = v0 + u * HK_ROW_THREADS;
      if (v < end) {
        p[u] = hk_load_again(src + v, drop);
#if HK_HAS_WEIGHT
        wp[u] = weight[v];
#endif
#if HK_HAS_BIAS
        bp[u] = bias[v];
#endif
      }
    }
#pragma unroll
    for (int u = 0; u < HK_STREAM_UNROLL2; ++u) {
      const int v = v0 + u * HK_ROW_THREADS;
      if (v < end) {
#pragma unroll
        for (int j = 0; j < HK_VEC; ++j) {
#if HK_HAS_WEIGHT
          const hk_elem wj = wp[u].v[j];
#else
          const hk_elem wj = 0;
#endif
#if HK_HAS_BIAS
          const hk_elem bj = bp[u].v[j];
#else
          const hk_elem bj = 0;
#endif
          p[u].v[j] = hk_from_float(hk_affine(hk_to_float(p[u].v[j]), mean, r, wj, bj));
        }
        hk_store_stream(dst + v, p[u], drop);
      }
    }
  }
#endif
}
#endif  // HK_ITEMS > 0

#if HK_SPLIT > 1
// Note [Split layer norm rows], over a cooperative grid.
extern "C" __global__ void HK_LAUNCH_BOUNDS
    hk_layer_norm(const void* in_, const void* weight_, const void* bias_, void* out_, float* mean_out,
                  float* rstd_out, long long rows, long long cols, float eps, float* partials, unsigned* counter) {
  __shared__ float hk_buf[4][HK_THREADS / 32];
  __shared__ float hk_moments[2];  // the row's (mean, M2) about the shift, from thread 0
  const hk_elem* in = static_cast<const hk_elem*>(in_);
  hk_elem* out = static_cast<hk_elem*>(out_);
#ifdef HK_COLS
  cols = HK_COLS;  // Note [Specialized columns] in rms_norm.cu
#endif
  const int nvec = static_cast<int>(cols / HK_VEC);  // exact: cols % HK_VEC == 0 (guard)
  const int rank = static_cast<int>(blockIdx.x % HK_SPLIT);
  const hk_slice slice = hk_slice_of(nvec, HK_SPLIT, rank);
  const int tid = threadIdx.x;
  const float fcols = static_cast<float>(cols);
  (void)rows;  // the grid is rows * HK_SPLIT: every run of HK_SPLIT CTAs has its row
  const long long row = blockIdx.x / HK_SPLIT;
  const hk_affine_ptr weight = hk_affine_of(weight_, row);
  const hk_affine_ptr bias = hk_affine_of(bias_, row);
  const long long offset = row * cols;
  const hk_pack* src = reinterpret_cast<const hk_pack*>(in + offset);
  hk_pack* dst = reinterpret_cast<hk_pack*>(out + offset);
  const unsigned long long keep = hk_policy_evict_last();
  const unsigned long long drop = hk_policy_evict_first();
  // The shift is the row's first element in every CTA of the row.
  float shift = hk_to_float(in[offset]);
  if (!(fabsf(shift) <= 0x1p64f)) shift = 0.0f;
  const hk_stats st = hk_row_stats(hk_stream_stats(src, slice.begin, slice.end, tid, shift, keep), hk_buf);
  if (tid == 0) {
    partials[2 * blockIdx.x] = st.mean;
    partials[2 * blockIdx.x + 1] = st.m2;
    hk_grid_arrive_and_wait(counter, gridDim.x);
    // The row's pairs in rank order, the counts from the ranks' slices: every CTA the same bits.
    const float* mine = partials + 2 * row * HK_SPLIT;
    hk_stats total{0.0f, 0.0f, 0.0f};
#pragma unroll
    for (int c = 0; c < HK_SPLIT; ++c) {
      const hk_slice theirs = hk_slice_of(nvec, HK_SPLIT, c);
      const float n = static_cast<float>((theirs.end - theirs.begin) * HK_VEC);
      total = hk_stats_merge(total, hk_stats{n, __ldcg(mine + 2 * c), __ldcg(mine + 2 * c + 1)});
    }
    hk_moments[0] = total.mean;
    hk_moments[1] = total.m2;
    hk_grid_leave(counter, gridDim.x);
  }
  __syncthreads();
  float mean = __fadd_rn(shift, hk_moments[0]);
  float r = rsqrtf(__fdiv_rn(hk_moments[1], fcols) + eps);
  hk_round_stats(mean, r);
  if (rank == 0 && tid == 0) hk_store_stats(mean_out, rstd_out, row, mean, r);
  hk_stream_write(src, dst, weight, bias, slice.begin, slice.end, tid, mean, r, drop);
}
#elif HK_CLUSTER == 1
extern "C" __global__ void HK_LAUNCH_BOUNDS
    hk_layer_norm(const void* in_, const void* weight_, const void* bias_, void* out_, float* mean_out,
                  float* rstd_out, long long rows, long long cols, float eps, float* partials, unsigned* counter) {
  // One buffer per reduction (the sum, the overflow rescue, the paired
  // deviations; three for the streaming triples) so that one row's
  // reductions need no barrier between them; rows after the first are fenced
  // at the loop's end.
  __shared__ float hk_buf[4][HK_THREADS / 32];
  (void)partials;
  (void)counter;
  const hk_elem* in = static_cast<const hk_elem*>(in_);
  hk_elem* out = static_cast<hk_elem*>(out_);
#ifdef HK_COLS
  cols = HK_COLS;  // Note [Specialized columns] in rms_norm.cu
#endif
  const int nvec = static_cast<int>(cols / HK_VEC);  // exact: cols % HK_VEC == 0 (guard)
  const int tid = threadIdx.x & (HK_ROW_THREADS - 1);  // this thread's place in its row
  const int sub = threadIdx.x / HK_ROW_THREADS;         // its row within the CTA's rows
  const float fcols = static_cast<float>(cols);

  // Every thread runs every iteration (barriers and shuffles need the whole
  // CTA / warp); a thread whose row is past the end only skips its accesses.
  // The grid covers the rows (one iteration); rms_norm.cu dropped the loop
  // (Note [One row group a CTA]), here that left 1024 x vec 2 x 16 items with
  // weight and bias spilling at 64 registers.
  for (long long first = static_cast<long long>(blockIdx.x) * HK_ROWS; first < rows;
       first += static_cast<long long>(gridDim.x) * HK_ROWS) {
    const long long row = first + sub;
    const int live = row < rows ? nvec : 0;  // vectors this thread may touch
    const long long offset = (row < rows ? row : first) * cols;
    const hk_pack* src = reinterpret_cast<const hk_pack*>(in + offset);
    hk_pack* dst = reinterpret_cast<hk_pack*>(out + offset);
    const hk_affine_ptr weight = hk_affine_of(weight_, row);
    const hk_affine_ptr bias = hk_affine_of(bias_, row);

#if HK_ITEMS > 0
    float x[HK_ITEMS][HK_VEC];
    hk_load_slice(src, 0, live, tid, x);
    float s = 0.0f;
#pragma unroll
    for (int i = 0; i < HK_ITEMS; ++i) {
      float part = 0.0f;
#pragma unroll
      for (int j = 0; j < HK_VEC; ++j) part += x[i][j];
      s += part;
    }
    float mean = __fdiv_rn(hk_row_sum(s, hk_buf[0]), fcols);
    // The sum overflowed (or the row holds inf / NaN): sum x / cols instead,
    // which stays finite for finite x (Note [Layer norm overflow]). The
    // branch must be uniform where the reduction is collective: the CTA
    // (every lane of a row has the same bits) or, with several rows per CTA,
    // the warp, whose rows that did not overflow keep their mean.
#if HK_ROW_THREADS > 32
    const bool rescue = !isfinite(mean);
#else
    const bool rescue = __any_sync(0xffffffffu, !isfinite(mean));
#endif
    if (rescue) {
      const float inv = __frcp_rn(fcols);
      s = 0.0f;
#pragma unroll
      for (int i = 0; i < HK_ITEMS; ++i) {
#pragma unroll
        for (int j = 0; j < HK_VEC; ++j) s = fmaf(x[i][j], inv, s);
      }
      s = hk_row_sum(s, hk_buf[2]);
      if (!isfinite(mean)) mean = s;
    }
    // Pass 2, corrected (Note [Layer norm statistics]).
    float m2;
    hk_corrected_moments(x, 0, live, tid, fcols, 0.0f, mean, m2, hk_buf[1], hk_buf[3]);
    float r = rsqrtf(__fdiv_rn(m2, fcols) + eps);
    hk_round_stats(mean, r);
    if (tid == 0 && row < rows) hk_store_stats(mean_out, rstd_out, row, mean, r);
    hk_write_slice(dst, weight, bias, 0, live, tid, x, mean, r);
#else
    const unsigned long long keep = hk_policy_evict_last();
    const unsigned long long drop = hk_policy_evict_first();
    // Streaming: every thread of the row reads the same first element for the shift.
    float shift = hk_to_float(in[offset]);
    if (!(fabsf(shift) <= 0x1p64f)) shift = 0.0f;
    hk_stats st = hk_stream_stats(src, 0, live, tid, shift, keep);
    st = hk_row_stats(st, hk_buf);
    float mean = __fadd_rn(shift, st.mean);
    float r = rsqrtf(__fdiv_rn(st.m2, fcols) + eps);
    hk_round_stats(mean, r);
    if (tid == 0 && row < rows) hk_store_stats(mean_out, rstd_out, row, mean, r);
    hk_stream_write(src, dst, weight, bias, 0, live, tid, mean, r, drop);
#endif
#if HK_ROW_THREADS > 32
    // The next rows write hk_buf again: wait until every warp has read it.
    if (first + static_cast<long long>(gridDim.x) * HK_ROWS < rows) __syncthreads();
#endif
  }
}
#else  // HK_CLUSTER > 1
// Note [Split layer norm rows].
extern "C" __global__ void __cluster_dims__(HK_CLUSTER, 1, 1) HK_LAUNCH_BOUNDS
    hk_layer_norm(const void* in_, const void* weight_, const void* bias_, void* out_, float* mean_out,
                  float* rstd_out, long long rows, long long cols, float eps, float* partials, unsigned* counter) {
  __shared__ float hk_buf[4][HK_THREADS / 32];
  __shared__ hk_pushed_pairs hk_pairs;  // the cluster's (mean, M2) pairs, pushed by every CTA
  (void)partials;
  (void)counter;
  const hk_elem* in = static_cast<const hk_elem*>(in_);
  hk_elem* out = static_cast<hk_elem*>(out_);
#ifdef HK_COLS
  cols = HK_COLS;  // Note [Specialized columns] in rms_norm.cu
#endif
  const int nvec = static_cast<int>(cols / HK_VEC);  // exact: cols % HK_VEC == 0 (guard)
  const int chunk = (nvec + HK_CLUSTER - 1) / HK_CLUSTER;
  const unsigned rank = hk_cluster_rank();
  const int begin = min(nvec, static_cast<int>(rank) * chunk);
  const int end = min(nvec, begin + chunk);
  const int tid = threadIdx.x;
  const float fcols = static_cast<float>(cols);
  (void)rows;  // the grid is rows * HK_CLUSTER: every cluster has its row
  hk_pushed_init(hk_pairs);
  const long long row = blockIdx.x / HK_CLUSTER;
  const hk_affine_ptr weight = hk_affine_of(weight_, row);
  const hk_affine_ptr bias = hk_affine_of(bias_, row);
  const long long offset = row * cols;
  const hk_pack* src = reinterpret_cast<const hk_pack*>(in + offset);
  hk_pack* dst = reinterpret_cast<hk_pack*>(out + offset);
  const float slice = static_cast<float>((end - begin) * HK_VEC);  // this CTA's elements (0: an empty slice)
  hk_stats st{0.0f, 0.0f, 0.0f};

#if HK_ITEMS > 0
  float x[HK_ITEMS][HK_VEC];
  hk_load_slice(src, begin, end, tid, x);
  // The shift is the row's first element in every CTA of the cluster, as when streaming: the slices' means are
  // then of the size of the row's spread, and the merge's differences of means lose nothing to an offset.
  float shift = hk_to_float(in[offset]);
  if (!(fabsf(shift) <= 0x1p64f)) shift = 0.0f;
  {
    // The slice's statistics as the one-CTA kernel's for a row (Note [Layer norm statistics]), of x - shift;
    // lanes past the slice's end hold no element.
    float s = 0.0f;
#pragma unroll
    for (int i = 0; i < HK_ITEMS; ++i) {
      if (begin + i * HK_ROW_THREADS + tid < end) {
        float part = 0.0f;
#pragma unroll
        for (int j = 0; j < HK_VEC; ++j) part += x[i][j] - shift;
        s += part;
      }
    }
    float m = __fdiv_rn(hk_row_sum(s, hk_buf[0]), slice);
    if (slice > 0.0f && !isfinite(m)) {  // CTA-uniform (Note [Layer norm overflow])
      const float inv = __frcp_rn(slice);
      s = 0.0f;
#pragma unroll
      for (int i = 0; i < HK_ITEMS; ++i) {
        if (begin + i * HK_ROW_THREADS + tid < end) {
#pragma unroll
          for (int j = 0; j < HK_VEC; ++j) s = fmaf(x[i][j] - shift, inv, s);
        }
      }
      m = hk_row_sum(s, hk_buf[2]);
    }
    float m2;
    hk_corrected_moments(x, begin, end, tid, slice, shift, m, m2, hk_buf[1], hk_buf[3]);
    if (slice > 0.0f) st = hk_stats{slice, m, m2};
  }
#else
  const unsigned long long keep = hk_policy_evict_last();
  const unsigned long long drop = hk_policy_evict_first();
  // The shift is the row's first element in every CTA of the cluster.
  float shift = hk_to_float(in[offset]);
  if (!(fabsf(shift) <= 0x1p64f)) shift = 0.0f;
  st = hk_stream_stats(src, begin, end, tid, shift, keep);
  st = hk_row_stats(st, hk_buf);
#endif
  hk_pushed_wait_init();
  hk_pushed_exchange(hk_pairs, st.mean, st.m2, rank, 0);
  // The cluster's triples in rank order: every CTA the same mean and rstd, bit for bit.
  hk_stats total{0.0f, 0.0f, 0.0f};
#pragma unroll
  for (int c = 0; c < HK_CLUSTER; ++c) {
    const int cb = min(nvec, c * chunk);
    const float n = static_cast<float>((min(nvec, cb + chunk) - cb) * HK_VEC);
    total = hk_stats_merge(total, hk_stats{n, hk_pairs.slot[0][c][0], hk_pairs.slot[0][c][1]});
  }
  float mean = __fadd_rn(shift, total.mean);
  float r = rsqrtf(__fdiv_rn(total.m2, fcols) + eps);
  hk_round_stats(mean, r);
  if (rank == 0 && tid == 0) hk_store_stats(mean_out, rstd_out, row, mean, r);
#if HK_ITEMS > 0
  hk_write_slice(dst, weight, bias, begin, end, tid, x, mean, r);
#else
  hk_stream_write(src, dst, weight, bias, begin, end, tid, mean, r, drop);
#endif
}
#endif  // HK_CLUSTER
