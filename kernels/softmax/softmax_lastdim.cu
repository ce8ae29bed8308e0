// softmax over the last dimension of a contiguous [rows, cols] tensor:
//   out[r, c] = exp(in[r, c] - max_r) / sum_c' exp(in[r, c'] - max_r)
// the semantics of aten::_softmax(x, -1, half_to_float=false): input and output
// share one dtype, arithmetic is fp32.
//
// Compiled by NVRTC with the defines below (SoftmaxFamily::compileOptions); it
// includes no header at all, so it needs neither cuda_fp16.h nor cuda_bf16.h.
//   HK_DTYPE    0 = float32, 1 = float16, 2 = bfloat16 (hotkernel::kernels::DType)
//   HK_THREADS  threads per CTA, a power of two in [32, 1024]
//   HK_VEC      elements per vector access, a power of two, HK_VEC * sizeof(element) <= 16
//   HK_ITEMS    > 0: register-resident, each thread holds HK_ITEMS vectors of the row;
//               0: streaming, any row length, the row is read twice
//
// Preconditions (checked on the host by SoftmaxFamily's guards, not here):
//   cols % HK_VEC == 0; `in` and `out` aligned to HK_VEC * sizeof(element);
//   cols <= HK_THREADS * HK_VEC * HK_ITEMS when HK_ITEMS > 0; cols <= 2^30.
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
// partials), so results are bitwise reproducible. The butterfly gives all lanes
// the same bits only when each combining step is commutative bit for bit; the
// pair merge therefore forbids fma contraction (__fmul_rn/__fadd_rn).

#if !defined(HK_DTYPE) || !defined(HK_THREADS) || !defined(HK_VEC) || !defined(HK_ITEMS)
#error "softmax_lastdim.cu needs HK_DTYPE, HK_THREADS, HK_VEC and HK_ITEMS"
#endif

#define HK_WARPS (HK_THREADS / 32)
// Streaming: vectors each thread loads before it uses the first (loads in
// flight): 16 elements, at most 8 accesses. More (4 x 16 bytes of bf16) makes
// ptxas spill under __launch_bounds__(1024).
#define HK_STREAM_UNROLL (HK_VEC >= 2 ? 16 / HK_VEC : 8)

#if HK_DTYPE == 0
typedef float hk_elem;
#elif HK_DTYPE == 1 || HK_DTYPE == 2
typedef unsigned short hk_elem;  // the bits of a float16 / bfloat16
#else
#error "HK_DTYPE must be 0 (float32), 1 (float16) or 2 (bfloat16)"
#endif

static_assert(HK_THREADS >= 32 && HK_THREADS <= 1024 && (HK_THREADS & (HK_THREADS - 1)) == 0,
              "HK_THREADS must be a power of two in [32, 1024]");
static_assert(HK_VEC >= 1 && (HK_VEC & (HK_VEC - 1)) == 0 && HK_VEC * sizeof(hk_elem) <= 16,
              "HK_VEC must be a power of two of at most 16 bytes");
static_assert(HK_ITEMS >= 0 && HK_ITEMS <= 16, "HK_ITEMS must be in [0, 16]");

// One vector access: HK_VEC elements, aligned to its size so that the compiler
// emits a single ld/st.global.v4.u32 (16 bytes), .v2 (8) or scalar access.
struct alignas(HK_VEC * sizeof(hk_elem)) hk_pack {
  hk_elem v[HK_VEC];
};

#ifndef HK_CACHE_HINTS
#define HK_CACHE_HINTS 0
#endif
#ifndef HK_EXPF
#define HK_EXPF 0
#endif

#if HK_CACHE_HINTS
#define HK_PACK_BYTES (HK_VEC * 2 * (HK_DTYPE == 0 ? 2 : 1))
__device__ __forceinline__ unsigned long long hk_policy_last() {
  unsigned long long p;
  asm("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(p));
  return p;
}
__device__ __forceinline__ unsigned long long hk_policy_first() {
  unsigned long long p;
  asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(p));
  return p;
}
__device__ __forceinline__ hk_pack hk_ld(const hk_pack* a, unsigned long long pol) {
  hk_pack p;
  unsigned int* r = reinterpret_cast<unsigned int*>(&p);
#if HK_PACK_BYTES == 16
  asm("ld.global.L2::cache_hint.v4.u32 {%0,%1,%2,%3}, [%4], %5;"
      : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "l"(a), "l"(pol));
#elif HK_PACK_BYTES == 8
  asm("ld.global.L2::cache_hint.v2.u32 {%0,%1}, [%2], %3;" : "=r"(r[0]), "=r"(r[1]) : "l"(a), "l"(pol));
#elif HK_PACK_BYTES == 4
  asm("ld.global.L2::cache_hint.u32 %0, [%1], %2;" : "=r"(r[0]) : "l"(a), "l"(pol));
#else
  unsigned short* h = reinterpret_cast<unsigned short*>(&p);
  asm("ld.global.L2::cache_hint.u16 %0, [%1], %2;" : "=h"(h[0]) : "l"(a), "l"(pol));
#endif
  return p;
}
__device__ __forceinline__ void hk_st(hk_pack* a, const hk_pack& p, unsigned long long pol) {
  const unsigned int* r = reinterpret_cast<const unsigned int*>(&p);
#if HK_PACK_BYTES == 16
  asm volatile("st.global.L2::cache_hint.v4.u32 [%0], {%1,%2,%3,%4}, %5;"
               :: "l"(a), "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3]), "l"(pol) : "memory");
#elif HK_PACK_BYTES == 8
  asm volatile("st.global.L2::cache_hint.v2.u32 [%0], {%1,%2}, %3;" :: "l"(a), "r"(r[0]), "r"(r[1]), "l"(pol) : "memory");
#elif HK_PACK_BYTES == 4
  asm volatile("st.global.L2::cache_hint.u32 [%0], %1, %2;" :: "l"(a), "r"(r[0]), "l"(pol) : "memory");
#else
  const unsigned short* h = reinterpret_cast<const unsigned short*>(&p);
  asm volatile("st.global.L2::cache_hint.u16 [%0], %1, %2;" :: "l"(a), "h"(h[0]), "l"(pol) : "memory");
#endif
}
#define HK_LOAD1(ptr) hk_ld(ptr, hk_policy_last())
#define HK_LOAD2(ptr) hk_ld(ptr, hk_policy_first())
#define HK_STORE(ptr, p) hk_st(ptr, p, hk_policy_first())
#else
#define HK_LOAD1(ptr) (*(ptr))
#define HK_LOAD2(ptr) (*(ptr))
#define HK_STORE(ptr, p) (*(ptr) = (p))
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
  // Round to nearest even; NaN stays a (quiet) NaN instead of rounding into inf.
  unsigned int u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<hk_elem>((u >> 16) | 0x0040u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<hk_elem>(u >> 16);
#endif
}

// exp(d) with fp32 accuracy: one rounding in d * log2(e), then ex2 (about 2 ulp).
// For d <= 0, as here, the product's rounding error stays below 1e-7 relative
// for |d| < 1, and exp(d) is tiny where |d| is large.
__device__ __forceinline__ float hk_exp(float d) {
#if HK_EXPF
  return expf(d);
#else
  return exp2f(d * 1.4426950408889634f);
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

// Block-wide max / sum; every thread gets the result. `buf` holds HK_WARPS
// floats and must not be reused before the next __syncthreads().
__device__ __forceinline__ float hk_block_max(float v, float* buf) {
  v = hk_warp_max(v, 32);
#if HK_WARPS > 1
  if ((threadIdx.x & 31) == 0) buf[threadIdx.x >> 5] = v;
  __syncthreads();
  v = hk_warp_max(buf[threadIdx.x & (HK_WARPS - 1)], HK_WARPS);
#endif
  return v;
}

__device__ __forceinline__ float hk_block_sum(float v, float* buf) {
  v = hk_warp_sum(v, 32);
#if HK_WARPS > 1
  if ((threadIdx.x & 31) == 0) buf[threadIdx.x >> 5] = v;
  __syncthreads();
  v = hk_warp_sum(buf[threadIdx.x & (HK_WARPS - 1)], HK_WARPS);
#endif
  return v;
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

// `bufM` and `bufS` hold HK_WARPS floats each (same reuse rule as above).
__device__ __forceinline__ void hk_block_pair(float& m, float& s, float* bufM, float* bufS) {
  hk_warp_pair(m, s, 32);
#if HK_WARPS > 1
  if ((threadIdx.x & 31) == 0) {
    bufM[threadIdx.x >> 5] = m;
    bufS[threadIdx.x >> 5] = s;
  }
  __syncthreads();
  m = bufM[threadIdx.x & (HK_WARPS - 1)];
  s = bufS[threadIdx.x & (HK_WARPS - 1)];
  hk_warp_pair(m, s, HK_WARPS);
#endif
}

extern "C" __global__ void __launch_bounds__(HK_THREADS)
    hk_softmax_lastdim(const void* in_, void* out_, long long rows, long long cols) {
  // Two buffers so that the max and the sum reductions of one row need no
  // barrier between them; rows after the first are fenced at the loop's end.
  __shared__ float hk_buf[2][HK_WARPS];
  const hk_elem* in = static_cast<const hk_elem*>(in_);
  hk_elem* out = static_cast<hk_elem*>(out_);
  const int nvec = static_cast<int>(cols / HK_VEC);  // exact: cols % HK_VEC == 0 (guard)
  const int tid = threadIdx.x;

  for (long long row = blockIdx.x; row < rows; row += gridDim.x) {
    const hk_pack* src = reinterpret_cast<const hk_pack*>(in + row * cols);
    hk_pack* dst = reinterpret_cast<hk_pack*>(out + row * cols);

#if HK_ITEMS > 0
    // Register-resident: one read of the row; vector i*HK_THREADS + tid keeps
    // each warp's accesses contiguous. All loads are issued before first use.
    float x[HK_ITEMS][HK_VEC];
#pragma unroll
    for (int i = 0; i < HK_ITEMS; ++i) {
      const int v = i * HK_THREADS + tid;
      if (v < nvec) {
        const hk_pack p = HK_LOAD2(src + v);
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
    m = hk_block_max(m, hk_buf[0]);
    float s = 0.0f;
#pragma unroll
    for (int i = 0; i < HK_ITEMS; ++i) {
#pragma unroll
      for (int j = 0; j < HK_VEC; ++j) {
        x[i][j] = hk_exp(x[i][j] - m);
        s += x[i][j];
      }
    }
    s = hk_block_sum(s, hk_buf[1]);
    const float inv = __frcp_rn(s);
#pragma unroll
    for (int i = 0; i < HK_ITEMS; ++i) {
      const int v = i * HK_THREADS + tid;
      if (v < nvec) {
        hk_pack p;
#pragma unroll
        for (int j = 0; j < HK_VEC; ++j) p.v[j] = hk_from_float(x[i][j] * inv);
        HK_STORE(dst + v, p);
      }
    }
#else
    // Streaming pass 1: a running (max, sum) pair per thread (Note [Online
    // pairs]), rescaled once per batch of HK_STREAM_UNROLL vectors. The batch
    // stays in its storage type (half the registers of fp32 for 16-bit types)
    // and is converted where it is used.
    float m = hk_neg_inf();
    float s = 0.0f;
    for (int v0 = tid; v0 < nvec; v0 += HK_THREADS * HK_STREAM_UNROLL) {
      hk_pack p[HK_STREAM_UNROLL];
#pragma unroll
      for (int u = 0; u < HK_STREAM_UNROLL; ++u) {
        const int v = v0 + u * HK_THREADS;
        if (v < nvec) {
          p[u] = HK_LOAD1(src + v);
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
    hk_block_pair(m, s, hk_buf[0], hk_buf[1]);
    const float inv = __frcp_rn(s);
    // Pass 2: re-read (mostly from L2: a CTA's row was just read), write.
    for (int v0 = tid; v0 < nvec; v0 += HK_THREADS * HK_STREAM_UNROLL) {
      hk_pack p[HK_STREAM_UNROLL];
#pragma unroll
      for (int u = 0; u < HK_STREAM_UNROLL; ++u) {
        const int v = v0 + u * HK_THREADS;
        if (v < nvec) p[u] = HK_LOAD2(src + v);
      }
#pragma unroll
      for (int u = 0; u < HK_STREAM_UNROLL; ++u) {
        const int v = v0 + u * HK_THREADS;
        if (v < nvec) {
#pragma unroll
          for (int j = 0; j < HK_VEC; ++j) p[u].v[j] = hk_from_float(hk_exp(hk_to_float(p[u].v[j]) - m) * inv);
          HK_STORE(dst + v, p[u]);
        }
      }
    }
#endif
    // The next row writes hk_buf again: wait until every warp has read it.
    if (row + gridDim.x < rows) __syncthreads();
  }
}
