// Reductions over one middle dimension of a contiguous tensor, seen as
// [outer, reduced, inner] (dim d of an N-d tensor: outer = the product of the
// dims before d, reduced = size(d), inner = the product of the dims after it,
// inner >= 2), one result per (outer, inner) position, in one read of the input:
//   HK_OP 0  sum     out[o, i] = sum_r in[o, r, i]                           (the input's dtype)
//   HK_OP 1  mean    out[o, i] = sum_r in[o, r, i] * factor                  (the input's dtype)
//   HK_OP 2  amax    out[o, i] = max_r in[o, r, i], NaN if any is NaN        (the input's dtype)
//   HK_OP 3  argmax  out[o, i] = first r of the maximum, or of the first NaN (int64)
//   HK_OP 4  amin    out[o, i] = min_r in[o, r, i], NaN if any is NaN        (the input's dtype)
//   HK_OP 5  argmin  out[o, i] = first r of the minimum, or of the first NaN (int64)
//   HK_OP 6  max     indices[o, i] = argmax's r (int64), out[o, i] = in[o, indices[o, i], i]
//   HK_OP 7  min     indices[o, i] = argmin's r (int64), out[o, i] = in[o, indices[o, i], i]
// with the semantics of the last-dim family's ops over dim d instead of the
// last (reduce_lastdim.cu, Note [What ATen's last-dim reductions compute]):
// float32 accumulation, ATen's mean factor fl(float(outer * inner) /
// float(outer * reduced * inner)), NaN first, ties to the lowest index; max
// and min's value is the element at the index, bit for bit (Note [Value and
// index pairs] in src/ReduceFamily.cpp).
//
// Compiled by NVRTC with the defines below (ReduceDimFamily::compileOptions),
// for sm_80 or later; hk_prelude.cuh is expanded in place by ReduceDimFamily::source().
//   HK_DTYPE   0 = float32, 1 = float16, 2 = bfloat16 (hotkernel::kernels::DType)
//   HK_OP      0 .. 7 as above (hotkernel::kernels::ReduceOp)
//   HK_TX      threads along inner: 32, 64 or 128
//   HK_TY      threads along the reduced dim: a power of two, HK_TX * HK_TY <= 1024
//   HK_VEC     consecutive inner elements a thread reads at once, a power of two, <= 16 bytes
//   HK_UNROLL  rows a thread loads before it folds them: 1, 2, 4 or 8 (Note [Rows in flight])
//
// Entry point (ReduceDimFamily::kKernelName):
//   extern "C" __global__ void hk_reduce_dim(const void* in, void* out, long long outer,
//                                            long long reduced, long long inner)
// `out` holds outer * inner elements of the input's dtype, or int64 for argmax and argmin.
// max and min take their int64 indices (outer * inner) after the values:
//   extern "C" __global__ void hk_reduce_dim(const void* in, void* out, void* indices, long long outer,
//                                            long long reduced, long long inner)
//
// Preconditions (checked on the host by ReduceDimFamily's guards, not here):
//   outer >= 1; 1 <= reduced < 2^31; inner >= 2 and inner % HK_VEC == 0; in
//   aligned to HK_VEC elements, out to HK_VEC of its elements, indices to 8
//   bytes; out and indices not overlapping in or each other.
//
// Note [Coalesced middle-dim reductions]
// A CTA of HK_TX x HK_TY threads serves one tile of HK_TX * HK_VEC consecutive
// inner positions of one outer index. Thread (tx, ty) reads vector tx of the
// tile in rows r = ty, ty + HK_TY, ...: a warp's loads are 32 consecutive
// vectors of one row, so every access is coalesced and the kept inner
// dimension needs no transpose. Each thread folds its rows in index order;
// the HK_TY partials of a position then meet in shared memory in a fixed
// tree (ty with ty + s, s halving), so the result does not depend on timing.
// The index ops keep (value, index) pairs: a thread sees its rows in
// increasing order and keeps the first of equal values, and the tree's merge
// is the total order of ATen's GreaterOrNan / LessOrNan, so the result is the
// first index of the extremum whatever the layout.
//
// Note [Rows in flight]
// A thread's loads are independent of its fold, but one load a loop trip
// leaves a single 16-byte request in flight per thread, too few to cover the
// memory latency at full bandwidth. A thread therefore loads HK_UNROLL of its
// rows (r, r + HK_TY, ...) into registers before it folds them, in the same
// increasing order, so the result is bit for bit the HK_UNROLL == 1 one (the
// sums add in the same order, the index ops see the same sequence); the rows
// past the last full batch go one at a time.

#if !defined(HK_DTYPE) || !defined(HK_OP) || !defined(HK_TX) || !defined(HK_TY) || !defined(HK_VEC) || \
    !defined(HK_UNROLL)
#error "reduce_dim.cu needs HK_DTYPE, HK_OP, HK_TX, HK_TY, HK_VEC and HK_UNROLL"
#endif

#define HK_OP_SUM 0
#define HK_OP_MEAN 1
#define HK_OP_AMAX 2
#define HK_OP_ARGMAX 3
#define HK_OP_AMIN 4
#define HK_OP_ARGMIN 5
#define HK_OP_MAX 6
#define HK_OP_MIN 7
#define HK_IS_PAIR (HK_OP == HK_OP_MAX || HK_OP == HK_OP_MIN)
#define HK_IS_ARG (HK_OP == HK_OP_ARGMAX || HK_OP == HK_OP_ARGMIN || HK_IS_PAIR)
#define HK_IS_MIN (HK_OP == HK_OP_AMIN || HK_OP == HK_OP_ARGMIN || HK_OP == HK_OP_MIN)
#define HK_IS_SUM (HK_OP == HK_OP_SUM || HK_OP == HK_OP_MEAN)
#define HK_THREADS (HK_TX * HK_TY)
#define HK_TILE (HK_TX * HK_VEC)

static_assert(HK_OP >= 0 && HK_OP <= 7,
              "HK_OP must be 0 (sum), 1 (mean), 2 (amax), 3 (argmax), 4 (amin), 5 (argmin), 6 (max) or 7 (min)");
static_assert(HK_TX == 32 || HK_TX == 64 || HK_TX == 128, "HK_TX must be 32, 64 or 128");
static_assert(HK_TY >= 1 && (HK_TY & (HK_TY - 1)) == 0 && HK_THREADS <= 1024,
              "HK_TY must be a power of two with HK_TX * HK_TY <= 1024");
static_assert(HK_UNROLL == 1 || HK_UNROLL == 2 || HK_UNROLL == 4 || HK_UNROLL == 8, "HK_UNROLL must be 1, 2, 4 or 8");

// The input is read once (Note [Streaming L2 hints] in hk_prelude.cuh): 16-byte
// loads tell L2 to drop it first.
#define HK_STREAM_HINTS (HK_VEC * (HK_DTYPE == 0 ? 4 : 2) == 16)
#define HK_STREAM_L1_HINTS 0

#include "hk_prelude.cuh"

// Where an extremum fold starts: -inf (maximum), +inf (minimum); 0 for sums.
__device__ __forceinline__ float hk_start() {
#if HK_IS_SUM
  return 0.0f;
#elif HK_IS_MIN
  return __int_as_float(0x7f800000);
#else
  return hk_neg_inf();
#endif
}

// Whether (a, ia) is ahead of (b, ib): ATen's GreaterOrNan (the maxima) or
// LessOrNan (the minima); a NaN is ahead of any number, equal values (and two
// NaNs) keep the lower index.
__device__ __forceinline__ bool hk_ahead(float a, int ia, float b, int ib) {
  if (a != a) return b != b ? ia < ib : true;
  if (b != b) return false;
#if HK_IS_MIN
  return a == b ? ia < ib : a < b;
#else
  return a == b ? ia < ib : a > b;
#endif
}

// The value extrema's merge: NaN first (a's before b's), then the extremum;
// equal values (only +0 and -0 differ in bits) give the AND (maximum: +0) or
// OR (minimum: -0) of their bits, whichever side they come from. Selects, not
// branches: it runs once an element in a thread's fold (Note [Folding rows in
// order] has why that matters).
__device__ __forceinline__ float hk_merge_value(float a, float b) {
#if HK_IS_MIN
  const bool beyond = b < a;
  const float tie = __int_as_float(__float_as_int(a) | __float_as_int(b));
#else
  const bool beyond = b > a;
  const float tie = __int_as_float(__float_as_int(a) & __float_as_int(b));
#endif
  const float notNan = (b != b) | beyond ? b : (a == b ? tie : a);  // a is a number here
  return a != a ? a : notNan;
}

// Note [Folding rows in order]
// A thread folds its rows in increasing order, so the row r it folds is past
// every index it holds: of ATen's order only "NaN first, then the extremum,
// equal values keep the lower index" is left to decide, and r is taken
// exactly when the held value is not NaN and x is NaN or strictly beyond it,
// the rule of the last-dim family's vectors (Note [Two-level argmax] in
// reduce_lastdim.cu). Written with `&`, it is two compares and two selects an
// element and no branch; hk_ahead's general order (any two indices) took
// about three times that with a branch per element, which bounded the 16-bit
// index ops (twice the elements a byte of float32) below the memory's speed.
// The start makes the rule exact: the held value starts at -inf (+inf for the
// minima) with the index of the thread's first row, which a first row of -inf
// (+inf) then keeps, as ATen would; a thread without rows holds an index
// >= reduced, behind every real one of an equal value in the tree.

// Folds row r's HK_VEC values into a thread's partials (idx unused by the value ops); r is past every index
// held (Note [Folding rows in order]).
__device__ __forceinline__ void hk_fold(float (&acc)[HK_VEC], int (&idx)[HK_VEC], const float (&x)[HK_VEC], int r) {
#pragma unroll
  for (int j = 0; j < HK_VEC; ++j) {
#if HK_IS_SUM
    acc[j] += x[j];
#elif HK_IS_ARG
#if HK_IS_MIN
    const bool take = (acc[j] == acc[j]) & !(x[j] >= acc[j]);
#else
    const bool take = (acc[j] == acc[j]) & !(x[j] <= acc[j]);
#endif
    acc[j] = take ? x[j] : acc[j];
    idx[j] = take ? r : idx[j];
#else
    acc[j] = hk_merge_value(acc[j], x[j]);
#endif
  }
  (void)idx;
  (void)r;
}

// At least one CTA an SM: ptxas may take up to 65536 / HK_THREADS registers a thread.
#if HK_IS_PAIR
extern "C" __global__ void __launch_bounds__(HK_THREADS, 1)
    hk_reduce_dim(const void* in_, void* out_, void* indices_, long long outer, long long reduced, long long inner) {
#else
extern "C" __global__ void __launch_bounds__(HK_THREADS, 1)
    hk_reduce_dim(const void* in_, void* out_, long long outer, long long reduced, long long inner) {
#endif
  __shared__ float hk_values[HK_TY][HK_TILE];
#if HK_IS_ARG
  __shared__ int hk_indices[HK_TY][HK_TILE];
#endif
  const hk_elem* in = static_cast<const hk_elem*>(in_);
  const int tx = threadIdx.x % HK_TX;
  const int ty = threadIdx.x / HK_TX;
  const long long tiles = (inner + HK_TILE - 1) / HK_TILE;
  const long long vectors = inner / HK_VEC;  // exact (guard)
  const unsigned long long drop = hk_policy_evict_first();
  (void)drop;
#if HK_OP == HK_OP_MEAN
  // ATen's factor (reduce_lastdim.cu, Note [What ATen's last-dim reductions compute]).
  const float factor = __fdiv_rn(static_cast<float>(outer * inner), static_cast<float>(outer * reduced * inner));
#endif

  // Every thread runs every iteration (the barriers need the whole CTA); a
  // thread whose vector is past the inner end only skips its accesses.
  for (long long work = blockIdx.x; work < outer * tiles; work += gridDim.x) {
    const long long o = work / tiles;
    const long long v = (work % tiles) * HK_TX + tx;  // this thread's vector along inner
    const bool live = v < vectors;
    float acc[HK_VEC];
    int idx[HK_VEC];
#pragma unroll
    for (int j = 0; j < HK_VEC; ++j) {
      acc[j] = hk_start();
      idx[j] = ty;  // the thread's first row (Note [Folding rows in order])
    }
    if (live) {
      const hk_pack* src = reinterpret_cast<const hk_pack*>(in + o * reduced * inner) + v;
      long long r = ty;
      // Note [Rows in flight]: whole batches of HK_UNROLL rows, then the rest one at a time.
      for (; r + (HK_UNROLL - 1) * HK_TY < reduced; r += HK_UNROLL * HK_TY) {
        hk_pack batch[HK_UNROLL];
#pragma unroll
        for (int u = 0; u < HK_UNROLL; ++u) batch[u] = hk_load(src + (r + u * HK_TY) * vectors, drop);
#pragma unroll
        for (int u = 0; u < HK_UNROLL; ++u) {
          float x[HK_VEC];
          hk_unpack(batch[u], x);
          hk_fold(acc, idx, x, static_cast<int>(r + u * HK_TY));
        }
      }
      for (; r < reduced; r += HK_TY) {
        float x[HK_VEC];
        hk_unpack(hk_load(src + r * vectors, drop), x);
        hk_fold(acc, idx, x, static_cast<int>(r));
      }
    }
    // The HK_TY partials of each position, in a fixed tree.
#pragma unroll
    for (int j = 0; j < HK_VEC; ++j) {
      hk_values[ty][tx * HK_VEC + j] = acc[j];
#if HK_IS_ARG
      hk_indices[ty][tx * HK_VEC + j] = idx[j];
#endif
    }
    __syncthreads();
#pragma unroll
    for (int s = HK_TY / 2; s > 0; s >>= 1) {
      if (ty < s) {
#pragma unroll
        for (int j = 0; j < HK_VEC; ++j) {
          const int k = tx * HK_VEC + j;
#if HK_IS_SUM
          hk_values[ty][k] += hk_values[ty + s][k];
#elif HK_IS_ARG
          if (hk_ahead(hk_values[ty + s][k], hk_indices[ty + s][k], hk_values[ty][k], hk_indices[ty][k])) {
            hk_values[ty][k] = hk_values[ty + s][k];
            hk_indices[ty][k] = hk_indices[ty + s][k];
          }
#else
          hk_values[ty][k] = hk_merge_value(hk_values[ty][k], hk_values[ty + s][k]);
#endif
        }
      }
      __syncthreads();
    }
    if (ty == 0 && live) {
      const long long at = o * inner + v * HK_VEC;
#if HK_IS_PAIR
      // The value is the input's element at the index, a bfloat16 NaN as
      // 0x7FFF (Note [Value and index pairs] in src/ReduceFamily.cpp).
      hk_pack p;
#pragma unroll
      for (int j = 0; j < HK_VEC; ++j) {
        const int r = hk_indices[0][tx * HK_VEC + j];
        static_cast<long long*>(indices_)[at + j] = r;
        p.v[j] = hk_through_float(in[(o * reduced + r) * inner + v * HK_VEC + j]);
      }
      *reinterpret_cast<hk_pack*>(static_cast<hk_elem*>(out_) + at) = p;
#elif HK_IS_ARG
#pragma unroll
      for (int j = 0; j < HK_VEC; ++j) static_cast<long long*>(out_)[at + j] = hk_indices[0][tx * HK_VEC + j];
#else
      hk_pack p;
#pragma unroll
      for (int j = 0; j < HK_VEC; ++j) {
        const float value = hk_values[0][tx * HK_VEC + j];
#if HK_OP == HK_OP_MEAN
        p.v[j] = hk_from_float(value * factor);
#else
        p.v[j] = hk_from_float(value);
#endif
      }
      *reinterpret_cast<hk_pack*>(static_cast<hk_elem*>(out_) + at) = p;
#endif
    }
    // The next tile writes the shared arrays again: wait until ty == 0 has read them.
    __syncthreads();
  }
}
