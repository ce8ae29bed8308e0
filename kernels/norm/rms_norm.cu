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
// Compiled by NVRTC with the defines below (RmsNormFamily::compileOptions); it
// includes no header at all. The helpers up to hk_row_sum are the same as in
// softmax/softmax_lastdim.cu and layer_norm.cu (duplicated on purpose: each
// template is one self-contained source, hashed alone into the cache key).
//   HK_DTYPE       0 = float32, 1 = float16, 2 = bfloat16 (hotkernel::kernels::DType)
//   HK_THREADS     threads per CTA, a power of two in [32, 1024]
//   HK_ROWS        rows per CTA: 1, or HK_THREADS / HK_ROWS <= 32 (each row within one warp)
//   HK_VEC         elements per vector access, a power of two, HK_VEC * sizeof(element) <= 16
//   HK_ITEMS       > 0: register-resident, each thread holds HK_ITEMS vectors of its row
//                  (one read of the row); 0: streaming, any row length, the row is read twice
//   HK_HAS_WEIGHT  1: multiply by weight (same dtype as the input, `cols` elements); 0: no weight
//
// Entry point (RmsNormFamily::kKernelName):
//   extern "C" __global__ void hk_rms_norm(const void* in, const void* weight, void* out,
//                                          float* rstd, long long rows, long long cols, float eps)
// `weight` is ignored when HK_HAS_WEIGHT == 0. rstd[r] is written for every row.
//
// Preconditions (checked on the host by RmsNormFamily's guards, not here):
//   cols % HK_VEC == 0; in, weight and out aligned to HK_VEC * sizeof(element);
//   rstd aligned to 4; cols <= HK_ROW_THREADS * HK_VEC * HK_ITEMS when HK_ITEMS > 0;
//   cols <= 2^30.
//
// Note [Norm special values]
// No special cases: the arithmetic is ATen's, so a row holding inf or NaN
// gives what ATen gives (sum of squares inf -> rstd 0 -> 0 * finite = 0 and
// 0 * inf = NaN; NaN anywhere -> NaN row). Lanes that hold no element
// contribute exact zeros.
//
// Note [Norm deterministic reductions]
// As in softmax_lastdim.cu: per-thread sums in index order, then an xor
// butterfly within each warp and the same butterfly across the warps'
// partials; every lane ends with the same bits (addition is commutative), and
// results do not depend on the grid.

#if !defined(HK_DTYPE) || !defined(HK_THREADS) || !defined(HK_ROWS) || !defined(HK_VEC) || !defined(HK_ITEMS) || \
    !defined(HK_HAS_WEIGHT)
#error "rms_norm.cu needs HK_DTYPE, HK_THREADS, HK_ROWS, HK_VEC, HK_ITEMS and HK_HAS_WEIGHT"
#endif

#define HK_ROW_THREADS (HK_THREADS / HK_ROWS)
#define HK_ROW_WARPS (HK_ROW_THREADS / 32)  // warps per row when a row spans warps (HK_ROWS == 1)
// Streaming: vectors each thread loads before it uses the first (16 elements,
// at most 8 accesses), as in softmax_lastdim.cu.
#define HK_STREAM_UNROLL (HK_VEC >= 2 ? 16 / HK_VEC : 8)
// Pass 2 re-reads the row mostly from L2 (shorter latency) and loads the
// column arrays next to it: a batch of HK_STREAM_UNROLL >> (arrays present)
// vectors (at least 1) keeps x and its arrays within HK_STREAM_UNROLL
// vectors' worth of registers, as in pass 1.
#define HK_STREAM_UNROLL2 ((HK_STREAM_UNROLL >> (HK_HAS_WEIGHT)) > 0 ? (HK_STREAM_UNROLL >> (HK_HAS_WEIGHT)) : 1)

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
static_assert(HK_ROWS == 1 || HK_ITEMS > 0, "several rows per CTA are register-resident only");
static_assert(HK_HAS_WEIGHT == 0 || HK_HAS_WEIGHT == 1, "HK_HAS_WEIGHT must be 0 or 1");

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

// One vector access: HK_VEC elements, aligned to its size (ld/st.global.v4 at 16 bytes).
struct alignas(HK_PACK_BYTES) hk_pack {
  hk_elem v[HK_VEC];
};

// L2 hints of the streaming variant (Note [Streaming L2 hints] in
// softmax_lastdim.cu): the first read keeps the row in L2 (evict_last), the
// second read and the stores drop it first (evict_first). 16-byte accesses only.
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

__device__ __forceinline__ hk_pack hk_zero_pack() {
  hk_pack p;
#pragma unroll
  for (int j = 0; j < HK_VEC; ++j) p.v[j] = hk_from_float(0.0f);
  return p;
}

__device__ __forceinline__ float hk_warp_sum(float v, int width) {
#pragma unroll
  for (int o = width / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Row-wide sum; every thread of the row gets the same bits. When a row spans
// warps, `buf` holds one float per warp and must not be reused before the next
// __syncthreads(). When rows are within a warp, the butterfly of width
// HK_ROW_THREADS stays inside each row's aligned group of lanes.
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

extern "C" __global__ void HK_LAUNCH_BOUNDS
    hk_rms_norm(const void* in_, const void* weight_, void* out_, float* rstd, long long rows, long long cols,
                float eps) {
  __shared__ float hk_buf[HK_THREADS / 32];
  const hk_elem* in = static_cast<const hk_elem*>(in_);
  hk_elem* out = static_cast<hk_elem*>(out_);
  const hk_pack* weight = static_cast<const hk_pack*>(weight_);
  const int nvec = static_cast<int>(cols / HK_VEC);  // exact: cols % HK_VEC == 0 (guard)
  const int tid = threadIdx.x & (HK_ROW_THREADS - 1);  // this thread's place in its row
  const int sub = threadIdx.x / HK_ROW_THREADS;         // its row within the CTA's rows
  const float fcols = static_cast<float>(cols);
  (void)weight;

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
    // Register-resident: one read of the row, all loads issued before first
    // use; vector i * HK_ROW_THREADS + tid keeps each warp's accesses contiguous.
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
        for (int j = 0; j < HK_VEC; ++j) x[i][j] = 0.0f;
      }
    }
    float ss = 0.0f;
#pragma unroll
    for (int i = 0; i < HK_ITEMS; ++i) {
      float part = 0.0f;
#pragma unroll
      for (int j = 0; j < HK_VEC; ++j) part = fmaf(x[i][j], x[i][j], part);
      ss += part;
    }
    ss = hk_row_sum(ss, hk_buf);
    const float r = hk_rstd(ss, fcols, eps);
    if (tid == 0 && row < rows) rstd[row] = r;
    // The weight is loaded here, after the reduction, rather than once before
    // the row loop: x alone is live across the reduction, and ptxas may
    // interleave these loads with the output as registers allow (Note [Norm
    // register budget]). They hit L1 / L2: every row reads the same weight.
#pragma unroll
    for (int i = 0; i < HK_ITEMS; ++i) {
      const int v = i * HK_ROW_THREADS + tid;
      if (v < live) {
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
#else
    const unsigned long long keep = hk_policy_evict_last();
    const unsigned long long drop = hk_policy_evict_first();
    // Streaming pass 1: the sum of squares, HK_STREAM_UNROLL vectors in flight
    // per thread (kept in their storage type until used).
    float ss = 0.0f;
    for (int v0 = tid; v0 < live; v0 += HK_ROW_THREADS * HK_STREAM_UNROLL) {
      hk_pack p[HK_STREAM_UNROLL];
#pragma unroll
      for (int u = 0; u < HK_STREAM_UNROLL; ++u) {
        const int v = v0 + u * HK_ROW_THREADS;
        p[u] = v < live ? hk_load(src + v, keep) : hk_zero_pack();
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
    ss = hk_row_sum(ss, hk_buf);
    const float r = hk_rstd(ss, fcols, eps);
    if (tid == 0 && row < rows) rstd[row] = r;
    // Pass 2: re-read the row (mostly from L2) and the weight, write.
    for (int v0 = tid; v0 < live; v0 += HK_ROW_THREADS * HK_STREAM_UNROLL2) {
      hk_pack p[HK_STREAM_UNROLL2];
#if HK_HAS_WEIGHT
      hk_pack wp[HK_STREAM_UNROLL2];
#endif
#pragma unroll
      for (int u = 0; u < HK_STREAM_UNROLL2; ++u) {
        const int v = v0 + u * HK_ROW_THREADS;
        if (v < live) {
          p[u] = hk_load(src + v, drop);
#if HK_HAS_WEIGHT
          wp[u] = weight[v];
#endif
        }
      }
#pragma unroll
      for (int u = 0; u < HK_STREAM_UNROLL2; ++u) {
        const int v = v0 + u * HK_ROW_THREADS;
        if (v < live) {
#pragma unroll
          for (int j = 0; j < HK_VEC; ++j) {
#if HK_HAS_WEIGHT
            p[u].v[j] = hk_from_float(hk_scale(hk_to_float(p[u].v[j]), r, wp[u].v[j]));
#else
            p[u].v[j] = hk_from_float(hk_scale(hk_to_float(p[u].v[j]), r, 0));
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
