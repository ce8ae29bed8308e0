// Reductions over the last dimension of a contiguous [rows, cols] tensor, one
// result per row, in one read of the input:
//   HK_OP 0  sum     out[r] = sum_c in[r, c]                       (the input's dtype)
//   HK_OP 1  mean    out[r] = sum_c in[r, c] * factor              (the input's dtype)
//   HK_OP 2  amax    out[r] = max_c in[r, c], NaN if any is NaN    (the input's dtype)
//   HK_OP 3  argmax  out[r] = first c of the row's maximum, or of its first NaN (int64)
//   HK_OP 4  amin    out[r] = min_c in[r, c], NaN if any is NaN    (the input's dtype)
//   HK_OP 5  argmin  out[r] = first c of the row's minimum, or of its first NaN (int64)
//   HK_OP 6  max     indices[r] = argmax's index (int64), out[r] = in[r, indices[r]] (the input's dtype)
//   HK_OP 7  min     indices[r] = argmin's index (int64), out[r] = in[r, indices[r]] (the input's dtype)
// the semantics of aten::sum.dim_IntList, aten::mean.dim, aten::amax,
// aten::argmax, aten::amin, aten::argmin, aten::max.dim and aten::min.dim
// with dim = -1 on CUDA (Note [What ATen's last-dim reductions compute]; the
// pairs: Note [Value and index pairs] in src/ReduceFamily.cpp), leading dims
// folded into rows, keepdim only a view of [rows].
//
// Compiled by NVRTC with the defines below (ReduceFamily::compileOptions), for
// sm_80 or later (the extrema: max.NaN / min.NaN; bfloat16: cvt.rn.bf16.f32; the tests
// compile every point for sm_80 and sm_90a). Its one include, hk_prelude.cuh
// (element type, conversions, L2 hints: what the family templates share), is
// expanded in place by ReduceFamily::source().
//   HK_DTYPE   0 = float32, 1 = float16, 2 = bfloat16 (hotkernel::kernels::DType)
//   HK_OP      0 = sum, 1 = mean, 2 = amax, 3 = argmax, 4 = amin, 5 = argmin, 6 = max, 7 = min
//              (hotkernel::kernels::ReduceOp)
//   HK_THREADS threads per CTA, a power of two in [32, 1024]
//   HK_ROWS    rows per CTA: 1, or HK_THREADS / HK_ROWS <= 32 (each row within one warp)
//   HK_VEC     elements per vector access, a power of two, HK_VEC * sizeof(element) <= 16
//   HK_UNROLL  vectors each thread loads before it uses the first: 1, 2, 4 or 8
//
// Entry point (ReduceFamily::kKernelName):
//   extern "C" __global__ void hk_reduce_lastdim(const void* in, void* out, long long rows, long long cols)
// `out` holds `rows` elements of the input's dtype (sum, mean, amax, amin) or
// `rows` int64 (argmax, argmin). max and min take their int64 indices after
// the values:
//   extern "C" __global__ void hk_reduce_lastdim(const void* in, void* out, void* indices,
//                                                long long rows, long long cols)
//
// Preconditions (checked on the host by ReduceFamily's guards, not here):
//   rows >= 1; 1 <= cols <= 2^30; cols % HK_VEC == 0; in aligned to
//   HK_VEC * sizeof(element); out aligned to its element (indices to 8 bytes);
//   out and indices not overlapping in or each other.
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
//    this kernel returns +0 if any of the row's zeros is +0, -0 if all are
//    (IEEE 754-2019 maximum, +0 > -0, in any order: equal values either way).
//    Its NaN is the canonical one (Note [Packed maxima]); ATen returns the
//    NaN it met (float32 keeps its bits; float16 / bfloat16 results are NaN
//    either way, the harness compares NaN positions).
//  - argmax: ArgMaxOps with GreaterOrNan, in float for float16 / bfloat16
//    (exact conversions) and float32 for float32, int64 output: a NaN beats
//    any number, two NaNs or two equal values keep the lower index (so +0 and
//    -0 tie), otherwise the larger value wins. That comparison is a total
//    order of (value, index) pairs, so the result does not depend on the
//    reduction order: the index of the first NaN if the row holds one, else
//    the first index of the maximum (0 for a row of -inf). dim = None
//    (flattening) is a different reduction; the override refuses it. This
//    kernel finds the same index in two levels (Note [Two-level argmax]),
//    with int32 indices inside (cols <= 2^30) and an int64 result.
//  - amin, argmin: MinNanFunctor and ArgMinOps with LessOrNan, the mirror
//    images: from +inf, NaN first, the smaller value wins, equal values keep
//    the lower index; a zero minimum is -0 if any of the zeros is -0 (IEEE
//    754-2019 minimum), ATen's zero depends on its order. Every statement
//    above about amax and argmax holds with min for max (0 for a row of +inf).
//  - empty inputs (cols == 0 or rows == 0) never reach a kernel: the guards
//    refuse them (ATen: sum 0, mean NaN, the extrema raise).
//
// Note [Deterministic reductions without atomics]
// Each thread folds its vectors in index order (vector i * HK_ROW_THREADS +
// tid, elements of a vector in order); then an xor butterfly within each warp,
// and the same butterfly across the warps' partials through shared memory.
// The combining functions are commutative bit for bit (sum: IEEE addition;
// amax: max with NaN first and +0 for equal zeros, the threads' NaNs being
// canonical; argmax: a total order), so every lane of the butterfly ends with
// the same bits and the result depends only on (cols, HK_THREADS, HK_ROWS,
// HK_VEC): bitwise reproducible, independent of the grid and of the number of
// rows. No atomics. A thread's own fold is deterministic too: amax's packed
// maxima are IEEE maximum, associative and commutative bit for bit (Note
// [Packed maxima]); argmax's two levels give the thread's first index of its
// maximum, one value (Note [Two-level argmax]); sum's order is fixed.

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
#define HK_OP_AMIN 4
#define HK_OP_ARGMIN 5
#define HK_OP_MAX 6
#define HK_OP_MIN 7
// The extremum ops share one code path: a value (amax, amin) or an index
// (argmax, argmin; max and min, which then read the value at it), of the
// maximum or of the minimum.
#define HK_IS_VALUE_EXT (HK_OP == HK_OP_AMAX || HK_OP == HK_OP_AMIN)
#define HK_IS_PAIR (HK_OP == HK_OP_MAX || HK_OP == HK_OP_MIN)
#define HK_IS_ARG (HK_OP == HK_OP_ARGMAX || HK_OP == HK_OP_ARGMIN || HK_IS_PAIR)
#define HK_IS_MIN (HK_OP == HK_OP_AMIN || HK_OP == HK_OP_ARGMIN || HK_OP == HK_OP_MIN)

static_assert(HK_OP >= 0 && HK_OP <= 7,
              "HK_OP must be 0 (sum), 1 (mean), 2 (amax), 3 (argmax), 4 (amin), 5 (argmin), 6 (max) or 7 (min)");
static_assert(HK_THREADS >= 32 && HK_THREADS <= 1024 && (HK_THREADS & (HK_THREADS - 1)) == 0,
              "HK_THREADS must be a power of two in [32, 1024]");
static_assert(HK_ROWS >= 1 && (HK_ROWS & (HK_ROWS - 1)) == 0 && HK_ROWS <= HK_THREADS &&
                  (HK_ROWS == 1 || HK_ROW_THREADS <= 32),
              "HK_ROWS must be 1 or leave each row at most one warp");
static_assert(HK_UNROLL == 1 || HK_UNROLL == 2 || HK_UNROLL == 4 || HK_UNROLL == 8, "HK_UNROLL must be 1, 2, 4 or 8");
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800 && (HK_IS_VALUE_EXT || HK_IS_ARG)
#error "the extrema need sm_80 or later (max.NaN / min.NaN .f32 / f16x2 / bf16x2)"
#endif

// The input is read once: 16-byte loads tell L2 to drop it first
// (hk_load with evict_first: Note [Streaming L2 hints] in hk_prelude.cuh), so
// that it does not push out what the model keeps there.
#define HK_STREAM_HINTS (HK_VEC * (HK_DTYPE == 0 ? 4 : 2) == 16)
// No L1 hints: those are for rows read twice (Note [Streaming L1 hints]).
#define HK_STREAM_L1_HINTS 0

#include "hk_prelude.cuh"

// ---- NaN-propagating maxima on native and packed words ---------------------
// Note [Packed maxima]
// amax and argmax fold a thread's elements with the sm_80 instructions
// max.NaN.f32, max.NaN.f16x2 / max.NaN.bf16x2 (the two 16-bit elements of a
// 32-bit word at once) and max.NaN.f16 / max.NaN.bf16: one instruction an
// element (float32) or two (16-bit types), where a branchy NaN-first merge
// like hk_merge below costs about eight an element: at ~1 G elements such a
// fold, not the memory, was the bound (H200, bf16 [8192, 128256]: ATen's amax
// at ~3580 GB/s and argmax at ~2060 where its sum reads at ~4300; this
// family's per-element folds were no faster). What they compute (PTX ISA 9.1,
// "Floating Point Instructions: max", max_nan: "+0.0 > -0.0 here"; CUDA
// 13.0's cuda_fp16.h / cuda_bf16.h say the same of __hmax_nan / __hmax2_nan,
// which are the 16-bit instructions):
//  - a NaN input gives the canonical NaN (0x7fffffff; 0x7fff for float16 and
//    bfloat16): any NaN wins, its payload is not kept;
//  - otherwise the larger value, +0.0 above -0.0: a zero maximum is +0 if
//    any of the zeros is +0, -0 if all are -0.
// That is IEEE 754-2019 maximum, associative and commutative bit for bit (its
// NaNs being canonical), so a thread's fold does not depend on its order, and
// on numbers it is hk_merge's rule (the AND of equal values' bits). No .ftz:
// subnormal inputs are compared as they are. The row's result is ATen's value;
// its NaN's bits and which zero a zero maximum is may differ (Note [What
// ATen's last-dim reductions compute]). The 16-bit elements are converted to
// float once a thread (amax) or once a vector (argmax), not once an element.
// amin and argmin use the min forms of the same instructions (IEEE 754-2019
// minimum: -0.0 below +0.0) from +inf; "the extremum" below is the maximum
// or the minimum as HK_IS_MIN says.
#if HK_IS_MIN
#define HK_EXT_NAN "min.NaN"
#else
#define HK_EXT_NAN "max.NaN"
#endif
__device__ __forceinline__ float hk_ext_nan(float a, float b) {
  float d;
  asm(HK_EXT_NAN ".f32 %0, %1, %2;" : "=f"(d) : "f"(a), "f"(b));
  return d;
}
// Where an extremum fold starts: -inf (maximum), +inf (minimum).
__device__ __forceinline__ float hk_ext_start() {
#if HK_IS_MIN
  return __int_as_float(0x7f800000);
#else
  return hk_neg_inf();
#endif
}

// hk_unit: what one extremum instruction folds: a float (float32), two 16-bit
// elements in a 32-bit word (16-bit types, HK_VEC >= 2), or one 16-bit
// element (HK_VEC == 1). HK_UNITS units make one vector.
#if HK_DTYPE == 0
typedef float hk_unit;
#define HK_UNITS HK_VEC
#define HK_UNIT_ELEMS 1
__device__ __forceinline__ hk_unit hk_unit_ext(hk_unit a, hk_unit b) { return hk_ext_nan(a, b); }
__device__ __forceinline__ hk_unit hk_unit_start() { return hk_ext_start(); }
__device__ __forceinline__ hk_unit hk_unit_at(const hk_pack& p, int k) { return p.v[k]; }
__device__ __forceinline__ float hk_unit_elem(hk_unit u, int) { return u; }
__device__ __forceinline__ float hk_unit_float_ext(hk_unit u) { return u; }
#else
// -inf / +inf of float16 and bfloat16: the extremum fold's start.
#if HK_DTYPE == 1
#define HK_EXT_NAN_16 HK_EXT_NAN ".f16"
#define HK_START_16 (HK_IS_MIN ? 0x7c00u : 0xfc00u)
#else
#define HK_EXT_NAN_16 HK_EXT_NAN ".bf16"
#define HK_START_16 (HK_IS_MIN ? 0x7f80u : 0xff80u)
#endif
__device__ __forceinline__ unsigned short hk_ext_nan16(unsigned short a, unsigned short b) {
  unsigned short d;
  asm(HK_EXT_NAN_16 " %0, %1, %2;" : "=h"(d) : "h"(a), "h"(b));
  return d;
}
#if HK_VEC == 1
typedef unsigned short hk_unit;
#define HK_UNITS 1
#define HK_UNIT_ELEMS 1
__device__ __forceinline__ hk_unit hk_unit_ext(hk_unit a, hk_unit b) { return hk_ext_nan16(a, b); }
__device__ __forceinline__ hk_unit hk_unit_start() { return static_cast<hk_unit>(HK_START_16); }
__device__ __forceinline__ hk_unit hk_unit_at(const hk_pack& p, int) { return p.v[0]; }
__device__ __forceinline__ float hk_unit_elem(hk_unit u, int) { return hk_to_float(u); }
__device__ __forceinline__ float hk_unit_float_ext(hk_unit u) { return hk_to_float(u); }
#else
typedef unsigned int hk_unit;
#define HK_UNITS (HK_VEC / 2)
#define HK_UNIT_ELEMS 2
__device__ __forceinline__ hk_unit hk_unit_ext(hk_unit a, hk_unit b) {
  hk_unit d;
  asm(HK_EXT_NAN_16 "x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
  return d;
}
__device__ __forceinline__ hk_unit hk_unit_start() { return HK_START_16 | (HK_START_16 << 16); }
// Element 2k of a vector is the low half of word k (little-endian).
__device__ __forceinline__ hk_unit hk_unit_at(const hk_pack& p, int k) {
  return reinterpret_cast<const unsigned int*>(p.v)[k];
}
__device__ __forceinline__ float hk_unit_elem(hk_unit u, int half) {
  return hk_to_float(static_cast<hk_elem>(half ? u >> 16 : u & 0xffffu));
}
__device__ __forceinline__ float hk_unit_float_ext(hk_unit u) {
  return hk_to_float(hk_ext_nan16(static_cast<unsigned short>(u & 0xffffu), static_cast<unsigned short>(u >> 16)));
}
#endif
#endif

// The extremum of HK_UNITS units as one unit, by a tree (independent steps);
// `m` is overwritten.
__device__ __forceinline__ hk_unit hk_units_ext(hk_unit (&m)[HK_UNITS]) {
#pragma unroll
  for (int w = HK_UNITS / 2; w > 0; w >>= 1) {
#pragma unroll
    for (int k = 0; k < w; ++k) m[k] = hk_unit_ext(m[k], m[k + w]);
  }
  return m[0];
}

// The extremum of a vector's elements as one unit.
__device__ __forceinline__ hk_unit hk_vector_ext(const hk_pack& p) {
  hk_unit m[HK_UNITS];
#pragma unroll
  for (int k = 0; k < HK_UNITS; ++k) m[k] = hk_unit_at(p, k);
  return hk_units_ext(m);
}

// ---- the accumulator of each op -------------------------------------------
// hk_acc: a thread's (and then a row's) partial result; hk_merge(a, b): two
// partials, commutative bit for bit (Note [Deterministic reductions without
// atomics]). hk_part: a thread's state while it reads its vectors:
// hk_part_init(part, tid), hk_part_add(part, vector, v) for each of its
// vectors in index order (v: the vector's index in the row), then
// hk_part_result(part, tid, live): its hk_acc.

#if HK_IS_ARG
struct hk_acc {
  float value;
  int index;  // < 2^30 (cols <= 2^30, guard); 0x7fffffff: no element
};
// ATen's GreaterOrNan (argmax) / LessOrNan (argmin): whether (a, ia) is ahead of (b, ib).
__device__ __forceinline__ bool hk_ahead(float a, int ia, float b, int ib) {
  if (a != a) return b != b ? ia < ib : true;
  if (b != b) return false;
#if HK_IS_MIN
  return a == b ? ia < ib : a < b;
#else
  return a == b ? ia < ib : a > b;
#endif
}
__device__ __forceinline__ hk_acc hk_merge(hk_acc a, hk_acc b) {
  return hk_ahead(a.value, a.index, b.value, b.index) ? a : b;
}
__device__ __forceinline__ hk_acc hk_shfl_xor(hk_acc a, int offset) {
  hk_acc b;
  b.value = __shfl_xor_sync(0xffffffffu, a.value, offset);
  b.index = __shfl_xor_sync(0xffffffffu, a.index, offset);
  return b;
}

// Note [Two-level argmax]
// Per element, the (value, int64 index) fold of GreaterOrNan is a chain of NaN
// tests, a 64-bit compare and selects: 877 instructions in the main loop for
// 4 vectors of 8 bf16 (nvdisasm, sm_90a, 1024 threads). Instead a thread
// folds whole vectors (63 instructions there, about 2 an element):
//  1. the vector's maximum m by a tree of NaN maxima (Note [Packed maxima]:
//     HK_VEC / 2 packed ones for 16-bit types, HK_VEC - 1 for float32), as a
//     float;
//  2. m replaces the thread's best only if it is strictly larger, or the first
//     NaN while best is not NaN: `!(m <= best) && best == best`. The vector's
//     index (an int) and the vector itself (HK_UNITS registers, selected
//     along) are kept with it.
// A thread's vectors arrive in index order, so the kept vector is the first
// that holds the thread's maximum (or its first NaN). At the end the thread
// looks for the first element of the kept vector equal to best (the first
// NaN when best is NaN; +0 == -0, ties), which is the thread's first index of
// its maximum. The threads' (value, index) pairs then meet in hk_merge's total
// order, so the row gets ATen's index: the first NaN, else the first index of
// the maximum, 0 for a row of -inf (best stays -inf, vector tid = the thread's
// first, whose element 0 is -inf). argmin is the same with min for max,
// "smaller" for "larger" and +inf for -inf. The kept vector stays in registers rather
// than being read again at the end: the input is loaded with evict_first and
// the GPU streams more than its L2 while a CTA reads a long row, so a second
// read of the vector would often go to memory (16-32 bytes a thread, up to
// 1/8 more traffic); HK_UNITS selects a vector cost less.
struct hk_part {
  float best;   // the most extreme vector extremum so far (NaN once a NaN was seen)
  int vec;      // its vector's index in the row
  hk_unit kept[HK_UNITS];  // that vector
};
__device__ __forceinline__ void hk_part_init(hk_part& part, int tid) {
  part.best = hk_ext_start();
  part.vec = tid;  // the thread's first vector: kept as the start until something beats it
#pragma unroll
  for (int k = 0; k < HK_UNITS; ++k) part.kept[k] = hk_unit_start();
}
__device__ __forceinline__ void hk_part_add(hk_part& part, const hk_pack& p, int v) {
  const float m = hk_unit_float_ext(hk_vector_ext(p));
#if HK_IS_MIN
  const bool take = !(m >= part.best) && part.best == part.best;
#else
  const bool take = !(m <= part.best) && part.best == part.best;
#endif
  part.best = take ? m : part.best;
  part.vec = take ? v : part.vec;
#pragma unroll
  for (int k = 0; k < HK_UNITS; ++k) part.kept[k] = take ? hk_unit_at(p, k) : part.kept[k];
}
__device__ __forceinline__ hk_acc hk_part_result(const hk_part& part, int tid, int live) {
  const bool nan = part.best != part.best;
  int j = 0;
#pragma unroll
  for (int e = HK_VEC - 1; e >= 0; --e) {
    const float x = hk_unit_elem(part.kept[e / HK_UNIT_ELEMS], e % HK_UNIT_ELEMS);
    if (nan ? x != x : x == part.best) j = e;  // descending: the first match is the last written
  }
  hk_acc a;
  a.value = part.best;
  a.index = tid < live ? part.vec * HK_VEC + j : 0x7fffffff;
  return a;
}
#elif HK_IS_VALUE_EXT
typedef float hk_acc;
// max (min) with NaN first; equal values (only +0 and -0 differ in bits) give
// the AND (OR) of their bits: +0 (-0) for a +0 / -0 pair, whichever side it
// comes from.
__device__ __forceinline__ hk_acc hk_merge(hk_acc a, hk_acc b) {
  if (a != a) return a;
  if (b != b) return b;
#if HK_IS_MIN
  if (a < b) return a;
  if (b < a) return b;
  return __int_as_float(__float_as_int(a) | __float_as_int(b));
#else
  if (a > b) return a;
  if (b > a) return b;
  return __int_as_float(__float_as_int(a) & __float_as_int(b));
#endif
}
__device__ __forceinline__ hk_acc hk_shfl_xor(hk_acc a, int offset) { return __shfl_xor_sync(0xffffffffu, a, offset); }
// One running extremum per unit position of a vector: one packed max (min) per unit,
// HK_UNITS independent chains (Note [Packed maxima]).
struct hk_part {
  hk_unit m[HK_UNITS];
};
__device__ __forceinline__ void hk_part_init(hk_part& part, int) {
#pragma unroll
  for (int k = 0; k < HK_UNITS; ++k) part.m[k] = hk_unit_start();
}
__device__ __forceinline__ void hk_part_add(hk_part& part, const hk_pack& p, int) {
#pragma unroll
  for (int k = 0; k < HK_UNITS; ++k) part.m[k] = hk_unit_ext(part.m[k], hk_unit_at(p, k));
}
// Canonical NaN or a number (every element went through a NaN max / min, from the start).
__device__ __forceinline__ hk_acc hk_part_result(const hk_part& part, int, int) {
  hk_unit m[HK_UNITS];
#pragma unroll
  for (int k = 0; k < HK_UNITS; ++k) m[k] = part.m[k];
  return hk_unit_float_ext(hk_units_ext(m));
}
#else
typedef float hk_acc;
__device__ __forceinline__ hk_acc hk_merge(hk_acc a, hk_acc b) { return a + b; }
__device__ __forceinline__ hk_acc hk_shfl_xor(hk_acc a, int offset) { return __shfl_xor_sync(0xffffffffu, a, offset); }
struct hk_part {
  float sum;
};
__device__ __forceinline__ void hk_part_init(hk_part& part, int) { part.sum = 0.0f; }
// A vector's elements summed first, then added to the thread's sum: shorter
// chains than one running sum (vec + cols / (rowThreads vec)).
__device__ __forceinline__ void hk_part_add(hk_part& part, const hk_pack& p, int) {
  float s = hk_to_float(p.v[0]);
#pragma unroll
  for (int j = 1; j < HK_VEC; ++j) s += hk_to_float(p.v[j]);
  part.sum += s;
}
__device__ __forceinline__ hk_acc hk_part_result(const hk_part& part, int, int) { return part.sum; }
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

// One batch of HK_UNROLL vectors of a thread (the extrema: Note [Two
// loops]), v0, v0 + HK_ROW_THREADS, ... (src: vector v0): all loaded before
// the first is used, then folded in index order; kGuarded: only those below
// `live` (v0 itself is). amax and amin fold vector v0 again in place of those
// past the end (an extremum is idempotent): with them skipped instead, ptxas (CUDA
// 13.0) squeezed amax at 1024 threads x 64 bytes into 32 registers with 88
// bytes of spills; this straight-line batch takes 36 and none.
template <bool kGuarded>
__device__ __forceinline__ void hk_batch(hk_part& part, const hk_pack* src, int v0, int live,
                                         unsigned long long drop) {
  hk_pack p[HK_UNROLL];
#pragma unroll
  for (int u = 0; u < HK_UNROLL; ++u) {
    const bool in = !kGuarded || u == 0 || v0 + u * HK_ROW_THREADS < live;
#if HK_IS_VALUE_EXT
    p[u] = in ? hk_load(src + u * HK_ROW_THREADS, drop) : p[0];
#else
    if (in) p[u] = hk_load(src + u * HK_ROW_THREADS, drop);
#endif
  }
#pragma unroll
  for (int u = 0; u < HK_UNROLL; ++u) {
#if HK_IS_VALUE_EXT
    hk_part_add(part, p[u], v0 + u * HK_ROW_THREADS);
#else
    if (!kGuarded || u == 0 || v0 + u * HK_ROW_THREADS < live) hk_part_add(part, p[u], v0 + u * HK_ROW_THREADS);
#endif
  }
}

#if HK_IS_PAIR
extern "C" __global__ void __launch_bounds__(HK_THREADS)
    hk_reduce_lastdim(const void* in_, void* out_, void* indices_, long long rows, long long cols) {
#else
extern "C" __global__ void __launch_bounds__(HK_THREADS)
    hk_reduce_lastdim(const void* in_, void* out_, long long rows, long long cols) {
#endif
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
    hk_part part;
    hk_part_init(part, tid);
#if HK_OP == HK_OP_SUM || HK_OP == HK_OP_MEAN
    // Note [Two loops]
    // sum and mean keep the loop they were measured with on the H200 (mean
    // bf16 [4096, 32000] at 94% of copy bandwidth, 512 threads, vec 8,
    // unroll 8): each vector loaded and added under its own test, at an
    // address computed from the row (the compiler sinks that arithmetic into
    // every load: ~12 instructions a vector, hidden behind memory there). The
    // loop below (a pointer advanced per batch, whole batches without tests)
    // cuts amax's and argmax's main loops to 19 and 63 instructions for 4 x 8
    // bf16 elements (nvdisasm, sm_90a, 1024 threads: from 561 and 877 before,
    // with the per-element merges), but for sum ptxas then interleaves the
    // vectors' addition chains: 86-90 registers at 128 bytes in flight
    // instead of 45-64, half the CTAs an SM, and spills under a 64-register
    // cap. Not worth the risk for ops already at memory speed.
    const hk_pack* src = reinterpret_cast<const hk_pack*>(in + (row < rows ? row : first) * cols);
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
        if (v < live) hk_part_add(part, p[u], v);
      }
    }
#else
    // The thread's next vectors, advanced with the loop (Note [Two loops]).
    const hk_pack* src = reinterpret_cast<const hk_pack*>(in + (row < rows ? row : first) * cols) + tid;
    // Whole batches (every vector in the row) without a test a vector, then
    // at most one partial batch. Not unrolled further: HK_UNROLL is the axis
    // of bytes in flight (Note [Reduction register budget] in ReduceFamily.cpp).
    const int whole = live - (HK_UNROLL - 1) * HK_ROW_THREADS;
    int v0 = tid;
#pragma unroll 1
    for (; v0 < whole; v0 += HK_ROW_THREADS * HK_UNROLL, src += HK_ROW_THREADS * HK_UNROLL) {
      hk_batch<false>(part, src, v0, live, drop);
    }
    if (v0 < live) hk_batch<true>(part, src, v0, live, drop);
#endif
    hk_acc acc = hk_part_result(part, tid, live);
    acc = hk_row_merge(acc, hk_buf);
    if (tid == 0 && row < rows) {
#if HK_IS_PAIR
      // The value is the input's element at the index, a bfloat16 NaN as
      // 0x7FFF (Note [Value and index pairs] in src/ReduceFamily.cpp).
      static_cast<long long*>(indices_)[row] = acc.index;
      static_cast<hk_elem*>(out_)[row] = hk_through_float(in[row * cols + acc.index]);
#elif HK_IS_ARG
      static_cast<long long*>(out_)[row] = acc.index;  // int64 (ATen's dtype)
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
