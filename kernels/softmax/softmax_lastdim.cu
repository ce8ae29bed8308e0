// softmax (or log_softmax) over the last dimension of a contiguous [rows, cols] tensor:
//   softmax:     out[r, c] = exp(in[r, c] - max_r) / sum_c' exp(in[r, c'] - max_r)
//   log_softmax: out[r, c] = (in[r, c] - max_r) - log(sum_c' exp(in[r, c'] - max_r))
// the semantics of aten::_softmax / aten::_log_softmax(x, -1, half_to_float=false):
// input and output share one dtype, arithmetic is fp32.
//
// Compiled by NVRTC with the defines below (SoftmaxFamily::compileOptions); it
// includes no header at all, so it needs neither cuda_fp16.h nor cuda_bf16.h.
//   HK_DTYPE    0 = float32, 1 = float16, 2 = bfloat16 (hotkernel::kernels::DType)
//   HK_THREADS  threads per CTA, a power of two in [32, 1024]
//   HK_ROWS     rows per CTA: 1, or HK_THREADS / HK_ROWS <= 32 (each row within one warp)
//   HK_VEC      elements per vector access, a power of two, HK_VEC * sizeof(element) <= 16
//   HK_ITEMS    > 0: register-resident, each thread holds HK_ITEMS vectors of its row;
//               0: streaming, any row length, the row is read twice
//   HK_CLUSTER  (optional, default 1) > 1: a thread-block cluster of HK_CLUSTER CTAs
//               serves each row, each CTA a slice held in registers (register-resident,
//               HK_ROWS == 1 only, sm_90+): Note [Split rows over a cluster]
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

#if HK_DTYPE == 0
typedef float hk_elem;
#define HK_ELEM_BYTES 4
#elif HK_DTYPE == 1 || HK_DTYPE == 2
typedef unsigned short hk_elem;  // the bits of a float16 / bfloat16
#define HK_ELEM_BYTES 2
#else
#error "HK_DTYPE must be 0 (float32), 1 (float16) or 2 (bfloat16)"
#endif
#define HK_PACK_BYTES (HK_VEC * HK_ELEM_BYTES)

static_assert(HK_THREADS >= 32 && HK_THREADS <= 1024 && (HK_THREADS & (HK_THREADS - 1)) == 0,
              "HK_THREADS must be a power of two in [32, 1024]");
static_assert(HK_ROWS >= 1 && (HK_ROWS & (HK_ROWS - 1)) == 0 && HK_ROWS <= HK_THREADS &&
                  (HK_ROWS == 1 || HK_ROW_THREADS <= 32),
              "HK_ROWS must be 1 or leave each row at most one warp");
static_assert(HK_VEC >= 1 && (HK_VEC & (HK_VEC - 1)) == 0 && HK_PACK_BYTES <= 16,
              "HK_VEC must be a power of two of at most 16 bytes");
static_assert(HK_ITEMS >= 0 && HK_ITEMS <= 16, "HK_ITEMS must be in [0, 16]");
static_assert(HK_CLUSTER == 1 || ((HK_CLUSTER == 2 || HK_CLUSTER == 4 || HK_CLUSTER == 8) && HK_ROWS == 1 &&
                                  HK_ITEMS > 0),
              "HK_CLUSTER must be 1, or 2, 4 or 8 with HK_ROWS == 1 and HK_ITEMS > 0");
static_assert(HK_LOG == 0 || HK_LOG == 1, "HK_LOG must be 0 or 1");
#if HK_CLUSTER > 1 && defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
#error "HK_CLUSTER > 1 needs sm_90 or later (thread-block clusters)"
#endif

// One vector access: HK_VEC elements, aligned to its size so that the compiler
// emits a single ld/st.global.v4.u32 (16 bytes), .v2 (8) or scalar access.
struct alignas(HK_PACK_BYTES) hk_pack {
  hk_elem v[HK_VEC];
};

// Note [Streaming L2 hints]
// The streaming variant reads each row twice and relies on the second read
// hitting L2. Its first read asks L2 to keep the lines (evict_last), its
// second read and its stores to drop them first (evict_first), so the output
// stream does not push out rows still to be re-read. Measured on H200 (bf16
// [8192, 128256], 512 threads, vec 8): 1644 -> 1511 us; neutral to +12% on the
// other 16-byte streaming points; but slower with narrower accesses and in the
// register-resident variant, which therefore use plain accesses.
#define HK_STREAM_HINTS (HK_ITEMS == 0 && HK_PACK_BYTES == 16)

#if HK_STREAM_HINTS
__device__ __forceinline__ unsigned long long hk_policy_evict_last() {
  unsigned long long p;
  asm("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(p));
  return p;
}
__device__ __forceinline__ unsigned long long hk_policy_evict_first() {
  unsigned long long p;
  asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(p));
  return p;
}
__device__ __forceinline__ hk_pack hk_load(const hk_pack* a, unsigned long long policy) {
  hk_pack p;
  unsigned int* r = reinterpret_cast<unsigned int*>(&p);
  asm("ld.global.L2::cache_hint.v4.u32 {%0,%1,%2,%3}, [%4], %5;"
      : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
      : "l"(a), "l"(policy));
  return p;
}
__device__ __forceinline__ void hk_store(hk_pack* a, const hk_pack& p, unsigned long long policy) {
  const unsigned int* r = reinterpret_cast<const unsigned int*>(&p);
  asm volatile("st.global.L2::cache_hint.v4.u32 [%0], {%1,%2,%3,%4}, %5;" ::"l"(a), "r"(r[0]), "r"(r[1]),
               "r"(r[2]), "r"(r[3]), "l"(policy)
               : "memory");
}
#else
__device__ __forceinline__ unsigned long long hk_policy_evict_last() { return 0; }
__device__ __forceinline__ unsigned long long hk_policy_evict_first() { return 0; }
__device__ __forceinline__ hk_pack hk_load(const hk_pack* a, unsigned long long) { return *a; }
__device__ __forceinline__ void hk_store(hk_pack* a, const hk_pack& p, unsigned long long) { *a = p; }
#endif

__device__ __forceinline__ float hk_neg_inf() { return __int_as_float(0xff800000); }

__device__ __forceinline__ float hk_to_float(hk_elem x) {
#if HK_DTYPE == 0
  return x;
#elif HK_DTYPE == 1
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(x));
  return f;
#else
  return __uint_as_float(static_cast<unsigned int>(x) << 16);
#endif
}

__device__ __forceinline__ hk_elem hk_from_float(float f) {
#if HK_DTYPE == 0
  return f;
#elif HK_DTYPE == 1
  hk_elem h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
#else
  // sm_80+: one cvt, round to nearest even, NaN to the canonical NaN.
  // Measured on H200 side by side against the integer round-to-nearest-even
  // it replaced (bf16, every point): 12-17% faster where the kernel is close
  // to the roofline ([4096, 32000] 193 -> 168 us, [8192, 128256] streaming
  // 1672 -> 1434 us): the conversion was the issue bottleneck.
  hk_elem h;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
#endif
}

// Note [Softmax exp]
// float32 uses expf, the function ATen's std::exp compiles to (about 2 ulp,
// with the range reduction split in two fmas), so each term matches ATen's
// bit for bit and only the summation order differs. The 16-bit types use
// exp2f(d * log2(e)): one rounding of the product (relative error below
// |d| * 2^-24) is invisible after rounding to 8 or 11 mantissa bits, and it
// is 10-20% faster where the kernel is close to the memory roofline (expf
// measured 191 -> 203 us on bf16 [4096, 32000]).
__device__ __forceinline__ float hk_exp(float d) {
#if HK_DTYPE == 0
  return expf(d);
#else
  return exp2f(d * 1.4426950408889634f);
#endif
}

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

__device__ __forceinline__ float hk_warp_max(float v, int width) {
#pragma unroll
  for (int o = width / 2; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

__device__ __forceinline__ float hk_warp_sum(float v, int width) {
#pragma unroll
  for (int o = width / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Row-wide max / sum; every thread of the row gets the result. When a row
// spans warps, `buf` holds one float per warp and must not be reused before
// the next __syncthreads(). When rows are within a warp, the xor butterfly of
// width HK_ROW_THREADS stays inside each row's aligned group of lanes.
__device__ __forceinline__ float hk_row_max(float v, float* buf) {
#if HK_ROW_THREADS <= 32
  return hk_warp_max(v, HK_ROW_THREADS);
#else
  v = hk_warp_max(v, 32);
  if ((threadIdx.x & 31) == 0) buf[threadIdx.x >> 5] = v;
  __syncthreads();
  return hk_warp_max(buf[threadIdx.x & (HK_ROW_WARPS - 1)], HK_ROW_WARPS);
#endif
}

__device__ __forceinline__ float hk_row_sum(float v, float* buf) {
#if HK_ROW_THREADS <= 32
  return hk_warp_sum(v, HK_ROW_THREADS);
#else
  v = hk_warp_sum(v, 32);
  if ((threadIdx.x & 31) == 0) buf[threadIdx.x >> 5] = v;
  __syncthreads();
  return hk_warp_sum(buf[threadIdx.x & (HK_ROW_WARPS - 1)], HK_ROW_WARPS);
#endif
}

// Note [Online pairs]
// A pair (m, s) stands for s * exp(-m) summed over its elements: m the largest
// element seen, s = sum exp(x - m). While m is -inf (nothing but -inf seen) the
// pair is rescaled against 0 instead, so that s stays 0 rather than
// exp(-inf - -inf) = NaN; a row that is -inf throughout still ends as NaN in
// the output pass, like ATen.
__device__ __forceinline__ float hk_pair_base(float m) { return m == hk_neg_inf() ? 0.0f : m; }

__device__ __forceinline__ void hk_pair_merge(float& m, float& s, float om, float os) {
  const float nm = fmaxf(m, om);
  const float base = hk_pair_base(nm);
  s = __fadd_rn(__fmul_rn(s, hk_exp(m - base)), __fmul_rn(os, hk_exp(om - base)));
  m = nm;
}

__device__ __forceinline__ void hk_warp_pair(float& m, float& s, int width) {
#pragma unroll
  for (int o = width / 2; o > 0; o >>= 1) {
    const float om = __shfl_xor_sync(0xffffffffu, m, o);
    const float os = __shfl_xor_sync(0xffffffffu, s, o);
    hk_pair_merge(m, s, om, os);
  }
}

// `bufM` and `bufS` hold one float per warp each (same reuse rule as above).
__device__ __forceinline__ void hk_row_pair(float& m, float& s, float* bufM, float* bufS) {
#if HK_ROW_THREADS <= 32
  hk_warp_pair(m, s, HK_ROW_THREADS);
#else
  hk_warp_pair(m, s, 32);
  if ((threadIdx.x & 31) == 0) {
    bufM[threadIdx.x >> 5] = m;
    bufS[threadIdx.x >> 5] = s;
  }
  __syncthreads();
  m = bufM[threadIdx.x & (HK_ROW_WARPS - 1)];
  s = bufS[threadIdx.x & (HK_ROW_WARPS - 1)];
  hk_warp_pair(m, s, HK_ROW_WARPS);
#endif
}

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
        const hk_pack p = src[v];
#pragma unroll
        for (int j = 0; j < HK_VEC; ++j) x[i][j] = hk_to_float(p.v[j]);
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
          for (int j = 0; j < HK_VEC; ++j) p[u].v[j] = hk_from_float(hk_neg_inf());
        }
      }
      float bm = m;
#pragma unroll
      for (int u = 0; u < HK_STREAM_UNROLL; ++u) {
#pragma unroll
        for (int j = 0; j < HK_VEC; ++j) bm = fmaxf(bm, hk_to_float(p[u].v[j]));
      }
      const float base = hk_pair_base(bm);
      s *= hk_exp(m - base);
#pragma unroll
      for (int u = 0; u < HK_STREAM_UNROLL; ++u) {
#pragma unroll
        for (int j = 0; j < HK_VEC; ++j) s += hk_exp(hk_to_float(p[u].v[j]) - base);
      }
      m = bm;
    }
    hk_row_pair(m, s, hk_buf[0], hk_buf[1]);
#if HK_LOG
    const float logs = hk_log(s);
#else
    const float inv = __frcp_rn(s);
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
#pragma unroll
          for (int j = 0; j < HK_VEC; ++j) {
#if HK_LOG
            p[u].v[j] = hk_from_float((hk_to_float(p[u].v[j]) - m) - logs);
#else
            p[u].v[j] = hk_from_float(hk_exp(hk_to_float(p[u].v[j]) - m) * inv);
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
__device__ __forceinline__ unsigned hk_cluster_rank() {
  unsigned r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}
__device__ __forceinline__ void hk_cluster_arrive() { asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory"); }
__device__ __forceinline__ void hk_cluster_wait() { asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory"); }
// The float at `p` (a __shared__ variable) in the shared memory of cluster CTA
// `rank`: mapa on the generic address, then a generic load (what
// cooperative_groups' map_shared_rank compiles to). The 32-bit
// shared::cluster form (cvta.to.shared + mapa.shared::cluster.u32 +
// ld.shared::cluster) faulted on the H200 for some points (float32, vec 1,
// cluster 4: "misaligned __shared__ read" under compute-sanitizer).
__device__ __forceinline__ float hk_cluster_load(const float* p, unsigned rank) {
  unsigned long long remote;
  asm volatile("mapa.u64 %0, %1, %2;" : "=l"(remote) : "l"(reinterpret_cast<unsigned long long>(p)), "r"(rank));
  return *reinterpret_cast<const float*>(remote);
}

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
#ifndef HK_SMEM
#define HK_SMEM 0
#endif
#if HK_SMEM
static_assert(HK_CLUSTER > 1 && HK_PACK_BYTES == 16, "HK_SMEM needs a cluster and 16-byte vectors");
__device__ __forceinline__ void hk_cp_async(void* smem, const void* gmem) {
  const unsigned a = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(a), "l"(gmem) : "memory");
}
__device__ __forceinline__ void hk_cp_async_wait() { asm volatile("cp.async.wait_all;" ::: "memory"); }
#endif

extern "C" __global__ void __cluster_dims__(HK_CLUSTER, 1, 1) HK_BOUNDS
    hk_softmax_lastdim(const void* in_, void* out_, long long rows, long long cols) {
  __shared__ float hk_buf[2][HK_THREADS / 32];
#if HK_SMEM
  extern __shared__ hk_pack hk_stage[];  // HK_ITEMS * HK_THREADS vectors (Note [Shared-memory slices])
#endif
  __shared__ float hk_part[2];  // this CTA's (max, sum) pair of its slice, read by the whole cluster
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
#if HK_SMEM
    // Each thread stages and later reads only its own vectors: no barrier.
#pragma unroll
    for (int i = 0; i < HK_ITEMS; ++i) {
      const int v = begin + i * HK_THREADS + tid;
      if (v < end) hk_cp_async(&hk_stage[i * HK_THREADS + tid], src + v);
    }
    hk_cp_async_wait();
#define HK_ITEM_BEGIN(i)                                        \
  const hk_pack hk_p = hk_stage[(i) * HK_THREADS + tid]; \
  const bool hk_ok = begin + (i) * HK_THREADS + tid < end;
#define HK_X(i, j) (hk_ok ? hk_to_float(hk_p.v[j]) : hk_neg_inf())
#else
    float x[HK_ITEMS][HK_VEC];
#pragma unroll
    for (int i = 0; i < HK_ITEMS; ++i) {
      const int v = begin + i * HK_THREADS + tid;
      if (v < end) {
        const hk_pack p = src[v];
#pragma unroll
        for (int j = 0; j < HK_VEC; ++j) x[i][j] = hk_to_float(p.v[j]);
      } else {
#pragma unroll
        for (int j = 0; j < HK_VEC; ++j) x[i][j] = hk_neg_inf();
      }
    }
#define HK_ITEM_BEGIN(i)
#define HK_X(i, j) x[i][j]
#endif
    float m = hk_neg_inf();
#pragma unroll
    for (int i = 0; i < HK_ITEMS; ++i) {
      HK_ITEM_BEGIN(i)
#pragma unroll
      for (int j = 0; j < HK_VEC; ++j) m = fmaxf(m, HK_X(i, j));
    }
    m = hk_row_max(m, hk_buf[0]);
    const float base = hk_pair_base(m);
    float s = 0.0f;
#pragma unroll
    for (int i = 0; i < HK_ITEMS; ++i) {
      HK_ITEM_BEGIN(i)
#pragma unroll
      for (int j = 0; j < HK_VEC; ++j) s += hk_exp(HK_X(i, j) - base);
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
    const float inv = __frcp_rn(rs);
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
          p.v[j] = hk_from_float(hk_exp(HK_X(i, j) - rm) * inv);
#endif
        }
        dst[v] = p;
      }
    }
  }
  if (published) hk_cluster_wait();  // peers may still read our last pair
}
#undef HK_X
#undef HK_ITEM_BEGIN
#endif  // HK_CLUSTER > 1
