// Reductions over the last dimension of a contiguous [rows, cols] tensor, one
// result per row, in one read of the input:
//   HK_OP 0  sum     out[r] = sum_c in[r, c]                       (the input's dtype)
//   HK_OP 1  mean    out[r] = sum_c in[r, c] * factor              (the input's dtype)
//   HK_OP 2  amax    out[r] = max_c in[r, c], NaN if any is NaN    (the input's dtype)
//   HK_OP 3  argmax  out[r] = first c of the row's maximum, or of its first NaN (int64)
// the semantics of aten::sum.dim_IntList, aten::mean.dim, aten::amax and
// aten::argmax with dim = -1 on CUDA (Note [What ATen's last-dim reductions
// compute]), leading dims folded into rows, keepdim only a view of [rows].
//
// Compiled by NVRTC with the defines below (ReduceFamily::compileOptions). Its
// one include, hk_prelude.cuh (element type, conversions, L2 hints: what the
// family templates share), is expanded in place by ReduceFamily::source().
//   HK_DTYPE   0 = float32, 1 = float16, 2 = bfloat16 (hotkernel::kernels::DType)
//   HK_OP      0 = sum, 1 = mean, 2 = amax, 3 = argmax (hotkernel::kernels::ReduceOp)
//   HK_THREADS threads per CTA, a power of two in [32, 1024]
//   HK_ROWS    rows per CTA: 1, or HK_THREADS / HK_ROWS <= 32 (each row within one warp)
//   HK_VEC     elements per vector access, a power of two, HK_VEC * sizeof(element) <= 16
//   HK_UNROLL  vectors each thread loads before it uses the first: 1, 2, 4 or 8
//
// Entry point (ReduceFamily::kKernelName):
//   extern "C" __global__ void hk_reduce_lastdim(const void* in, void* out, long long rows, long long cols)
// `out` holds `rows` elements of the input's dtype (sum, mean, amax) or `rows`
// int64 (argmax).
//
// Preconditions (checked on the host by ReduceFamily's guards, not here):
//   rows >= 1; 1 <= cols <= 2^30; cols % HK_VEC == 0; in aligned to
//   HK_VEC * sizeof(element); out aligned to its element; out not overlapping in.
//
// Note [What ATen's last-dim reductions compute]
// Read in torch 2.11's headers (ATen/native/SharedReduceOps.h: MeanOps,
// GreaterOrNan, ArgMaxOps) and in pytorch's aten/src/ATen/native:
// ReduceOps.cpp (mean_out, amax_out), cuda/ReduceSumProdKernel.cu,
// cuda/ReduceMomentKernel.cu, cuda/ReduceMaxValuesKernel.cu,
// cuda/ReduceArgMaxKernel.cu. On CUDA:
//  - sum: sum_kernel_cuda -> reduce_dispatch: float16 and bfloat16 inputs
//    accumulate in float32 (sum_functor<T, float>) and the result is rounded
//    once to the input's dtype (out_t = T); float32 accumulates in float32.
//    The order is TensorIterator's reduction tree (vectorized per-thread
//    accumulators, warp shuffles, a block tree, sometimes a grid of CTAs):
//    not this kernel's order, so results differ by rounding (the family's
//    tolerance, Note [Reduction tolerance] in src/ReduceFamily.cpp).
//  - mean: mean_out on CUDA is not sum / cols (that is the CPU path): it runs
//    mean_stub, MeanOps<float, float> with factor = float(num_output_elements)
//    / numel, i.e. fl(float(rows) / float(rows * cols)), and project(acc) =
//    acc * factor, rounded once to the input's dtype. This kernel computes the
//    same factor from rows and cols and multiplies the same way (mathematically
//    sum / cols; the factor's rounding is ATen's).
//  - amax: max_values_stub, MaxNanFunctor: (isnan(a) || a > b) ? a : b from
//    -inf, in the input's type (exact: a maximum needs no accumulation): any
//    NaN in the row gives NaN, a row of -inf gives -inf. Which zero comes out
//    of a row whose maximum is 0 (+0 or -0) depends on the order in ATen;
//    this kernel returns +0 when both meet (equal values either way).
//  - argmax: ArgMaxOps with GreaterOrNan, in float for float16 / bfloat16
//    (exact conversions) and float32 for float32, int64 output: a NaN beats
//    any number, two NaNs or two equal values keep the lower index (so +0 and
//    -0 tie), otherwise the larger value wins. That comparison is a total
//    order of (value, index) pairs, so the result does not depend on the
//    reduction order: the index of the first NaN if the row holds one, else
//    the first index of the maximum (0 for a row of -inf). dim = None
//    (flattening) is a different reduction; the override refuses it.
//  - empty inputs (cols == 0 or rows == 0) never reach a kernel: the guards
//    refuse them (ATen: sum 0, mean NaN, amax and argmax raise).
//
// Note [Deterministic reductions without atomics]
// Each thread folds its vectors in index order (vector i * HK_ROW_THREADS +
// tid, elements of a vector in order); then an xor butterfly within each warp,
// and the same butterfly across the warps' partials through shared memory.
// The combining functions are commutative bit for bit (sum: IEEE addition;
// amax: max with NaN first and +0 for equal zeros; argmax: a total order), so
// every lane of the butterfly ends with the same bits and the result depends
// only on (cols, HK_THREADS, HK_ROWS, HK_VEC): bitwise reproducible,
// independent of the grid and of the number of rows. No atomics.

#if !defined(HK_DTYPE) || !defined(HK_OP) || !defined(HK_THREADS) || !defined(HK_ROWS) || !defined(HK_VEC) || \
    !defined(HK_UNROLL)
#error "reduce_lastdim.cu needs HK_DTYPE, HK_OP, HK_THREADS, HK_ROWS, HK_VEC and HK_UNROLL"
#endif

#define HK_ROW_THREADS (HK_THREADS / HK_ROWS)
#define HK_ROW_WARPS (HK_ROW_THREADS / 32)  // warps per row when a row spans warps (HK_ROWS == 1)
#define HK_OP_SUM 0
#define HK_OP_MEAN 1
#define HK_OP_AMAX 2
#define HK_OP_ARGMAX 3

static_assert(HK_OP >= 0 && HK_OP <= 3, "HK_OP must be 0 (sum), 1 (mean), 2 (amax) or 3 (argmax)");
static_assert(HK_THREADS >= 32 && HK_THREADS <= 1024 && (HK_THREADS & (HK_THREADS - 1)) == 0,
              "HK_THREADS must be a power of two in [32, 1024]");
static_assert(HK_ROWS >= 1 && (HK_ROWS & (HK_ROWS - 1)) == 0 && HK_ROWS <= HK_THREADS &&
                  (HK_ROWS == 1 || HK_ROW_THREADS <= 32),
              "HK_ROWS must be 1 or leave each row at most one warp");
static_assert(HK_UNROLL == 1 || HK_UNROLL == 2 || HK_UNROLL == 4 || HK_UNROLL == 8, "HK_UNROLL must be 1, 2, 4 or 8");

// The input is read once: 16-byte loads tell L2 to drop it first
// (hk_load with evict_first: Note [Streaming L2 hints] in hk_prelude.cuh), so
// that it does not push out what the model keeps there.
#define HK_STREAM_HINTS (HK_VEC * (HK_DTYPE == 0 ? 4 : 2) == 16)

#include "hk_prelude.cuh"

// ---- the accumulator of each op -------------------------------------------
// hk_acc: a thread's (and then a row's) partial result; hk_init: the identity;
// hk_fold(acc, x, index): one element; hk_merge(a, b): two partials,
// commutative bit for bit (Note [Deterministic reductions without atomics]).

#if HK_OP == HK_OP_ARGMAX
struct hk_acc {
  float value;
  long long index;
};
// The identity: below every element, including -inf at any index (the
// larger index loses the tie).
__device__ __forceinline__ hk_acc hk_init() {
  hk_acc a;
  a.value = __int_as_float(0xff800000);  // -inf
  a.index = 0x7fffffffffffffffLL;
  return a;
}
// ATen's GreaterOrNan: whether (a, ia) is ahead of (b, ib).
__device__ __forceinline__ bool hk_ahead(float a, long long ia, float b, long long ib) {
  if (a != a) return b != b ? ia < ib : true;
  if (b != b) return false;
  return a == b ? ia < ib : a > b;
}
__device__ __forceinline__ hk_acc hk_merge(hk_acc a, hk_acc b) {
  return hk_ahead(a.value, a.index, b.value, b.index) ? a : b;
}
__device__ __forceinline__ void hk_fold(hk_acc& acc, float x, long long index) {
  // Elements arrive in index order within a thread: only a strictly larger
  // value (or the first NaN) replaces the current one.
  if (hk_ahead(x, index, acc.value, acc.index)) {
    acc.value = x;
    acc.index = index;
  }
}
__device__ __forceinline__ hk_acc hk_shfl_xor(hk_acc a, int offset) {
  hk_acc b;
  b.value = __shfl_xor_sync(0xffffffffu, a.value, offset);
  b.index = __shfl_xor_sync(0xffffffffu, a.index, offset);
  return b;
}
#elif HK_OP == HK_OP_AMAX
typedef float hk_acc;
__device__ __forceinline__ hk_acc hk_init() { return __int_as_float(0xff800000); }  // -inf
// max with NaN first; equal values (only +0 and -0 differ in bits) give the
// AND of their bits: +0 for a +0 / -0 pair, whichever side it comes from.
__device__ __forceinline__ hk_acc hk_merge(hk_acc a, hk_acc b) {
  if (a != a) return a;
  if (b != b) return b;
  if (a > b) return a;
  if (b > a) return b;
  return __int_as_float(__float_as_int(a) & __float_as_int(b));
}
__device__ __forceinline__ void hk_fold(hk_acc& acc, float x, long long) { acc = hk_merge(acc, x); }
__device__ __forceinline__ hk_acc hk_shfl_xor(hk_acc a, int offset) { return __shfl_xor_sync(0xffffffffu, a, offset); }
#else
typedef float hk_acc;
__device__ __forceinline__ hk_acc hk_init() { return 0.0f; }
__device__ __forceinline__ hk_acc hk_merge(hk_acc a, hk_acc b) { return a + b; }
__device__ __forceinline__ void hk_fold(hk_acc& acc, float x, long long) { acc += x; }
__device__ __forceinline__ hk_acc hk_shfl_xor(hk_acc a, int offset) { return __shfl_xor_sync(0xffffffffu, a, offset); }
#endif

__device__ __forceinline__ hk_acc hk_warp_merge(hk_acc v, int width) {
#pragma unroll
  for (int o = width / 2; o > 0; o >>= 1) v = hk_merge(v, hk_shfl_xor(v, o));
  return v;
}

// Row-wide merge; every thread of the row gets the same bits. When a row
// spans warps, `buf` holds one partial per warp and must not be reused before
// the next __syncthreads(). When rows are within a warp, the butterfly of
// width HK_ROW_THREADS stays inside each row's aligned group of lanes.
__device__ __forceinline__ hk_acc hk_row_merge(hk_acc v, hk_acc* buf) {
#if HK_ROW_THREADS <= 32
  return hk_warp_merge(v, HK_ROW_THREADS);
#else
  v = hk_warp_merge(v, 32);
  if ((threadIdx.x & 31) == 0) buf[threadIdx.x >> 5] = v;
  __syncthreads();
  return hk_warp_merge(buf[threadIdx.x & (HK_ROW_WARPS - 1)], HK_ROW_WARPS);
#endif
}

extern "C" __global__ void __launch_bounds__(HK_THREADS)
    hk_reduce_lastdim(const void* in_, void* out_, long long rows, long long cols) {
  __shared__ hk_acc hk_buf[HK_THREADS / 32];
  const hk_elem* in = static_cast<const hk_elem*>(in_);
  const int nvec = static_cast<int>(cols / HK_VEC);    // exact: cols % HK_VEC == 0 (guard)
  const int tid = threadIdx.x & (HK_ROW_THREADS - 1);  // this thread's place in its row
  const int sub = threadIdx.x / HK_ROW_THREADS;         // its row within the CTA's rows
  const unsigned long long drop = hk_policy_evict_first();
  (void)drop;
  (void)hk_buf;

  // Every thread runs every iteration (barriers and shuffles need the whole
  // CTA / warp); a thread whose row is past the end only skips its accesses.
  for (long long first = static_cast<long long>(blockIdx.x) * HK_ROWS; first < rows;
       first += static_cast<long long>(gridDim.x) * HK_ROWS) {
    const long long row = first + sub;
    const int live = row < rows ? nvec : 0;  // vectors this thread may touch
    const hk_pack* src = reinterpret_cast<const hk_pack*>(in + (row < rows ? row : first) * cols);

    hk_acc acc = hk_init();
    for (int v0 = tid; v0 < live; v0 += HK_ROW_THREADS * HK_UNROLL) {
      hk_pack p[HK_UNROLL];
#pragma unroll
      for (int u = 0; u < HK_UNROLL; ++u) {
        const int v = v0 + u * HK_ROW_THREADS;
        if (v < live) p[u] = hk_load(src + v, drop);
      }
#pragma unroll
      for (int u = 0; u < HK_UNROLL; ++u) {
        const int v = v0 + u * HK_ROW_THREADS;
        if (v < live) {
#if HK_OP == HK_OP_SUM || HK_OP == HK_OP_MEAN
          // A vector's elements summed first, then added to the thread's
          // sum: shorter chains than one running sum (vec + cols / (rowThreads vec)).
          float part = hk_to_float(p[u].v[0]);
#pragma unroll
          for (int j = 1; j < HK_VEC; ++j) part += hk_to_float(p[u].v[j]);
          hk_fold(acc, part, 0);
#else
#pragma unroll
          for (int j = 0; j < HK_VEC; ++j) {
            hk_fold(acc, hk_to_float(p[u].v[j]), static_cast<long long>(v) * HK_VEC + j);
          }
#endif
        }
      }
    }
    acc = hk_row_merge(acc, hk_buf);
    if (tid == 0 && row < rows) {
#if HK_OP == HK_OP_ARGMAX
      static_cast<long long*>(out_)[row] = acc.index;
#elif HK_OP == HK_OP_MEAN
      // ATen's factor (Note [What ATen's last-dim reductions compute]).
      const float factor = __fdiv_rn(static_cast<float>(rows), static_cast<float>(rows * cols));
      static_cast<hk_elem*>(out_)[row] = hk_from_float(acc * factor);
#else
      static_cast<hk_elem*>(out_)[row] = hk_from_float(acc);
#endif
    }
#if HK_ROW_THREADS > 32
    // The next rows write hk_buf again: wait until every warp has read it.
    if (first + static_cast<long long>(gridDim.x) * HK_ROWS < rows) __syncthreads();
#endif
  }
}
