// RMS normalization over the last dimension of a contiguous [rows, cols] tensor:
//   rstd[r]   = rsqrt(sum_c in[r, c]^2 / cols + eps)          (fp32)
//   out[r, c] = weight[c] * (rstd[r] * in[r, c])               (weight optional)
// the semantics of aten::_fused_rms_norm(input, normalized_shape, weight, eps)
// on CUDA: the normalized dims folded into cols, the leading dims into rows,
// out in the input's dtype, rstd in float32 (ATen's opmath type), arithmetic
// in fp32, and the same expression order as ATen's vectorized kernel
// (gamma * (rstd * x)). eps arrives resolved: ATen's default for None is
// FLT_EPSILON for all three dtypes (RmsNormFamily::defaultEps).
//
// Compiled by NVRTC with the defines below (RmsNormFamily::compileOptions). Its
// one include, hk_prelude.cuh (element type, conversions, L2 hints, warp and
// row sums: what the family templates share), is expanded in place by
// RmsNormFamily::source(), so NVRTC still sees one self-contained source.
//   HK_DTYPE       0 = float32, 1 = float16, 2 = bfloat16 (hotkernel::kernels::DType)
//   HK_THREADS     threads per CTA, a power of two in [32, 1024]
//   HK_ROWS        rows per CTA: 1, or HK_THREADS / HK_ROWS <= 32 (each row within one warp)
//   HK_VEC         elements per vector access, a power of two, HK_VEC * sizeof(element) <= 16
//   HK_ITEMS       > 0: register-resident, each thread holds HK_ITEMS vectors of its row
//                  (one read of the row); 0: streaming, any row length, the row is read twice
//   HK_HAS_WEIGHT  1: multiply by weight (same dtype as the input, `cols` elements); 0: no weight
//   HK_COLS        (optional) the variant's column count: the `cols` argument is then ignored
//                  (Note [Specialized columns])
//   HK_CLUSTER     (optional, default 1) 2, 4, 8 or 16 (16: non-portable, the launcher opts in), with
//                  HK_ROWS == 1, sm_90+: a thread-block cluster of HK_CLUSTER CTAs serves each row
//                  (Note [Split norm rows over a cluster])
//   HK_SPLIT       (optional, default 1) > 1, with HK_ROWS == 1, HK_CLUSTER == 1 and HK_ITEMS == 0,
//                  sm_70+: HK_SPLIT CTAs of a cooperative grid serve each row (Note [Split norm rows
//                  over a cooperative grid])
//
// Entry point (RmsNormFamily::kKernelName):
//   extern "C" __global__ void hk_rms_norm(const void* in, const void* weight, void* out,
//                                          float* rstd, long long rows, long long cols, float eps,
//                                          float* partials, unsigned* counter)
// `weight` is ignored when HK_HAS_WEIGHT == 0. rstd[r] is written for every row. `partials` and
// `counter` are used only when HK_SPLIT > 1 (null otherwise): rows * HK_SPLIT floats of scratch,
// and a counter that is 0 at launch and 0 again when the kernel ends.
//
// Preconditions (checked on the host by RmsNormFamily's guards, not here):
//   cols % HK_VEC == 0; in, weight and out aligned to HK_VEC * sizeof(element);
//   rstd aligned to 4; cols <= HK_ROW_THREADS * HK_VEC * HK_ITEMS when HK_ITEMS > 0;
//   cols <= HK_CLUSTER * HK_ROW_THREADS * HK_VEC * HK_ITEMS when HK_ITEMS > 0 and HK_CLUSTER > 1;
//   cols <= 2^30; gridDim.x * HK_ROWS >= rows, gridDim.x == rows * HK_CLUSTER when HK_CLUSTER > 1,
//   and gridDim.x == rows * HK_SPLIT, launched cooperatively, when HK_SPLIT > 1
//   (RmsNormFamily::launchGeometry).
//
// Note [One row group a CTA]
// CTA b serves rows [b * HK_ROWS, (b + 1) * HK_ROWS): the grid covers the rows
// (the guards refuse more than 2^31 - 1 CTAs' worth), so there is no
// grid-stride loop, no barrier between rows, and the row's offset is computed
// once: fewer registers and a shorter loop on every point measured
// (docs/design/norms.md).
//
// Note [Specialized columns]
// A plan serves one exact variant (VariantKey), so the optimizer compiles
// each candidate for the variant's column count (HK_COLS, RmsNormFamily::
// compileOptions): the streaming loops then have constant trip counts and
// unroll, the per-row bounds fold. Without HK_COLS the kernel reads `cols` from
// its argument (any variant the point's guard accepts: what the CPU tests
// compile for every point). Specialization speeds up the streaming points
// and leaves the register points as they are (docs/design/norms.md).
//
// Note [RMS norm special values]
// No special cases: the arithmetic is ATen's, so a row holding inf or NaN
// gives what ATen gives (sum of squares inf -> rstd 0 -> 0 * finite = 0 and
// 0 * inf = NaN; NaN anywhere -> NaN row). Lanes that hold no element
// contribute exact zeros.
//
// Note [Split norm rows over a cluster]
// A few very long rows ([8, 4M]) keep as many SMs busy as there are rows when
// a row is one CTA's. With HK_CLUSTER > 1 a cluster of CTAs serves each row,
// as softmax_lastdim.cu does (Note [Split rows over a cluster] there): CTA
// `rank` takes vectors [rank * chunk, (rank + 1) * chunk) of the row, held in
// registers or streamed twice, reduces its slice's sum of squares over the
// CTA, and pushes it into every peer (Note [Pushed cluster pairs] in
// hk_prelude.cuh; the pair's second value is unused). Every CTA then adds the
// HK_CLUSTER sums in rank order, so the cluster computes one rstd bit for bit
// and the result does not depend on which CTA writes what. One row a cluster:
// the grid is rows * HK_CLUSTER CTAs (Note [One row group a CTA]).
//
// Note [Split norm rows over a cooperative grid]
// Clusters alone cannot spread a few rows over the GPU: a cluster's CTAs
// share one GPC and 16 is the widest, so 4 rows keep 64 SMs busy at most.
// With HK_SPLIT > 1 the HK_SPLIT consecutive CTAs of a row are independent
// CTAs of one grid, launched cooperatively so that all of them are resident
// at once (Note [Cooperative launches] in runtime/CudaKernelLauncher.h): CTA
// `rank` streams vectors [rank * chunk, (rank + 1) * chunk) of the row once,
// writes its slice's sum of squares to partials[blockIdx.x], and its thread 0
// arrives at `counter` (an atomic add with release semantics, after a
// barrier that orders the CTA's work before it) and spins, with acquire
// loads, until the whole grid has arrived. Each CTA then adds its row's
// HK_SPLIT partials in rank order, so every CTA computes the same rstd bit
// for bit, and streams its slice again (mostly from L2) to write the output.
// Leaving, thread 0 adds to the counter once more; the CTA whose add makes it
// 2 * gridDim.x is the last to leave, every other CTA being past its spin and
// done with the counter, and sets it back to 0, so the next launch on the
// stream finds it at 0 (StreamWorkspaces keeps one such counter per stream;
// the harness fails a candidate that leaves it non-zero). One barrier for
// the whole grid rather than one a row: one counter, and the grid is one wave.
//
// Reductions: Note [Norm deterministic reductions] in layer_norm.cu.

#if !defined(HK_DTYPE) || !defined(HK_THREADS) || !defined(HK_ROWS) || !defined(HK_VEC) || !defined(HK_ITEMS) || \
    !defined(HK_HAS_WEIGHT)
#error "rms_norm.cu needs HK_DTYPE, HK_THREADS, HK_ROWS, HK_VEC, HK_ITEMS and HK_HAS_WEIGHT"
#endif

#define HK_ROW_THREADS (HK_THREADS / HK_ROWS)
#define HK_ROW_WARPS (HK_ROW_THREADS / 32)  // warps per row when a row spans warps (HK_ROWS == 1)
// Streaming: vectors each thread loads before it uses the first (16 elements,
// at most 8 accesses), as in softmax_lastdim.cu; at least 4 in a grid split,
// where each CTA streams one short slice and the loads in flight, not the
// loop, set its pace (docs/design/norms.md).
#define HK_STREAM_UNROLL (HK_VEC >= 2 ? (HK_SPLIT > 1 && 16 / HK_VEC < 4 ? 4 : 16 / HK_VEC) : 8)
// Pass 2 re-reads the row mostly from L2 (shorter latency) and loads the
// column arrays next to it: a batch of HK_STREAM_UNROLL >> (arrays present)
// vectors (at least 1) keeps x and its arrays within HK_STREAM_UNROLL
// vectors' worth of registers, as in pass 1.
#define HK_STREAM_UNROLL2 ((HK_STREAM_UNROLL >> (HK_HAS_WEIGHT)) > 0 ? (HK_STREAM_UNROLL >> (HK_HAS_WEIGHT)) : 1)

static_assert(HK_THREADS >= 32 && HK_THREADS <= 1024 && (HK_THREADS & (HK_THREADS - 1)) == 0,
              "HK_THREADS must be a power of two in [32, 1024]");
static_assert(HK_ROWS >= 1 && (HK_ROWS & (HK_ROWS - 1)) == 0 && HK_ROWS <= HK_THREADS &&
                  (HK_ROWS == 1 || HK_ROW_THREADS <= 32),
              "HK_ROWS must be 1 or leave each row at most one warp");
static_assert(HK_ITEMS >= 0 && HK_ITEMS <= 16, "HK_ITEMS must be in [0, 16]");
static_assert(HK_ROWS == 1 || HK_ITEMS > 0, "several rows per CTA are register-resident only");
static_assert(HK_HAS_WEIGHT == 0 || HK_HAS_WEIGHT == 1, "HK_HAS_WEIGHT must be 0 or 1");
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

// Launch bounds: Note [Norm launch bounds] in layer_norm.cu.
#define HK_LAUNCH_BOUNDS __launch_bounds__(HK_THREADS, 1)

// L2 hints for the streaming variant's 16-byte accesses only (Note [Streaming
// L2 hints] in hk_prelude.cuh).
#define HK_STREAM_HINTS (HK_ITEMS == 0 && HK_VEC * (HK_DTYPE == 0 ? 4 : 2) == 16)
// ... and L1 hints, plain stores, the weight kept in L1 and L2 (Note [Streaming
// L1 hints] there: torch.compile's accesses).
#define HK_STREAM_L1_HINTS 1

#include "hk_prelude.cuh"

__device__ __forceinline__ hk_pack hk_zero_pack() {
  hk_pack p;
#pragma unroll
  for (int j = 0; j < HK_VEC; ++j) p.v[j] = hk_from_float(0.0f);
  return p;
}

// rstd from the row's sum of squares, as ATen computes it: the mean by a
// division, then rsqrt (rsqrtf, the function ATen's compat::rsqrt calls).
__device__ __forceinline__ float hk_rstd(float sumsq, float cols, float eps) {
  return rsqrtf(__fdiv_rn(sumsq, cols) + eps);
}

// One output element: weight * (rstd * x), ATen's order.
__device__ __forceinline__ float hk_scale(float x, float r, hk_elem w) {
#if HK_HAS_WEIGHT
  return hk_to_float(w) * (r * x);
#else
  return r * x;
#endif
}

// The slice helpers: vectors [begin, end) of one row, thread `tid` of the
// row's HK_ROW_THREADS taking begin + tid, begin + tid + HK_ROW_THREADS, ...
// (each warp's accesses contiguous). The whole row (begin 0) for a CTA's
// rows, a cluster rank's slice for split rows.
#if HK_ITEMS > 0
// Register-resident: one read, all loads issued before first use; lanes past
// `end` hold zeros (Note [RMS norm special values]).
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

__device__ __forceinline__ float hk_slice_sumsq(const float (&x)[HK_ITEMS][HK_VEC]) {
  float ss = 0.0f;
#pragma unroll
  for (int i = 0; i < HK_ITEMS; ++i) {
    float part = 0.0f;
#pragma unroll
    for (int j = 0; j < HK_VEC; ++j) part = fmaf(x[i][j], x[i][j], part);
    ss += part;
  }
  return ss;
}

// The weight is loaded here, after the reduction, rather than once before
// the row loop: x alone is live across the reduction, and ptxas may
// interleave these loads with the output as registers allow (Note [Norm
// register budget]). They hit L1 / L2: every row reads the same weight.
__device__ __forceinline__ void hk_write_slice(hk_pack* dst, const hk_pack* weight, int begin, int end, int tid,
                                               const float (&x)[HK_ITEMS][HK_VEC], float r) {
#pragma unroll
  for (int i = 0; i < HK_ITEMS; ++i) {
    const int v = begin + i * HK_ROW_THREADS + tid;
    if (v < end) {
#if HK_HAS_WEIGHT
      const hk_pack wp = weight[v];
#endif
      hk_pack p;
#pragma unroll
      for (int j = 0; j < HK_VEC; ++j) {
#if HK_HAS_WEIGHT
        p.v[j] = hk_from_float(hk_scale(x[i][j], r, wp.v[j]));
#else
        p.v[j] = hk_from_float(hk_scale(x[i][j], r, 0));
#endif
      }
      dst[v] = p;
    }
  }
}
#else
// Streaming pass 1: the sum of squares, HK_STREAM_UNROLL vectors in flight
// per thread (kept in their storage type until used).
__device__ __forceinline__ float hk_stream_sumsq(const hk_pack* src, int begin, int end, int tid,
                                                 unsigned long long keep) {
  float ss = 0.0f;
  for (int v0 = begin + tid; v0 < end; v0 += HK_ROW_THREADS * HK_STREAM_UNROLL) {
    hk_pack p[HK_STREAM_UNROLL];
#pragma unroll
    for (int u = 0; u < HK_STREAM_UNROLL; ++u) {
      const int v = v0 + u * HK_ROW_THREADS;
      p[u] = v < end ? hk_load_first(src + v, keep) : hk_zero_pack();
    }
#pragma unroll
    for (int u = 0; u < HK_STREAM_UNROLL; ++u) {
      float part = 0.0f;
#pragma unroll
      for (int j = 0; j < HK_VEC; ++j) {
        const float f = hk_to_float(p[u].v[j]);
        part = fmaf(f, f, part);
      }
      ss += part;
    }
  }
  return ss;
}

// Pass 2: re-read the slice (mostly from L2) and the weight, write.
__device__ __forceinline__ void hk_stream_write(const hk_pack* src, hk_pack* dst, const hk_pack* weight, int begin,
                                                int end, int tid, float r, unsigned long long keep,
                                                unsigned long long drop) {
  (void)keep;
  for (int v0 = begin + tid; v0 < end; v0 += HK_ROW_THREADS * HK_STREAM_UNROLL2) {
    hk_pack p[HK_STREAM_UNROLL2];
#if HK_HAS_WEIGHT
    hk_pack wp[HK_STREAM_UNROLL2];
#endif
#pragma unroll
    for (int u = 0; u < HK_STREAM_UNROLL2; ++u) {
      const int v = v0 + u * HK_ROW_THREADS;
      if (v < end) {
        p[u] = hk_load_again(src + v, drop);
#if HK_HAS_WEIGHT
#if HK_STREAM_HINTS && HK_STREAM_L1_HINTS
        wp[u] = hk_load_first(weight + v, keep);  // kept in L1 and L2: every row reads it
#else
        wp[u] = weight[v];
#endif
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
          p[u].v[j] = hk_from_float(hk_scale(hk_to_float(p[u].v[j]), r, wp[u].v[j]));
#else
          p[u].v[j] = hk_from_float(hk_scale(hk_to_float(p[u].v[j]), r, 0));
#endif
        }
        hk_store_stream(dst + v, p[u], drop);
      }
    }
  }
}
#endif  // HK_ITEMS > 0

#if HK_SPLIT > 1
// Note [Split norm rows over a cooperative grid].
extern "C" __global__ void HK_LAUNCH_BOUNDS
    hk_rms_norm(const void* in_, const void* weight_, void* out_, float* rstd, long long rows, long long cols,
                float eps, float* partials, unsigned* counter) {
  __shared__ float hk_buf[HK_THREADS / 32];
  __shared__ float hk_sumsq;  // the row's sum of squares, from thread 0
  const hk_elem* in = static_cast<const hk_elem*>(in_);
  hk_elem* out = static_cast<hk_elem*>(out_);
  const hk_pack* weight = static_cast<const hk_pack*>(weight_);
#ifdef HK_COLS
  cols = HK_COLS;  // Note [Specialized columns]
#endif
  const int nvec = static_cast<int>(cols / HK_VEC);  // exact: cols % HK_VEC == 0 (guard)
  const int rank = static_cast<int>(blockIdx.x % HK_SPLIT);
  const hk_slice slice = hk_slice_of(nvec, HK_SPLIT, rank);
  const int begin = slice.begin, end = slice.end;
  const int tid = threadIdx.x;
  const float fcols = static_cast<float>(cols);
  (void)weight;
  (void)rows;  // the grid is rows * HK_SPLIT: every run of HK_SPLIT CTAs has its row
  const long long row = blockIdx.x / HK_SPLIT;
  const hk_pack* src = reinterpret_cast<const hk_pack*>(in + row * cols);
  hk_pack* dst = reinterpret_cast<hk_pack*>(out + row * cols);
  const unsigned long long keep = hk_policy_evict_last();
  const unsigned long long drop = hk_policy_evict_first();
  // hk_row_sum ends with every thread holding the CTA's sum.
  const float part = hk_row_sum(hk_stream_sumsq(src, begin, end, tid, keep), hk_buf);
  if (tid == 0) {
    partials[blockIdx.x] = part;
    hk_grid_arrive_and_wait(counter, gridDim.x);
    // The row's partials in rank order: every CTA of the row the same sum.
    const float* mine = partials + row * HK_SPLIT;
    float ss = 0.0f;
#pragma unroll
    for (int c = 0; c < HK_SPLIT; ++c) ss += __ldcg(mine + c);
    hk_sumsq = ss;
    hk_grid_leave(counter, gridDim.x);
  }
  __syncthreads();
  const float r = hk_rstd(hk_sumsq, fcols, eps);
  if (rank == 0 && tid == 0) rstd[row] = r;
  hk_stream_write(src, dst, weight, begin, end, tid, r, keep, drop);
}
#elif HK_CLUSTER == 1
extern "C" __global__ void HK_LAUNCH_BOUNDS
    hk_rms_norm(const void* in_, const void* weight_, void* out_, float* rstd, long long rows, long long cols,
                float eps, float* partials, unsigned* counter) {
  __shared__ float hk_buf[HK_THREADS / 32];
  (void)partials;
  (void)counter;
  const hk_elem* in = static_cast<const hk_elem*>(in_);
  hk_elem* out = static_cast<hk_elem*>(out_);
  const hk_pack* weight = static_cast<const hk_pack*>(weight_);
#ifdef HK_COLS
  cols = HK_COLS;  // Note [Specialized columns]
#endif
  const int nvec = static_cast<int>(cols / HK_VEC);  // exact: cols % HK_VEC == 0 (guard)
  const int tid = threadIdx.x & (HK_ROW_THREADS - 1);  // this thread's place in its row
  const int sub = threadIdx.x / HK_ROW_THREADS;         // its row within the CTA's rows
  const float fcols = static_cast<float>(cols);
  (void)weight;

  // Note [One row group a CTA]: the grid covers the rows. Every thread runs
  // the whole body (barriers and shuffles need the whole CTA / warp); a thread
  // whose row is past the end only skips its accesses.
  const long long first = static_cast<long long>(blockIdx.x) * HK_ROWS;
  const long long row = first + sub;
  const int live = row < rows ? nvec : 0;  // vectors this thread may touch
  const long long offset = (row < rows ? row : first) * cols;
  const hk_pack* src = reinterpret_cast<const hk_pack*>(in + offset);
  hk_pack* dst = reinterpret_cast<hk_pack*>(out + offset);
#if HK_ITEMS > 0
  float x[HK_ITEMS][HK_VEC];
  hk_load_slice(src, 0, live, tid, x);
  const float ss = hk_row_sum(hk_slice_sumsq(x), hk_buf);
  const float r = hk_rstd(ss, fcols, eps);
  if (tid == 0 && row < rows) rstd[row] = r;
  hk_write_slice(dst, weight, 0, live, tid, x, r);
#else
  const unsigned long long keep = hk_policy_evict_last();
  const unsigned long long drop = hk_policy_evict_first();
  const float ss = hk_row_sum(hk_stream_sumsq(src, 0, live, tid, keep), hk_buf);
  const float r = hk_rstd(ss, fcols, eps);
  if (tid == 0 && row < rows) rstd[row] = r;
  hk_stream_write(src, dst, weight, 0, live, tid, r, keep, drop);
#endif
}
#else  // HK_CLUSTER > 1
// Note [Split norm rows over a cluster].
extern "C" __global__ void __cluster_dims__(HK_CLUSTER, 1, 1) HK_LAUNCH_BOUNDS
    hk_rms_norm(const void* in_, const void* weight_, void* out_, float* rstd, long long rows, long long cols,
                float eps, float* partials, unsigned* counter) {
  __shared__ float hk_buf[HK_THREADS / 32];
  __shared__ hk_pushed_pairs hk_pairs;  // the cluster's sums, pushed by every CTA
  (void)partials;
  (void)counter;
  const hk_elem* in = static_cast<const hk_elem*>(in_);
  hk_elem* out = static_cast<hk_elem*>(out_);
  const hk_pack* weight = static_cast<const hk_pack*>(weight_);
#ifdef HK_COLS
  cols = HK_COLS;  // Note [Specialized columns]
#endif
  const int nvec = static_cast<int>(cols / HK_VEC);  // exact: cols % HK_VEC == 0 (guard)
  const unsigned rank = hk_cluster_rank();
  const hk_slice slice = hk_slice_of(nvec, HK_CLUSTER, static_cast<int>(rank));
  const int begin = slice.begin, end = slice.end;
  const int tid = threadIdx.x;
  const float fcols = static_cast<float>(cols);
  (void)weight;
  (void)rows;  // the grid is rows * HK_CLUSTER: every cluster has its row
  hk_pushed_init(hk_pairs);
  const long long row = blockIdx.x / HK_CLUSTER;
  const hk_pack* src = reinterpret_cast<const hk_pack*>(in + row * cols);
  hk_pack* dst = reinterpret_cast<hk_pack*>(out + row * cols);
#if HK_ITEMS > 0
  float x[HK_ITEMS][HK_VEC];
  hk_load_slice(src, begin, end, tid, x);
  const float part = hk_row_sum(hk_slice_sumsq(x), hk_buf);
#else
  const unsigned long long keep = hk_policy_evict_last();
  const unsigned long long drop = hk_policy_evict_first();
  const float part = hk_row_sum(hk_stream_sumsq(src, begin, end, tid, keep), hk_buf);
#endif
  hk_pushed_wait_init();
  hk_pushed_exchange(hk_pairs, part, 0.0f, rank, 0);
  // The cluster's sums in rank order: every CTA the same rstd, bit for bit.
  float ss = 0.0f;
#pragma unroll
  for (int c = 0; c < HK_CLUSTER; ++c) ss += hk_pairs.slot[0][c][0];
  const float r = hk_rstd(ss, fcols, eps);
  if (rank == 0 && tid == 0) rstd[row] = r;
#if HK_ITEMS > 0
  hk_write_slice(dst, weight, begin, end, tid, x, r);
#else
  hk_stream_write(src, dst, weight, begin, end, tid, r, keep, drop);
#endif
}
#endif  // HK_CLUSTER
