// softmax (or log_softmax) over the last dimension of a contiguous [rows, cols] tensor:
//   softmax:     out[r, c] = exp(in[r, c] - max_r) / sum_c' exp(in[r, c'] - max_r)
//   log_softmax: out[r, c] = (in[r, c] - max_r) - log(sum_c' exp(in[r, c'] - max_r))
// the semantics of aten::_softmax / aten::_log_softmax(x, -1, half_to_float=false):
// input and output share one dtype, arithmetic is fp32.
//
// Compiled by NVRTC with the defines below (SoftmaxFamily::compileOptions). Its
// one include, hk_prelude.cuh (what the family templates share), is expanded in
// place by SoftmaxFamily::source(); it needs neither cuda_fp16.h nor cuda_bf16.h.
//   HK_DTYPE    0 = float32, 1 = float16, 2 = bfloat16 (hotkernel::kernels::DType)
//   HK_THREADS  threads per CTA, a power of two in [32, 1024]
//   HK_ROWS     rows per CTA: 1, or HK_THREADS / HK_ROWS <= 32 (each row within one warp)
//   HK_VEC      elements per vector access, a power of two, HK_VEC * sizeof(element) <= 16
//   HK_ITEMS    > 0: register-resident, each thread holds HK_ITEMS vectors of its row;
//               0: streaming, any row length, the row is read twice
//   HK_CLUSTER  (optional, default 1) 2, 4, 8 or 16 (16: non-portable): a thread-block
//               cluster of HK_CLUSTER CTAs serves each row, each CTA a slice of it
//               (HK_ROWS == 1 only, sm_90+): Note [Split rows over a cluster]; the slice
//               held in registers (HK_ITEMS > 0) or streamed twice (HK_ITEMS == 0,
//               16-byte vectors: Note [Split streaming])
//   HK_SMEM     (optional, default 0) 1: with HK_CLUSTER > 1 and 16-byte vectors, the slice is
//               staged in dynamic shared memory instead of registers (Note [Shared-memory slices])
//   HK_PIPE     (optional, default 0) 1: with HK_SMEM, each thread refills a slot of its stage with
//               the cluster's next row right after writing that slot's output (Note [Pipelined
//               slices] in kernels/src/SoftmaxSpace.cpp; the grid gives each cluster several rows)
//   HK_LOG      (optional, default 0) 1: log_softmax instead of softmax
// A row is served by HK_ROW_THREADS = HK_THREADS / HK_ROWS threads.
//
// Preconditions (checked on the host by SoftmaxFamily's guards, not here):
//   cols % HK_VEC == 0; `in` and `out` aligned to HK_VEC * sizeof(element);
//   cols <= HK_ROW_THREADS * HK_VEC * HK_ITEMS when HK_ITEMS > 0; cols <= 2^30.
//
// Note [Softmax special values match ATen]
// ATen computes exp(x - max) / sum with max taken by fmaxf-like comparisons, so
//  - a row of only -inf gives NaN everywhere (exp(-inf - -inf) = NaN);
//  - a row holding +inf gives NaN everywhere (exp(inf - inf) = NaN in the sum);
//  - a row holding NaN gives NaN everywhere (the sum is NaN).
// Both variants reproduce this without special cases, as long as lanes that
// hold no element never turn a finite sum into NaN: masked lanes hold -inf,
// which contributes exp(-inf - max) = 0 whenever max is finite. The streaming
// variant's running (max, sum) pairs start at (-inf, 0) and rescale against
// 0 instead of -inf while the running max is still -inf (Note [Online pairs]).
//
// Note [Deterministic reductions]
// Every reduction has a fixed order (per-thread in index order, then an xor
// butterfly within each warp, then the same butterfly across the warps'
// partials), so results are bitwise reproducible and do not depend on the
// grid. The butterfly gives all lanes the same bits only when each combining
// step is commutative bit for bit; the pair merge therefore forbids fma
// contraction (__fmul_rn/__fadd_rn).

#if !defined(HK_DTYPE) || !defined(HK_THREADS) || !defined(HK_ROWS) || !defined(HK_VEC) || !defined(HK_ITEMS)
#error "softmax_lastdim.cu needs HK_DTYPE, HK_THREADS, HK_ROWS, HK_VEC and HK_ITEMS"
#endif
#ifndef HK_CLUSTER
#define HK_CLUSTER 1
#endif
#ifndef HK_LOG
#define HK_LOG 0
#endif

#define HK_ROW_THREADS (HK_THREADS / HK_ROWS)
#define HK_ROW_WARPS (HK_ROW_THREADS / 32)  // warps per row when a row spans warps (HK_ROWS == 1)
// Streaming: vectors each thread loads before it uses the first (loads in
// flight): 16 elements, at most 8 accesses. More (4 x 16 bytes of bf16) makes
// ptxas spill under __launch_bounds__(1024).
#define HK_STREAM_UNROLL (HK_VEC >= 2 ? 16 / HK_VEC : 8)

static_assert(HK_THREADS >= 32 && HK_THREADS <= 1024 && (HK_THREADS & (HK_THREADS - 1)) == 0,
              "HK_THREADS must be a power of two in [32, 1024]");
static_assert(HK_ROWS >= 1 && (HK_ROWS & (HK_ROWS - 1)) == 0 && HK_ROWS <= HK_THREADS &&
                  (HK_ROWS == 1 || HK_ROW_THREADS <= 32),
              "HK_ROWS must be 1 or leave each row at most one warp");
static_assert(HK_ITEMS >= 0 && HK_ITEMS <= 16, "HK_ITEMS must be in [0, 16]");
// 16 is a non-portable cluster size (sm_90's portable maximum is 8): the
// launcher opts in (Note [Function attributes before launch] in
// runtime/include/hotkernel/runtime/CudaKernelLauncher.h). The pair merge reads
// one peer per lane, so a cluster must not exceed a warp.
static_assert(HK_CLUSTER == 1 || ((HK_CLUSTER == 2 || HK_CLUSTER == 4 || HK_CLUSTER == 8 || HK_CLUSTER == 16) &&
                                  HK_ROWS == 1),
              "HK_CLUSTER must be 1, or 2, 4, 8 or 16 with HK_ROWS == 1");
static_assert(HK_LOG == 0 || HK_LOG == 1, "HK_LOG must be 0 or 1");

// L2 hints for the streaming variant's 16-byte accesses only (Note [Streaming
// L2 hints] in hk_prelude.cuh).
#define HK_STREAM_HINTS (HK_ITEMS == 0 && HK_VEC * (HK_DTYPE == 0 ? 4 : 2) == 16)
// ... and L1 hints with plain stores for one CTA a row (Note [Streaming L1
// hints]). Not for split streaming: there the plain stores crowd the rows
// still to be re-read out of L2, and the L1 hints with evict_first stores, or
// a second pass walked backwards, gain nothing (docs/design/prelude.md).
#define HK_STREAM_L1_HINTS (HK_CLUSTER == 1)

#include "hk_prelude.cuh"

// log(sum) of log_softmax, once per row: float32 uses logf (ATen's std::log),
// the 16-bit types __logf (sum >= 1 always: abs error <= 2^-21.4 on [1, 2],
// 3 ulp above, invisible after rounding to 8 or 11 bits; logf's slow path made
// ptxas spill the largest register-resident bf16 point).
__device__ __forceinline__ float hk_log(float s) {
#if HK_DTYPE == 0
  return logf(s);
#else
  return __logf(s);
#endif
}

// Note [Lean softmax]
// Close to the memory roofline these kernels are issue-bound, not memory-
// bound: the shared-memory cluster point (bf16 [8192, 128256], 256 threads x
// 8 items) issued ~23 instructions an element (three conversions, a -inf
// select per element in each pass, exp2f's denormal fix-ups around both
// MUFU.EX2, a multiply by 1/sum). For the 16-bit types the output is now
// 2^((x - max) * log2(e) - log2(sum)): one fma and one ex2.approx.ftz
// (Note [Family exp]) instead of exp, multiply; the row maximum of 16-bit
// data comes from packed max.{bf16,f16}x2 on the raw words (Note [Packed
// maximum]); masked slots hold -inf in the element type from the start.
// Scaling by 2^-log2(sum) instead of 1/sum: log2 by lg2.approx (relative
// error of the result ~2^-22 * ln 2), invisible after rounding to 8 or 11
// bits. float32 keeps ATen's exp and the multiply by 1/sum (Note [Family exp]).
struct hk_scale {
  float k;  // float32: 1 / sum; 16-bit types: log2(sum)
};
__device__ __forceinline__ hk_scale hk_scale_of(float sum) {
#if HK_DTYPE == 0
  return {__frcp_rn(sum)};
#else
  return {__log2f(sum)};
#endif
}
// exp(d) / sum for d = x - max.
__device__ __forceinline__ float hk_softmax_value(float d, hk_scale k) {
#if HK_DTYPE == 0
  return hk_exp(d) * k.k;
#else
  return hk_ex2(fmaf(d, HK_LOG2E, -k.k));
#endif
}
// Packed row maximum (Note [Packed maximum]): 16-bit types with vectors of at least two elements.
#define HK_PACKED_MAX (HK_DTYPE != 0 && HK_PACK_BYTES >= 4)

// The largest register-resident log_softmax points (> 64 values a thread)
// made ptxas cap itself at ~168 registers and spill; telling it one CTA per SM
// suffices lifts the cap (they are short-row, few-thread points anyway).
// Cluster points keep the default: there the hint made ptxas spill instead.
#if HK_LOG && HK_ITEMS * HK_VEC > 64 && HK_CLUSTER == 1
#define HK_BOUNDS __launch_bounds__(HK_THREADS, 1)
#elif HK_CLUSTER > 1 && HK_ITEMS == 0 && HK_DTYPE != 0
// 16-bit split streaming at full thread occupancy (32 registers a thread:
// Note [Split streaming]).
#define HK_BOUNDS __launch_bounds__(HK_THREADS, 2048 / HK_THREADS)
#else
#define HK_BOUNDS __launch_bounds__(HK_THREADS)
#endif

#if HK_CLUSTER == 1
extern "C" __global__ void HK_BOUNDS
    hk_softmax_lastdim(const void* in_, void* out_, long long rows, long long cols) {
  // Two buffers so that the max and the sum reductions of one row need no
  // barrier between them; rows after the first are fenced at the loop's end.
  __shared__ float hk_buf[2][HK_THREADS / 32];
  const hk_elem* in = static_cast<const hk_elem*>(in_);
  hk_elem* out = static_cast<hk_elem*>(out_);
  const int nvec = static_cast<int>(cols / HK_VEC);  // exact: cols % HK_VEC == 0 (guard)
  const int tid = threadIdx.x & (HK_ROW_THREADS - 1);  // this thread's place in its row
  const int sub = threadIdx.x / HK_ROW_THREADS;         // its row within the CTA's rows

  // Every thread runs every iteration (barriers and shuffles need the whole
  // CTA / warp); a thread whose row is past the end only skips its accesses.
  for (long long first = static_cast<long long>(blockIdx.x) * HK_ROWS; first < rows;
       first += static_cast<long long>(gridDim.x) * HK_ROWS) {
    const long long row = first + sub;
    const int live = row < rows ? nvec : 0;  // vectors this thread may touch
    const long long offset = (row < rows ? row : first) * cols;
    const hk_pack* src = reinterpret_cast<const hk_pack*>(in + offset);
    hk_pack* dst = reinterpret_cast<hk_pack*>(out + offset);

#if HK_ITEMS > 0
    // Register-resident: one read of the row; vector i*HK_ROW_THREADS + tid
    // keeps each warp's accesses contiguous. All loads issue before first use.
    float x[HK_ITEMS][HK_VEC];
#pragma unroll
    for (int i = 0; i < HK_ITEMS; ++i) {
      const int v = i * HK_ROW_THREADS + tid;
      if (v < live) {
        hk_unpack(src[v], x[i]);
      } else {
#pragma unroll
        for (int j = 0; j < HK_VEC; ++j) x[i][j] = hk_neg_inf();
      }
    }
    float m = hk_neg_inf();
#pragma unroll
    for (int i = 0; i < HK_ITEMS; ++i) {
#pragma unroll
      for (int j = 0; j < HK_VEC; ++j) m = fmaxf(m, x[i][j]);
    }
    m = hk_row_max(m, hk_buf[0]);
    float s = 0.0f;
#if HK_LOG
    // log_softmax keeps x: out = (x - max) - log(sum), ATen's order of operations.
#pragma unroll
    for (int i = 0; i < HK_ITEMS; ++i) {
#pragma unroll
      for (int j = 0; j < HK_VEC; ++j) {
        x[i][j] -= m;  // kept shifted: fewer live registers, the same fp32 operations
        s += hk_exp(x[i][j]);
      }
    }
    s = hk_row_sum(s, hk_buf[1]);
    const float logs = hk_log(s);
#else
#pragma unroll
    for (int i = 0; i < HK_ITEMS; ++i) {
#pragma unroll
      for (int j = 0; j < HK_VEC; ++j) {
        x[i][j] = hk_exp(x[i][j] - m);
        s += x[i][j];
      }
    }
    s = hk_row_sum(s, hk_buf[1]);
    const float inv = __frcp_rn(s);
#endif
#pragma unroll
    for (int i = 0; i < HK_ITEMS; ++i) {
      const int v = i * HK_ROW_THREADS + tid;
      if (v < live) {
        hk_pack p;
#pragma unroll
        for (int j = 0; j < HK_VEC; ++j) {
#if HK_LOG
          p.v[j] = hk_from_float(x[i][j] - logs);
#else
          p.v[j] = hk_from_float(x[i][j] * inv);
#endif
        }
        dst[v] = p;
      }
    }
#else
    const unsigned long long keep = hk_policy_evict_last();
    const unsigned long long drop = hk_policy_evict_first();
    // Streaming pass 1: a running (max, sum) pair per thread (Note [Online
    // pairs]), rescaled once per batch of HK_STREAM_UNROLL vectors. The batch
    // stays in its storage type (half the registers of fp32 for 16-bit types)
    // and is converted where it is used.
    float m = hk_neg_inf();
    float s = 0.0f;
    for (int v0 = tid; v0 < live; v0 += HK_ROW_THREADS * HK_STREAM_UNROLL) {
      hk_pack p[HK_STREAM_UNROLL];
#pragma unroll
      for (int u = 0; u < HK_STREAM_UNROLL; ++u) {
        const int v = v0 + u * HK_ROW_THREADS;
        if (v < live) {
          p[u] = hk_load_first(src + v, keep);
        } else {
#pragma unroll
          for (int j = 0; j < HK_VEC; ++j) p[u].v[j] = hk_neg_inf_elem();
        }
      }
      hk_pair_fold(m, s, p);
    }
    hk_row_pair(m, s, hk_buf[0], hk_buf[1]);
#if HK_LOG
    const float logs = hk_log(s);
#else
    const hk_scale scale = hk_scale_of(s);
#endif
    // Pass 2: re-read (mostly from L2: Note [Streaming L2 hints]), write.
    for (int v0 = tid; v0 < live; v0 += HK_ROW_THREADS * HK_STREAM_UNROLL) {
      hk_pack p[HK_STREAM_UNROLL];
#pragma unroll
      for (int u = 0; u < HK_STREAM_UNROLL; ++u) {
        const int v = v0 + u * HK_ROW_THREADS;
        if (v < live) p[u] = hk_load_again(src + v, drop);
      }
#pragma unroll
      for (int u = 0; u < HK_STREAM_UNROLL; ++u) {
        const int v = v0 + u * HK_ROW_THREADS;
        if (v < live) {
          float f[HK_VEC];
          hk_unpack(p[u], f);
#pragma unroll
          for (int j = 0; j < HK_VEC; ++j) {
#if HK_LOG
            p[u].v[j] = hk_from_float((f[j] - m) - logs);
#else
            p[u].v[j] = hk_from_float(hk_softmax_value(f[j] - m, scale));
#endif
          }
          hk_store_stream(dst + v, p[u], drop);
        }
      }
    }
#endif
#if HK_ROW_THREADS > 32
    // The next rows write hk_buf again: wait until every warp has read it.
    if (first + static_cast<long long>(gridDim.x) * HK_ROWS < rows) __syncthreads();
#endif
  }
}
#endif  // HK_CLUSTER == 1

#if HK_CLUSTER > 1
// Note [Split rows over a cluster]
// Rows too long for one CTA's registers (bf16 [8192, 128256]: 250 KB a row),
// and too few rows to fill the GPU ([1, 128256] gives one CTA to one SM), are
// split over a thread-block cluster: CTA k of the cluster holds vectors
// [k * chunk, (k + 1) * chunk) of the row in registers, so the row is read
// from DRAM once, by HK_CLUSTER SMs. Each CTA reduces its slice to an online
// pair (max, sum; Note [Online pairs]) and pushes it into every peer's shared
// memory (Note [Pushed cluster pairs] in hk_prelude.cuh); each CTA waits for
// the HK_CLUSTER pairs and merges them in rank order: the same order in every
// CTA, so the whole cluster gets bit-identical (max, sum) and the result does
// not depend on the grid (Note [Deterministic reductions]). The output is
// then exp(x - max) / sum (or (x - max) - log(sum)); 16-bit register slices
// take Note [Rescaled split softmax]. The pairs are pushed, not exchanged
// through two cluster barriers and reads of the peers' shared memory: with
// the rescaled slices, that is what makes decode rows fast
// (docs/design/softmax.md).
// Note [Shared-memory slices]
// With HK_SMEM, a CTA stages its slice in dynamic shared memory (HK_ITEMS
// 16-byte vectors a thread, HK_THREADS * HK_ITEMS * 16 bytes: the launch's
// sharedBytes) with cp.async instead of holding it in registers. A slice in
// registers costs ~80 registers a thread at 8 items (ptxas keeps the fp32
// values across the row barriers), which caps an SM at 3 CTAs of 256
// threads, so at 3 rows in flight; staged, ~40 registers and 33 KB of shared
// memory allow 6, so staged slices are faster on long rows
// (docs/design/softmax.md). Each thread stages and later reads only its own
// vectors, so no barrier guards the stage: the thread's own cp.async.wait_all
// makes its copies visible to it. Sums stay in base e: base-2 sums (one fma a
// term) overflow for maxima above FLT_MAX / log2(e). Double-buffered row
// blocks, bulk copies and fma-form terms do not pay here: the sum pass is not
// what bounds these kernels (docs/design/softmax.md).
#ifndef HK_SMEM
#define HK_SMEM 0
#endif
#ifndef HK_PIPE
#define HK_PIPE 0
#endif
// Note [Rescaled split softmax]
// Decode rows ([32, 128256]) fill the GPU with one wave of cluster CTAs that
// all read, then all compute, then all write: the arithmetic between the
// last load and the first store is not hidden behind other CTAs' memory
// traffic, and there the quarter-rate pipe (MUFU.EX2, and the F2F
// conversions) bounds it. The 16-bit register-resident slices therefore take
// one exponential an element, not two: each thread's terms are taken against
// its OWN maximum mt, e = exp(x - mt), kept in registers and summed; the
// CTA's and the cluster's merges then see (mt, sum e) pairs like any
// online pair (Note [Online pairs]), and the output is e * (exp(mt - max) /
// sum), one multiply an element, converted two at a time (hk_from_float2).
// A thread whose elements are all -inf writes 0 * (1 / sum): 0, or NaN when
// the row's sum is 0 or NaN, as ATen (Note [Softmax special values match
// ATen]); a +inf or NaN anywhere makes the row's sum NaN, so every factor.
// float32 keeps ATen's terms (Note [Family exp]); log_softmax needs no
// exponential in its output; the shared-memory slices are left as they are.
#define HK_RESCALE (HK_DTYPE != 0 && !HK_LOG && !HK_SMEM && HK_PACK_BYTES >= 4 && HK_ITEMS > 0)
// Note [Split streaming]
// HK_ITEMS == 0 with a cluster: each CTA streams its slice twice, as the
// one-CTA streaming variant streams a row (pass 1 an online pair per thread
// with the L2 told to keep the lines, the cluster's merge, pass 2 re-reads
// and writes with the lines dropped first), so the second read hits L2 only
// while the rows in flight fit it. One CTA a row keeps as many rows in
// flight as CTAs fit the GPU: bf16 [4096, 32000] at 512 threads, 4 CTAs x 132
// SMs x 64 KB = 34 MB, fits the H200's 50 MB L2; [8192, 128256] at 1024
// threads, 2 x 132 x 250 KB = 66 MB, does not, and the second read goes to
// DRAM. A cluster of HK_CLUSTER CTAs a
// row divides the rows in flight by HK_CLUSTER (1024 threads, cluster 4:
// 66 rows, 16.5 MB) without a stage to bound the CTAs an SM holds (the
// shared-memory slices: 64 KB a CTA at 512 x 8) and without waiting for the
// whole slice before the first arithmetic.
// Small clusters of 512-thread CTAs suit it: at 40-42 registers an SM holds
// one 1024-thread CTA or three of 512, and wide clusters wait for room on one
// GPC. Full occupancy (32 registers, no spill) is the 16-bit types' bound; it
// would cost float32, whose 4-vector batches need the registers. The batch
// size and the L2 hints are the fastest measured (docs/design/softmax.md has
// the measurements).
#if HK_SMEM
static_assert(HK_CLUSTER > 1 && HK_PACK_BYTES == 16 && HK_ITEMS > 0,
              "HK_SMEM needs a cluster, 16-byte vectors and items to stage");
static_assert(HK_PIPE == 0 || HK_PIPE == 1, "HK_PIPE must be 0 or 1");
__device__ __forceinline__ void hk_cp_async(void* smem, const void* gmem) {
  const unsigned a = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(a), "l"(gmem) : "memory");
}
__device__ __forceinline__ void hk_cp_async_wait() { asm volatile("cp.async.wait_all;" ::: "memory"); }

// Issues the copies of this thread's vectors of a row's slice [begin, end)
// into `stage`; slots past the slice's end get -inf (Note [Lean softmax]: no
// select per element). Each thread stages and later reads only its own
// vectors: no barrier.
__device__ __forceinline__ void hk_stage_slice(hk_pack* stage, const hk_pack* src, int begin, int end, int tid) {
  // One base address each, item i at a constant offset (no 64-bit address
  // arithmetic per item); `live` items of this thread are in the slice.
  const hk_pack* from = src + (begin + tid);
  hk_pack* to = stage + tid;
  const int live = end - begin - tid;  // in vectors; item i is in the slice iff i * HK_THREADS < live
  hk_pack q;
#pragma unroll
  for (int j = 0; j < HK_VEC; ++j) q.v[j] = hk_neg_inf_elem();
#pragma unroll
  for (int i = 0; i < HK_ITEMS; ++i) {
    if (i * HK_THREADS < live) {
      hk_cp_async(to + i * HK_THREADS, from + i * HK_THREADS);
    } else {
      to[i * HK_THREADS] = q;
    }
  }
}
#endif

extern "C" __global__ void __cluster_dims__(HK_CLUSTER, 1, 1) HK_BOUNDS
    hk_softmax_lastdim(const void* in_, void* out_, long long rows, long long cols) {
  __shared__ float hk_buf[2][HK_THREADS / 32];
#if HK_SMEM
  // HK_ITEMS * HK_THREADS vectors (Note [Shared-memory slices]), thread t's item i at i * HK_THREADS + t.
  extern __shared__ hk_pack hk_stage[];
#endif
  __shared__ hk_pushed_pairs hk_pairs;  // the cluster's pairs, pushed by every CTA (Note [Pushed cluster pairs])
#if HK_ITEMS == 0
  const unsigned long long keep = hk_policy_evict_last();
  const unsigned long long drop = hk_policy_evict_first();
#endif
  const hk_elem* in = static_cast<const hk_elem*>(in_);
  hk_elem* out = static_cast<hk_elem*>(out_);
  const int nvec = static_cast<int>(cols / HK_VEC);  // exact: cols % HK_VEC == 0 (guard)
  const int chunk = (nvec + HK_CLUSTER - 1) / HK_CLUSTER;
  const unsigned rank = hk_cluster_rank();
  const int begin = min(nvec, static_cast<int>(rank) * chunk);
  const int end = min(nvec, begin + chunk);
  const int tid = threadIdx.x;
  const int lane = tid & 31;
  // Clusters are HK_CLUSTER consecutive CTAs; the grid is a multiple of HK_CLUSTER.
  const long long clusters = gridDim.x / HK_CLUSTER;
  hk_pushed_init(hk_pairs);
#if HK_PIPE
  // The first row's slice (Note [Pipelined slices]); each row's write pass then refills the stage with the next.
  if (blockIdx.x / HK_CLUSTER < rows) {
    hk_stage_slice(hk_stage, reinterpret_cast<const hk_pack*>(in + (blockIdx.x / HK_CLUSTER) * cols), begin, end,
                   tid);
  }
#endif
  int k = 0;  // this CTA's rows so far
  for (long long row = blockIdx.x / HK_CLUSTER; row < rows; row += clusters) {
    // A next row (grids of more rows than clusters only): every warp has read
    // the previous row's hk_buf and pair slots before any thread writes or
    // pushes again (Note [Pushed cluster pairs]).
    if (k > 0) __syncthreads();
    const hk_pack* src = reinterpret_cast<const hk_pack*>(in + row * cols);
    hk_pack* dst = reinterpret_cast<hk_pack*>(out + row * cols);
#if HK_PIPE
    const hk_pack* next = reinterpret_cast<const hk_pack*>(in + (row + clusters) * cols);  // if row + clusters < rows
#endif
#if HK_ITEMS == 0
    // Pass 1 over the slice (Note [Split streaming]): the CTA's online pair.
    float m = hk_neg_inf();
    float s = 0.0f;
    for (int v0 = begin + tid; v0 < end; v0 += HK_THREADS * HK_STREAM_UNROLL) {
      hk_pack p[HK_STREAM_UNROLL];
#pragma unroll
      for (int u = 0; u < HK_STREAM_UNROLL; ++u) {
        const int v = v0 + u * HK_THREADS;
        if (v < end) {
          p[u] = hk_load_first(src + v, keep);
        } else {
#pragma unroll
          for (int j = 0; j < HK_VEC; ++j) p[u].v[j] = hk_neg_inf_elem();
        }
      }
      hk_pair_fold(m, s, p);
    }
    hk_row_pair(m, s, hk_buf[0], hk_buf[1]);
#elif HK_RESCALE
    // Note [Rescaled split softmax]: terms against this thread's maximum.
    hk_pack raw[HK_ITEMS];
#pragma unroll
    for (int i = 0; i < HK_ITEMS; ++i) {
      const int v = begin + i * HK_THREADS + tid;
      if (v < end) {
        raw[i] = src[v];
      } else {
#pragma unroll
        for (int j = 0; j < HK_VEC; ++j) raw[i].v[j] = hk_neg_inf_elem();
      }
    }
    unsigned mt2 = HK_NEG_INF2;
#pragma unroll
    for (int i = 0; i < HK_ITEMS; ++i) mt2 = hk_pack_max2(mt2, raw[i]);
    const float mt = hk_pair_max(mt2);
    const float bt = hk_pair_base(mt);
    float e[HK_ITEMS][HK_VEC];
    float s = 0.0f;
#pragma unroll
    for (int i = 0; i < HK_ITEMS; ++i) {
      hk_unpack(raw[i], e[i]);
#pragma unroll
      for (int j = 0; j < HK_VEC; ++j) {
        e[i][j] = hk_exp(e[i][j] - bt);
        s += e[i][j];
      }
    }
    float m = mt;
    hk_row_pair(m, s, hk_buf[0], hk_buf[1]);
#else
#if HK_SMEM
    const hk_pack* const stage = hk_stage;
#if !HK_PIPE
    hk_stage_slice(hk_stage, src, begin, end, tid);
#endif
    // With HK_PIPE this row's copies were issued before the loop (the first row) or by the previous row's write
    // pass; its slots past the slice's end still hold the first row's -inf (a refill writes slice slots only).
    hk_cp_async_wait();
#endif
#if HK_SMEM
#define HK_ITEM_BEGIN(i)                             \
  const hk_pack hk_p = stage[(i) * HK_THREADS + tid]; \
  float hk_f[HK_VEC];                                  \
  hk_unpack(hk_p, hk_f);
#define HK_X(i, j) hk_f[j]
#else
    float x[HK_ITEMS][HK_VEC];
#pragma unroll
    for (int i = 0; i < HK_ITEMS; ++i) {
      const int v = begin + i * HK_THREADS + tid;
      if (v < end) {
        hk_unpack(src[v], x[i]);
      } else {
#pragma unroll
        for (int j = 0; j < HK_VEC; ++j) x[i][j] = hk_neg_inf();
      }
    }
#define HK_ITEM_BEGIN(i)
#define HK_X(i, j) x[i][j]
#endif
#if HK_SMEM && HK_PACKED_MAX
    unsigned m2 = HK_NEG_INF2;
#pragma unroll
    for (int i = 0; i < HK_ITEMS; ++i) {
      HK_ITEM_BEGIN(i)
      m2 = hk_pack_max2(m2, hk_p);
    }
    float m = hk_pair_max(m2);
#else
    float m = hk_neg_inf();
#pragma unroll
    for (int i = 0; i < HK_ITEMS; ++i) {
      HK_ITEM_BEGIN(i)
#pragma unroll
      for (int j = 0; j < HK_VEC; ++j) m = fmaxf(m, HK_X(i, j));
    }
#endif
    m = hk_row_max(m, hk_buf[0]);
    const float base = hk_pair_base(m);
    float s = 0.0f;
    {
#pragma unroll
      for (int i = 0; i < HK_ITEMS; ++i) {
        HK_ITEM_BEGIN(i)
#pragma unroll
        for (int j = 0; j < HK_VEC; ++j) s += hk_exp(HK_X(i, j) - base);
      }
    }
    s = hk_row_sum(s, hk_buf[1]);
#endif  // HK_ITEMS == 0
    if (k == 0) hk_pushed_wait_init();
    hk_pushed_exchange(hk_pairs, m, s, rank, k);
    float pm = hk_neg_inf(), ps = 0.0f;
    if (lane < HK_CLUSTER) {
      pm = hk_pairs.slot[k & 1][lane][0];
      ps = hk_pairs.slot[k & 1][lane][1];
    }
    ++k;
    // Lanes [0, HK_CLUSTER) of every warp hold the cluster's pairs; the flat
    // merge gives them all the same (max, sum), and lane 0 passes it on.
    hk_warp_pair_flat(pm, ps, HK_CLUSTER);
    const float rm = __shfl_sync(0xffffffffu, pm, 0);
    const float rs = __shfl_sync(0xffffffffu, ps, 0);
#if HK_LOG
    const float logs = hk_log(rs);
#elif !HK_RESCALE
    const hk_scale scale = hk_scale_of(rs);
#endif
#if HK_ITEMS == 0
    // Pass 2: re-read the slice (from L2), write.
    for (int v0 = begin + tid; v0 < end; v0 += HK_THREADS * HK_STREAM_UNROLL) {
      hk_pack p[HK_STREAM_UNROLL];
#pragma unroll
      for (int u = 0; u < HK_STREAM_UNROLL; ++u) {
        const int v = v0 + u * HK_THREADS;
        if (v < end) p[u] = hk_load_again(src + v, drop);
      }
#pragma unroll
      for (int u = 0; u < HK_STREAM_UNROLL; ++u) {
        const int v = v0 + u * HK_THREADS;
        if (v < end) {
          float f[HK_VEC];
          hk_unpack(p[u], f);
#pragma unroll
          for (int j = 0; j < HK_VEC; ++j) {
#if HK_LOG
            p[u].v[j] = hk_from_float((f[j] - rm) - logs);
#else
            p[u].v[j] = hk_from_float(hk_softmax_value(f[j] - rm, scale));
#endif
          }
          hk_store_stream(dst + v, p[u], drop);
        }
      }
    }
#elif HK_RESCALE
    {
      const float recip = __frcp_rn(rs);
      const float factor = mt == hk_neg_inf() ? 0.0f * recip : hk_exp(bt - hk_pair_base(rm)) * recip;
#pragma unroll
      for (int i = 0; i < HK_ITEMS; ++i) {
        const int v = begin + i * HK_THREADS + tid;
        if (v < end) {
          hk_pack p;
          unsigned* w = reinterpret_cast<unsigned*>(&p);
#pragma unroll
          for (int k = 0; k < HK_VEC / 2; ++k) w[k] = hk_from_float2(e[i][2 * k] * factor, e[i][2 * k + 1] * factor);
          dst[v] = p;
        }
      }
    }
#else
#pragma unroll
    for (int i = 0; i < HK_ITEMS; ++i) {
      const int v = begin + i * HK_THREADS + tid;
      if (v < end) {
        HK_ITEM_BEGIN(i)
        hk_pack p;
#pragma unroll
        for (int j = 0; j < HK_VEC; ++j) {
#if HK_LOG
          p.v[j] = hk_from_float((HK_X(i, j) - rm) - logs);
#else
          p.v[j] = hk_from_float(hk_softmax_value(HK_X(i, j) - rm, scale));
#endif
        }
        dst[v] = p;
#if HK_PIPE
        // Note [Pipelined slices]: the slot's next row. The store above took the output computed from the
        // slot's read, so the copy issues after that read has returned.
        if (row + clusters < rows) hk_cp_async(hk_stage + (i * HK_THREADS + tid), next + v);
#endif
      }
    }
#endif  // HK_ITEMS == 0
  }
  if (k == 0) hk_pushed_wait_init();  // no row: the arrive of hk_pushed_init still needs its wait
}
#undef HK_X
#undef HK_ITEM_BEGIN
#endif  // HK_CLUSTER > 1
