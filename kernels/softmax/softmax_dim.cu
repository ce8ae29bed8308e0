// softmax (or log_softmax) over one middle dimension of a contiguous tensor,
// seen as [outer, dim, inner] (dim d of an N-d tensor: outer = the product of
// the dims before d, dim = size(d), inner = the product of the dims after it,
// inner >= 2), for every (outer, inner) position o, i:
//   softmax:     out[o, r, i] = exp(in[o, r, i] - max_r) / sum_r' exp(in[o, r', i] - max_r)
//   log_softmax: out[o, r, i] = (in[o, r, i] - max_r) - log(sum_r' exp(in[o, r', i] - max_r))
// the semantics of aten::_softmax / aten::_log_softmax(x, d, half_to_float=false):
// input and output share one dtype, arithmetic is fp32, special values as
// softmax_lastdim.cu's (Note [Softmax special values match ATen]).
//
// Compiled by NVRTC with the defines below (SoftmaxDimFamily::compileOptions),
// for sm_80 or later; hk_prelude.cuh is expanded in place by SoftmaxDimFamily::source().
//   HK_DTYPE   0 = float32, 1 = float16, 2 = bfloat16 (hotkernel::kernels::DType)
//   HK_TX      threads along inner: 32, 64 or 128
//   HK_TY      threads along the softmax dim: a power of two, HK_TX * HK_TY <= 1024
//   HK_VEC     consecutive inner elements a thread reads at once, a power of two, <= 16 bytes
//   HK_LOG     0: softmax, 1: log_softmax
//   HK_UNROLL  rows a thread loads at once in each pass: 1, 2, 4 or 8 (Note [Rows in flight] in reduce_dim.cu)
//
// Entry point (SoftmaxDimFamily::kKernelName):
//   extern "C" __global__ void hk_softmax_dim(const void* in, void* out, long long outer,
//                                             long long dim, long long inner)
//
// Preconditions (checked on the host by SoftmaxDimFamily's guards, not here):
//   outer >= 1; 1 <= dim < 2^31; inner >= 2 and inner % HK_VEC == 0; in and out
//   aligned to HK_VEC elements; out equal to in or not overlapping it.
//
// Note [Coalesced middle-dim softmax]
// The layout of Note [Coalesced middle-dim reductions] (reduce_dim.cu): a CTA
// of HK_TX x HK_TY threads serves one tile of HK_TX * HK_VEC consecutive inner
// positions of one outer index; thread (tx, ty) reads vector tx of the tile in
// rows r = ty, ty + HK_TY, ..., so a warp's accesses are 32 consecutive
// vectors of one row, coalesced without a transpose. First pass: each thread
// folds its rows, in index order, into one online (max, sum) pair per
// position (hk_pair_push; Note [Online pairs] in hk_prelude.cuh); the HK_TY pairs of a
// position then merge in shared memory in a fixed tree (ty with ty + s, s
// halving), so the result does not depend on timing. Second pass: the same
// threads read their rows again and write exp(x - max) / sum (float32: ATen's
// expf, times 1 / sum) or (x - max) - log(sum). An element is read before the
// thread that reads it writes it, so in == out is correct. Both passes load
// HK_UNROLL of a thread's rows before using them, in index order (Note [Rows
// in flight] in reduce_dim.cu): the same pairs and outputs at every unroll.
//
// Note [Compensated middle-dim sums]
// A thread folds dim / HK_TY rows in sequence (hundreds on a long dim at a
// small HK_TY), where the last-dim kernels' threads fold a few before a tree:
// a plain float32 running sum of that many terms drifts by more than the
// family's bound. The running sum is compensated (Kahan: c carries what the
// last addition lost; a rescale when the maximum rises scales c with s), so a
// thread's sum is within a few roundings of exact whatever its row count; c is
// folded into s once before the tree. No contraction (__fadd_rn / __fsub_rn),
// so the compensation is not optimized away and the bits do not depend on the
// compiler's fma choices.

#if !defined(HK_DTYPE) || !defined(HK_TX) || !defined(HK_TY) || !defined(HK_VEC) || !defined(HK_LOG) || \
    !defined(HK_UNROLL)
#error "softmax_dim.cu needs HK_DTYPE, HK_TX, HK_TY, HK_VEC, HK_LOG and HK_UNROLL"
#endif
#if HK_UNROLL != 1 && HK_UNROLL != 2 && HK_UNROLL != 4 && HK_UNROLL != 8
#error "HK_UNROLL must be 1, 2, 4 or 8"
#endif

#define HK_THREADS (HK_TX * HK_TY)
#define HK_TILE (HK_TX * HK_VEC)

static_assert(HK_TX == 32 || HK_TX == 64 || HK_TX == 128, "HK_TX must be 32, 64 or 128");
static_assert(HK_TY >= 1 && (HK_TY & (HK_TY - 1)) == 0 && HK_THREADS <= 1024,
              "HK_TY must be a power of two with HK_TX * HK_TY <= 1024");
static_assert(HK_LOG == 0 || HK_LOG == 1, "HK_LOG must be 0 or 1");

// Plain accesses: the second pass re-reads what the first read.
#define HK_STREAM_HINTS 0
#define HK_STREAM_L1_HINTS 0

#include "hk_prelude.cuh"

// Folds one element into the running pair (m, s), s compensated by c (Note
// [Compensated middle-dim sums]): one exp unless x raises the maximum.
// exp(x - x) is 1 for a finite x and NaN for +inf (ATen's exp(inf - inf) in
// the sum); -inf elements add exp(-inf - base) = 0 (Note [Online pairs]); a
// NaN fails the comparison and makes s (and c) NaN.
__device__ __forceinline__ void hk_pair_push(float& m, float& s, float& c, float x) {
  float t;
  if (x > m) {
    const float r = hk_exp(m - x);
    s = __fmul_rn(s, r);
    c = __fmul_rn(c, r);
    t = hk_exp(x - x);
    m = x;
  } else {
    t = hk_exp(x - hk_pair_base(m));
  }
  const float y = __fsub_rn(t, c);
  const float u = __fadd_rn(s, y);
  c = __fsub_rn(__fsub_rn(u, s), y);
  s = u;
}

// Pushes one row's vector into a thread's pairs.
__device__ __forceinline__ void hk_push_pack(float (&m)[HK_VEC], float (&s)[HK_VEC], float (&c)[HK_VEC],
                                             const hk_pack& p) {
  float x[HK_VEC];
  hk_unpack(p, x);
#pragma unroll
  for (int j = 0; j < HK_VEC; ++j) hk_pair_push(m[j], s[j], c[j], x[j]);
}

// One row's output vector: exp(x - max) * (1 / sum), or (x - max) - log(sum); k is 1 / sum or log(sum).
__device__ __forceinline__ hk_pack hk_output(const hk_pack& in, const float (&rowMax)[HK_VEC], const float (&k)[HK_VEC]) {
  float x[HK_VEC];
  hk_unpack(in, x);
  hk_pack p;
#pragma unroll
  for (int j = 0; j < HK_VEC; ++j) {
    const float d = x[j] - rowMax[j];
#if HK_LOG
    p.v[j] = hk_from_float(d - k[j]);
#else
    p.v[j] = hk_from_float(hk_exp(d) * k[j]);
#endif
  }
  return p;
}

// At least one CTA an SM: ptxas may take up to 65536 / HK_THREADS registers a thread.
extern "C" __global__ void __launch_bounds__(HK_THREADS, 1)
    hk_softmax_dim(const void* in_, void* out_, long long outer, long long dim, long long inner) {
  __shared__ float hk_max[HK_TY][HK_TILE];
  __shared__ float hk_sum[HK_TY][HK_TILE];
  const hk_pack* in = static_cast<const hk_pack*>(in_);
  hk_pack* out = static_cast<hk_pack*>(out_);
  const int tx = threadIdx.x % HK_TX;
  const int ty = threadIdx.x / HK_TX;
  const long long tiles = (inner + HK_TILE - 1) / HK_TILE;
  const long long vectors = inner / HK_VEC;  // exact (guard)

  // Every thread runs every iteration (the barriers need the whole CTA); a
  // thread whose vector is past the inner end only skips its accesses.
  for (long long work = blockIdx.x; work < outer * tiles; work += gridDim.x) {
    const long long o = work / tiles;
    const long long v = (work % tiles) * HK_TX + tx;  // this thread's vector along inner
    const bool live = v < vectors;
    const long long base = o * dim * vectors + v;  // vector (o, 0, v)
    float m[HK_VEC], s[HK_VEC], c[HK_VEC];
#pragma unroll
    for (int j = 0; j < HK_VEC; ++j) {
      m[j] = hk_neg_inf();
      s[j] = 0.0f;
      c[j] = 0.0f;
    }
    if (live) {
      long long r = ty;
      for (; r + (HK_UNROLL - 1) * HK_TY < dim; r += HK_UNROLL * HK_TY) {
        hk_pack batch[HK_UNROLL];
#pragma unroll
        for (int u = 0; u < HK_UNROLL; ++u) batch[u] = in[base + (r + u * HK_TY) * vectors];
#pragma unroll
        for (int u = 0; u < HK_UNROLL; ++u) hk_push_pack(m, s, c, batch[u]);
      }
      for (; r < dim; r += HK_TY) hk_push_pack(m, s, c, in[base + r * vectors]);
    }
#pragma unroll
    for (int j = 0; j < HK_VEC; ++j) {
      hk_max[ty][tx * HK_VEC + j] = m[j];
      hk_sum[ty][tx * HK_VEC + j] = __fsub_rn(s[j], c[j]);  // the compensation folded in once
    }
    __syncthreads();
#pragma unroll
    for (int h = HK_TY / 2; h > 0; h >>= 1) {
      if (ty < h) {
#pragma unroll
        for (int j = 0; j < HK_VEC; ++j) {
          const int k = tx * HK_VEC + j;
          float pm = hk_max[ty][k], ps = hk_sum[ty][k];
          hk_pair_merge(pm, ps, hk_max[ty + h][k], hk_sum[ty + h][k]);
          hk_max[ty][k] = pm;
          hk_sum[ty][k] = ps;
        }
      }
      __syncthreads();
    }
    float rowMax[HK_VEC], k[HK_VEC];
#pragma unroll
    for (int j = 0; j < HK_VEC; ++j) {
      rowMax[j] = hk_max[0][tx * HK_VEC + j];
#if HK_LOG
      k[j] = logf(hk_sum[0][tx * HK_VEC + j]);
#else
      k[j] = __frcp_rn(hk_sum[0][tx * HK_VEC + j]);
#endif
    }
    // The next tile writes the shared arrays again: wait until every thread has read them.
    __syncthreads();
    if (live) {
      long long r = ty;
      for (; r + (HK_UNROLL - 1) * HK_TY < dim; r += HK_UNROLL * HK_TY) {
        hk_pack batch[HK_UNROLL];
#pragma unroll
        for (int u = 0; u < HK_UNROLL; ++u) batch[u] = in[base + (r + u * HK_TY) * vectors];
#pragma unroll
        for (int u = 0; u < HK_UNROLL; ++u) out[base + (r + u * HK_TY) * vectors] = hk_output(batch[u], rowMax, k);
      }
      for (; r < dim; r += HK_TY) out[base + r * vectors] = hk_output(in[base + r * vectors], rowMax, k);
    }
  }
}
