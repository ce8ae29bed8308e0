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
//               cluster of HK_CLUSTER CTAs serves each row, each CTA a slice held in
//               registers (register-resident, HK_ROWS == 1 only, sm_90+): Note [Split rows over a cluster]
//   HK_SMEM     (optional, default 0) 1: with HK_CLUSTER > 1 and 16-byte vectors, the slice is
//               staged in dynamic shared memory instead of registers (Note [Shared-memory slices])
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
                                  HK_ROWS == 1 && HK_ITEMS > 0),
              "HK_CLUSTER must be 1, or 2, 4, 8 or 16 with HK_ROWS == 1 and HK_ITEMS > 0");
static_assert(HK_LOG == 0 || HK_LOG == 1, "HK_LOG must be 0 or 1");

// L2 hints for the streaming variant's 16-byte accesses only (Note [Streaming
// L2 hints] in hk_prelude.cuh).
#define HK_STREAM_HINTS (HK_ITEMS == 0 && HK_VEC * (HK_DTYPE == 0 ? 4 : 2) == 16)

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
          p[u] = hk_load(src + v, keep);
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
        if (v < live) p[u] = hk_load(src + v, drop);
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
          hk_store(dst + v, p[u], drop);
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
// pair (max, sum; Note [Online pairs]), publishes it in its shared memory, and
// after a cluster barrier every CTA reads the HK_CLUSTER pairs through
// distributed shared memory and merges them in rank order: the same order in
// every CTA, so the whole cluster gets bit-identical (max, sum) and the result
// does not depend on the grid (Note [Deterministic reductions]). The output is
// then exp(x - max) / sum (or (x - max) - log(sum)) exactly as in the one-CTA
// variant. A second barrier, split into arrive (after the reads) and wait
// (before the pair is overwritten by the next row, or before the CTA exits),
// keeps a CTA's shared memory alive while peers still read it.
// Note [Shared-memory slices]
// With HK_SMEM, a CTA stages its slice in dynamic shared memory (HK_ITEMS
// 16-byte vectors a thread, HK_THREADS * HK_ITEMS * 16 bytes: the launch's
// sharedBytes) with cp.async instead of holding it in registers. A slice in
// registers costs ~80 registers a thread at 8 items (ptxas keeps the fp32
// values across the row barriers), which caps an SM at 3 CTAs of 256
// threads, so at 3 rows in flight; staged, ~40 registers and 33 KB of shared
// memory allow 6. Measured on the H200 side by side (bf16 [8192, 128256],
// 256 threads x 8 items, cluster 8): 1472 -> 1322 us. Each thread stages and
// later reads only its own vectors, so no barrier guards the stage: the
// thread's own cp.async.wait_all makes its copies visible to it.
// Tried and measured on the H200 (bf16 [8192, 128256]), no gain: blocks of
// 2, 4 or 8 rows a cluster with the next row's slice staged into a second
// buffer during the current row (256 x 8 cluster 8: 1277 -> 1305-1334 us;
// fewer CTAs fit); and keeping the row's sums in base 2 (one fma a term) as
// written overflowed for maxima above FLT_MAX / log2(e) (the harness's
// near-max stage caught it).
#ifndef HK_SMEM
#define HK_SMEM 0
#endif
#ifndef HK_TMA
#define HK_TMA 0
#endif
// Note [One-fma terms]
// HK_FMA_TERMS (experiment for the probe, set by no parameter point yet; not
// measured), 16-bit types: a term exp(x - m) as 2^(fma(x, log2 e, -mL)) * 2^-r
// with mL = fl(m * log2 e) and r = fma(m, log2 e, -mL), the exact remainder,
// applied once per row: one fma per element of the sum pass instead of a
// subtraction and a multiply, and no error from mL's rounding (the base-2
// reference that was tried before had one, and overflowed). The output pass
// keeps 2^((x - max) log2 e - log2 sum): folding max into the fma would round
// max * log2 e + log2 sum as a whole, an error of ulp(max * log2 e). Where m * log2 e overflows (|m| >
// FLT_MAX / log2 e: near-max inputs) the row takes the natural path; the test
// is uniform (the CTA's or the cluster's maximum).
#ifndef HK_FMA_TERMS
#define HK_FMA_TERMS 0
#endif
static_assert(HK_FMA_TERMS == 0 || HK_DTYPE != 0, "HK_FMA_TERMS is for the 16-bit types (float32 keeps expf)");
static_assert(HK_TMA >= 0 && HK_TMA <= 2, "HK_TMA must be 0, 1 or 2");
static_assert(HK_TMA == 0 || HK_SMEM, "HK_TMA needs HK_SMEM");
#if HK_SMEM
static_assert(HK_CLUSTER > 1 && HK_PACK_BYTES == 16, "HK_SMEM needs a cluster and 16-byte vectors");
__device__ __forceinline__ void hk_cp_async(void* smem, const void* gmem) {
  const unsigned a = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(a), "l"(gmem) : "memory");
}
__device__ __forceinline__ void hk_cp_async_wait() { asm volatile("cp.async.wait_all;" ::: "memory"); }

// Note [Bulk-copy experiment]
// HK_TMA (experiment for tools/gpu/probe-softmax.sh, set by no parameter point
// yet; not measured): a CTA's slice is contiguous in global memory and staged
// in order (slot k = vector begin + k), so one bulk copy (cp.async.bulk, the
// TMA unit) can move it instead of HK_ITEMS cp.async per thread. 1: loads by
// one bulk copy completing on an mbarrier; 2: the output also written in
// place into the stage and stored by one bulk copy. Slots past the slice
// still get -inf from their threads (disjoint from the copied bytes). Before
// the stage is refilled or stored, a CTA barrier and a proxy fence order the
// threads' generic accesses with the copy engine's.
#if HK_TMA
__device__ __forceinline__ unsigned hk_smem_addr(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void hk_mbar_init(unsigned long long* bar) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(hk_smem_addr(bar)) : "memory");
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}
// Thread 0: the slice's `bytes` (a multiple of 16, may be 0) from `src` into `stage`.
__device__ __forceinline__ void hk_bulk_load(void* stage, const void* src, unsigned bytes, unsigned long long* bar) {
  const unsigned b = hk_smem_addr(bar);
  if (bytes == 0) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(b) : "memory");
    return;
  }
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(b), "r"(bytes) : "memory");
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                   hk_smem_addr(stage)),
               "l"(src), "r"(bytes), "r"(b)
               : "memory");
}
__device__ __forceinline__ void hk_mbar_wait(unsigned long long* bar, unsigned phase) {
  unsigned done = 0;
  do {
    asm volatile(
        "{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
        : "=r"(done)
        : "r"(hk_smem_addr(bar)), "r"(phase)
        : "memory");
  } while (!done);
}
__device__ __forceinline__ void hk_proxy_fence() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }
// Thread 0: `bytes` of `stage` to `dst`, and waits until the stage has been read.
__device__ __forceinline__ void hk_bulk_store(void* dst, const void* stage, unsigned bytes) {
  if (bytes == 0) return;
  asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(dst), "r"(hk_smem_addr(stage)),
               "r"(bytes)
               : "memory");
  asm volatile("cp.async.bulk.commit_group;" ::: "memory");
  asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
}
#endif
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
  extern __shared__ hk_pack hk_stage[];  // HK_ITEMS * HK_THREADS vectors (Note [Shared-memory slices])
#endif
  __shared__ float hk_part[2];  // this CTA's (max, sum) pair of its slice, read by the whole cluster
#if HK_TMA
  __shared__ alignas(8) unsigned long long hk_bar;  // completes each row's bulk load (Note [Bulk-copy experiment])
  unsigned hk_phase = 0;
  if (threadIdx.x == 0) hk_mbar_init(&hk_bar);
  __syncthreads();
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
  bool published = false;  // a pair of ours may still be read by a peer
  for (long long row = blockIdx.x / HK_CLUSTER; row < rows; row += clusters) {
    const hk_pack* src = reinterpret_cast<const hk_pack*>(in + row * cols);
    hk_pack* dst = reinterpret_cast<hk_pack*>(out + row * cols);
#if HK_SMEM && HK_TMA
    {
      if (tid == 0) hk_bulk_load(hk_stage, src + begin, static_cast<unsigned>(end - begin) * 16u, &hk_bar);
      hk_pack q;
#pragma unroll
      for (int j = 0; j < HK_VEC; ++j) q.v[j] = hk_neg_inf_elem();
#pragma unroll
      for (int i = 0; i < HK_ITEMS; ++i) {
        if (i * HK_THREADS + tid >= end - begin) hk_stage[i * HK_THREADS + tid] = q;
      }
      hk_mbar_wait(&hk_bar, hk_phase);
      hk_phase ^= 1u;
    }
#elif HK_SMEM
    hk_stage_slice(hk_stage, src, begin, end, tid);
    hk_cp_async_wait();
#endif
#if HK_SMEM
#define HK_ITEM_BEGIN(i)                               \
  const hk_pack hk_p = hk_stage[(i) * HK_THREADS + tid]; \
  float hk_f[HK_VEC];                                    \
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
#if HK_FMA_TERMS
    // Note [One-fma terms]: exp(x - base) = 2^(fma(x, log2 e, -bL)) * 2^-r.
    const float bL = base * HK_LOG2E;
    if (fabsf(bL) <= 3.402823466e38f) {  // uniform: base is the CTA's
      const float r = fmaf(base, HK_LOG2E, -bL);
#pragma unroll
      for (int i = 0; i < HK_ITEMS; ++i) {
        HK_ITEM_BEGIN(i)
#pragma unroll
        for (int j = 0; j < HK_VEC; ++j) s += hk_ex2(fmaf(HK_X(i, j), HK_LOG2E, -bL));
      }
      s *= hk_ex2(-r);
    } else
#endif
    {
#pragma unroll
      for (int i = 0; i < HK_ITEMS; ++i) {
        HK_ITEM_BEGIN(i)
#pragma unroll
        for (int j = 0; j < HK_VEC; ++j) s += hk_exp(HK_X(i, j) - base);
      }
    }
    s = hk_row_sum(s, hk_buf[1]);
    if (published) hk_cluster_wait();  // every peer has read our previous pair
    if (tid == 0) {
      hk_part[0] = m;
      hk_part[1] = s;
    }
    hk_cluster_arrive();
    hk_cluster_wait();  // every CTA's pair is visible
    float pm = hk_neg_inf(), ps = 0.0f;
    if (lane < HK_CLUSTER) {
      pm = hk_cluster_load(&hk_part[0], lane);
      ps = hk_cluster_load(&hk_part[1], lane);
    }
    hk_cluster_arrive();  // done reading the peers' pairs
    published = true;
    float rm = __shfl_sync(0xffffffffu, pm, 0);
    float rs = __shfl_sync(0xffffffffu, ps, 0);
#pragma unroll
    for (int r = 1; r < HK_CLUSTER; ++r) {
      hk_pair_merge(rm, rs, __shfl_sync(0xffffffffu, pm, r), __shfl_sync(0xffffffffu, ps, r));
    }
#if HK_LOG
    const float logs = hk_log(rs);
#else
    const hk_scale scale = hk_scale_of(rs);
#endif
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
#if HK_TMA == 2
        hk_stage[i * HK_THREADS + tid] = p;  // stored by one bulk copy below
#else
        dst[v] = p;
#endif
      }
    }
#if HK_TMA
    // The stage is read by the bulk store / refilled by the next row's bulk
    // load only after every thread is done with it (Note [Bulk-copy experiment]).
#if HK_TMA == 2
    hk_proxy_fence();  // this thread's output writes, before the copy engine reads them
#endif
    __syncthreads();
    if (tid == 0) {
#if HK_TMA == 2
      hk_bulk_store(dst + begin, hk_stage, static_cast<unsigned>(end - begin) * 16u);
#endif
      hk_proxy_fence();  // our reads of this row, before the next bulk load writes the stage
    }
    if (row + clusters < rows) __syncthreads();
#endif
  }
  if (published) hk_cluster_wait();  // peers may still read our last pair
}
#undef HK_X
#undef HK_ITEM_BEGIN
#endif  // HK_CLUSTER > 1
