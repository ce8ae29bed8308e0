#include "hotkernel/kernels/ReduceFamily.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "FamilyMath.h"
#include "hotkernel/kernels/KernelSource.h"
#include "hotkernel/runtime/Check.h"

// Note [What the reduction overrides refuse]
// The overrides serve exactly what the template computes and send anything
// else to ATen's CUDA kernel, which stays the reference for every case:
//  - dtypes other than float32, float16, bfloat16 (integers, bool, double,
//    complex); sum / mean with a dtype= argument (accumulation and output in
//    another type), even one equal to the input's (kept simple: rare);
//  - dims other than the last k: the dim list must name the last k dims,
//    k >= 1, each once, in any order and spelling ([-1], [ndim - 1],
//    [-1, -2] for the last two: a contiguous input folds them into one row);
//    or, for the middle-dim layout (ReduceDimFamily::guardCall), exactly one
//    dim that is not the last, with at least 2 elements after it (a dim
//    followed only by dims of size 1 runs ATen);
//    sum / mean / amax / amin with None or [] ("every dim", a reduction to
//    one value); argmax / argmin with dim=None (a flattened index) — they
//    take one dim, as max.dim / min.dim do;
//  - max / min overloads other than .dim: the out= form (max.dim_max), named
//    dims (max.names_dim), the full reduction max(x) and the binary
//    max(x, y) have no trampoline (only "max.dim" / "min.dim" is registered);
//  - 0-dim inputs and empty ones (ATen: sum 0, mean NaN, the extrema raise);
//  - inputs that are not contiguous (torch's rule: strides of size-1 dims
//    do not matter);
//  - shapes guardVariant refuses (rows past int64 bytes, cols > 2^30).
// keepdim is served both ways (a view of the same [rows] result).

namespace hotkernel::kernels {
namespace {

using detail::ceilDiv;
using detail::contains;
using detail::contiguous;
using detail::isPowerOfTwo;
using detail::knownDType;
using detail::maxVec;
using detail::widestVec;

// The axes (kernels/README.md): one CTA a row, or several short rows a CTA.
constexpr int kThreadChoices[] = {32, 64, 128, 256, 512, 1024};
constexpr int kUnrollChoices[] = {1, 2, 4, 8};
constexpr int kMultiRowThreads = 128;
constexpr int kRowThreadChoices[] = {4, 8, 16, 32};
// Below this many rows, a CTA of one warp per row already fills the GPU as
// well as several rows per CTA would.
constexpr int64_t kMultiRowMinRows = 256;
constexpr size_t kMaxSpaceSize = 12;


bool knownOp(ReduceOp op) {
  for (ReduceOp o : kAllReduceOps) {
    if (o == op) return true;
  }
  return false;
}

// Note [Reduction register budget]
// A thread keeps unroll vectors in flight: at most min(128, 65536 / threads)
// bytes, i.e. 32 registers of data under the 64 that __launch_bounds__(1024)
// leaves at 1024 threads, 128 bytes (8 x 16-byte vectors) from 512 threads
// down. At 1024 x 128 bytes the per-element argmax (int64 (value, index)
// pairs) spilled a few bytes; its two-level fold (Note [Two-level argmax] in
// the template) fits there (56 registers, CUDA 13.0, sm_90a) and sum / mean
// take 62-64, none with a register to spare: the point stays out of the space.
// Across the 1024-thread points' widths and unrolls (CUDA 13.0, sm_90a) amax
// takes 16-36 registers, argmax 20-47, sum and mean 20-61: above 32, one
// 1024-thread CTA an SM.
int maxBytesInFlight(int threads) { return std::min(128, 65536 / std::max(threads, 1)); }

bool isPoint(DType dtype, const ReduceParams& p) {
  if (!knownDType(dtype) || !isPowerOfTwo(p.vec) || p.vec > maxVec(dtype)) return false;
  if (!contains(std::begin(kUnrollChoices), std::end(kUnrollChoices), p.unroll)) return false;
  if (p.unroll * p.vec * static_cast<int>(elementSize(dtype)) > maxBytesInFlight(p.threads)) return false;
  if (p.rowsPerCta == 1) return contains(std::begin(kThreadChoices), std::end(kThreadChoices), p.threads);
  return p.threads == kMultiRowThreads && p.rowsPerCta > 1 && p.threads % p.rowsPerCta == 0 &&
         contains(std::begin(kRowThreadChoices), std::end(kRowThreadChoices), p.rowThreads());
}

// Note [Reduction tolerance]
// The extrema are exact: a maximum or minimum involves no rounding, and
// argmax's and argmin's comparisons are total orders (the template's Note
// [What ATen's last-dim reductions compute]), so all four must equal ATen's
// (NaN meets NaN; the sign of a zero extremum may differ, the values are equal).
// sum and mean: both kernels accumulate in float32 in different orders. The
// bound for a row is ATen's own distance from the float64 result (measured by
// the caller, which has the input), plus this kernel's: a thread's chain of
// cols / (rowThreads vec) additions, vec additions within a vector and a tree
// of at most 10 levels, whose rounding errors (each <= 2^-24 of a partial sum
// <= sum |x|) add like a random walk in practice: 2^-24 (16 + 2 sqrt(cols))
// sum |x| (the rigorous worst case, chain length x 2^-24, is far looser and
// would hide a dropped element of a short row). Then the rounding of the
// result to the output dtype: at most one step apart from ATen's when the
// float32 values straddle a rounding boundary, one ulp <= 2^-10 (float16),
// 2^-7 (bfloat16) of the value, and 2^-22 for float32 (the result's and
// mean's product roundings); float16 adds its subnormal step 2^-24. mean:
// the same with sum |x| / cols. Derived, not yet measured on a GPU.
double sumChainRel(int64_t cols) {
  return std::ldexp(16.0 + 2.0 * std::sqrt(static_cast<double>(std::max<int64_t>(cols, 1))), -24);
}

// Note [Value and index pairs]
// aten::max.dim and aten::min.dim return (values, indices). On CUDA both run
// one TensorIterator reduction (max_kernel_impl -> max_launch_kernel in
// ReduceMaxValuesKernel.cu, min likewise) with MaxOps / MinOps of
// SharedReduceOps.h: (value, int64 index) pairs in the input's own type
// (scalar_t, not the accumulate type), compared by GreaterOrNan / LessOrNan
// (NaN first, equal values and two NaNs keep the lower index) from
// (lower_bound, 0) / (upper_bound, 0); combine returns one of its operands,
// never a computed value. That order is total, the same as argmax's /
// argmin's, so the index is argmax's / argmin's (the first NaN, else the
// first index of the extremum), and the value is the input's element at that
// index as Reduce.cuh's lanes pass it on: in registers and shared memory by
// its bits, across a warp shuffle (WARP_SHFL_DOWN of DeviceUtils.cuh) by its
// bits for float32 and float16 (c10::Half is shuffled as __half), through
// float for bfloat16 (no specialization: c10::BFloat16 -> float -> the
// BFloat16(float) constructor, cvt.rn.bf16.f32 on sm_80+), which keeps every
// value and the zero's sign and turns a NaN into 0x7FFF. So float32 and
// float16 results are the element bit for bit (the first NaN with its
// payload, the zero of the first tied zero, unlike amax's canonical NaN and
// +0 for a +0 / -0 tie), and a bfloat16 result differs from the element only
// for a NaN: 0x7FFF when the element reached ATen's writing lane through a
// shuffle, its own bits when the writing lane read it itself (which lane
// reads which element follows ATen's launch configuration). The templates find the index as
// argmax / argmin do and read the value at it from the input (one element a
// result) through hk_through_float: the element's bits, a bfloat16 NaN as
// 0x7FFF, ATen's result unless ATen's own lane read a bfloat16 NaN with a
// payload (docs/design/reduce.md, "Value and index pairs").

}  // namespace

const ReduceOpInfo& reduceOpInfo(ReduceOp op) {
  // Note [The reduction ops]: indexed by HK_OP.
  static const ReduceOpInfo kOps[] = {
      {ReduceOp::Sum, "sum", "sum_lastdim", "aten::sum.dim_IntList", false, false, false},
      {ReduceOp::Mean, "mean", "mean_lastdim", "aten::mean.dim", false, false, false},
      {ReduceOp::Amax, "amax", "amax_lastdim", "aten::amax", false, true, false},
      {ReduceOp::Argmax, "argmax", "argmax_lastdim", "aten::argmax", true, true, false},
      {ReduceOp::Amin, "amin", "amin_lastdim", "aten::amin", false, true, false},
      {ReduceOp::Argmin, "argmin", "argmin_lastdim", "aten::argmin", true, true, false},
      {ReduceOp::Max, "max", "max_lastdim", "aten::max.dim", true, true, true},
      {ReduceOp::Min, "min", "min_lastdim", "aten::min.dim", true, true, true},
  };
  static_assert(sizeof(kOps) / sizeof(kOps[0]) == kReduceOpCount, "one row per ReduceOp");
  const auto i = static_cast<size_t>(op);
  HOTKERNEL_CHECK(i < kReduceOpCount, "unknown reduction op ", static_cast<int>(op));
  HOTKERNEL_INTERNAL_ASSERT(kOps[i].op == op, "the reduction op rows are out of HK_OP order");
  return kOps[i];
}

const char* reduceOpName(ReduceOp op) { return reduceOpInfo(op).name; }
const char* reduceFamilyName(ReduceOp op) { return reduceOpInfo(op).family; }
const char* reduceAtenOpName(ReduceOp op) { return reduceOpInfo(op).atenOp; }

std::optional<ReduceOp> reduceOpOfFamily(const std::string& family) {
  for (ReduceOp op : kAllReduceOps) {
    if (family == reduceFamilyName(op)) return op;
  }
  return std::nullopt;
}

std::optional<ReduceOp> reduceOpOfAtenName(const std::string& name) {
  for (ReduceOp op : kAllReduceOps) {
    if (name == reduceAtenOpName(op)) return op;
  }
  return std::nullopt;
}

nlohmann::json ReduceParams::toJson() const {
  return {{"threads", threads}, {"vec", vec}, {"unroll", unroll}, {"rowsPerCta", rowsPerCta}};
}

ReduceParams ReduceParams::fromJson(const nlohmann::json& j) {
  HOTKERNEL_CHECK(j.is_object(), "reduction params must be a JSON object: ", j.dump());
  for (const char* key : {"threads", "vec", "unroll"}) {
    HOTKERNEL_CHECK(j.contains(key) && j.at(key).is_number_integer(), "reduction params need an integer '", key,
                    "': ", j.dump());
  }
  ReduceParams p;
  p.threads = j.at("threads").get<int>();
  p.vec = j.at("vec").get<int>();
  p.unroll = j.at("unroll").get<int>();
  if (j.contains("rowsPerCta")) {
    HOTKERNEL_CHECK(j.at("rowsPerCta").is_number_integer(), "reduction params need an integer 'rowsPerCta': ",
                    j.dump());
    p.rowsPerCta = j.at("rowsPerCta").get<int>();
  }
  return p;
}

std::string ReduceParams::describe() const {
  return "threads=" + std::to_string(threads) + " vec=" + std::to_string(vec) + " unroll=" + std::to_string(unroll) +
         (rowsPerCta != 1 ? " rowsPerCta=" + std::to_string(rowsPerCta) : std::string());
}

double ReduceTolerance::bound(double ref, double absSum, double atenError) const {
  if (exact) return 0.0;
  return atenError + sumRel * absSum + outRel * std::fabs(ref) + outAbs;
}

int64_t ReduceFamily::trailingDims(int64_t ndim, const int64_t* dims, size_t count) {
  if (ndim < 1 || count < 1 || count > static_cast<size_t>(ndim) || count > 64) return 0;
  const auto k = static_cast<int64_t>(count);
  uint64_t seen = 0;  // bit j: dim ndim - 1 - j named
  for (size_t i = 0; i < count; ++i) {
    const int64_t d = dims[i] < 0 ? dims[i] + ndim : dims[i];
    if (d < ndim - k || d >= ndim) return 0;  // out of range, or not among the last k
    const uint64_t bit = uint64_t{1} << (ndim - 1 - d);
    if (seen & bit) return 0;  // named twice (ATen raises)
    seen |= bit;
  }
  return k;
}

bool ReduceFamily::guardCall(const ReduceCall& call, ReduceVariant* variant) {
  if (!knownOp(call.op) || !call.floating || !knownDType(call.dtype)) return false;
  if (call.dtypeGiven) return false;
  const int64_t ndim = static_cast<int64_t>(call.sizes.size());
  if (ndim < 1 || !contiguous(call.sizes, call.strides)) return false;
  if (!call.dims) return false;
  const int64_t k = trailingDims(ndim, call.dims->data(), call.dims->size());
  if (k < 1 || (k > 1 && reduceOpInfo(call.op).index)) return false;
  int64_t rows = 1, cols = 1;
  for (int64_t i = 0; i < ndim; ++i) {
    const int64_t n = call.sizes[static_cast<size_t>(i)];
    if (n < 1) return false;  // empty (or malformed)
    int64_t& product = i < ndim - k ? rows : cols;
    if (product > std::numeric_limits<int64_t>::max() / n) return false;
    product *= n;
  }
  const ReduceVariant v{call.dtype, rows, cols, call.op};
  if (!guardVariant(v)) return false;
  if (variant) *variant = v;
  return true;
}

std::vector<int64_t> ReduceFamily::outputSizes(const ReduceCall& call) {
  const auto ndim = static_cast<int64_t>(call.sizes.size());
  const int64_t k = call.dims ? std::max<int64_t>(trailingDims(ndim, call.dims->data(), call.dims->size()), 1) : 1;
  std::vector<int64_t> out(call.sizes.begin(), call.sizes.end() - std::min(k, ndim));
  if (call.keepdim) out.insert(out.end(), static_cast<size_t>(std::min(k, ndim)), 1);
  return out;
}

bool ReduceFamily::guardVariant(const ReduceVariant& v) {
  if (!knownDType(v.dtype) || !knownOp(v.op) || v.rows < 1 || v.cols < 1 || v.cols > kMaxCols) return false;
  const int64_t maxElements = std::numeric_limits<int64_t>::max() / static_cast<int64_t>(elementSize(v.dtype));
  return v.rows <= maxElements / v.cols;
}

bool ReduceFamily::guardParams(const ReduceVariant& v, const ReduceParams& p) {
  if (!guardVariant(v) || !isPoint(v.dtype, p)) return false;
  return p.vec == 1 || v.cols % p.vec == 0;
}

size_t ReduceFamily::requiredAlignment(DType dtype, const ReduceParams& p) {
  return static_cast<size_t>(std::max(p.vec, 1)) * elementSize(dtype);
}

size_t ReduceFamily::outputElementSize(ReduceOp op, DType dtype) {
  if (!knownOp(op)) return elementSize(dtype);
  const ReduceOpInfo& info = reduceOpInfo(op);
  return info.index && !info.pair ? sizeof(int64_t) : elementSize(dtype);
}

bool ReduceFamily::guardIndices(const void* in, const void* values, const void* indices) {
  return indices != nullptr && indices != in && indices != values &&
         reinterpret_cast<uintptr_t>(indices) % kIndexAlignment == 0;
}

bool ReduceFamily::guardPointers(const void* in, const void* out, const ReduceVariant& v, const ReduceParams& p) {
  if (in == nullptr || out == nullptr || in == out || p.vec < 1) return false;
  const auto aligned = [](const void* ptr, size_t a) { return reinterpret_cast<uintptr_t>(ptr) % a == 0; };
  return aligned(in, requiredAlignment(v.dtype, p)) && aligned(out, outputElementSize(v.op, v.dtype));
}

std::vector<ReduceParams> ReduceFamily::allParameterPoints(DType dtype) {
  std::vector<ReduceParams> out;
  if (!knownDType(dtype)) return out;
  for (int threads : kThreadChoices) {
    for (int vec = 1; vec <= maxVec(dtype); vec *= 2) {
      for (int unroll : kUnrollChoices) {
        const ReduceParams p{threads, vec, unroll, 1};
        if (isPoint(dtype, p)) out.push_back(p);
      }
    }
  }
  for (int rowThreads : kRowThreadChoices) {
    for (int vec = 1; vec <= maxVec(dtype); vec *= 2) {
      for (int unroll : kUnrollChoices) {
        const ReduceParams p{kMultiRowThreads, vec, unroll, kMultiRowThreads / rowThreads};
        if (isPoint(dtype, p)) out.push_back(p);
      }
    }
  }
  return out;
}

// Note [Reduction parameter ranking]
// A guess, not yet measured: the kernels are bound by reading the input
// once. Vectors are the widest that divide cols. Short rows (at most 64
// vectors) of many rows take several rows per CTA, the fewest lanes a row
// that cover it with at most 8 vectors a lane. Otherwise one CTA a row, at
// the CTA size giving each thread about 4 vectors or more (1024 threads for
// long rows), 64 bytes in flight a thread first (unroll 4 at 16 bytes), then
// the neighbouring CTA sizes and unrolls; a vec == 1 point last (the
// fallback for rows no vector divides, and for unaligned data).
std::vector<ReduceParams> ReduceFamily::parameterSpace(const ReduceVariant& v) {
  std::vector<ReduceParams> out;
  if (!guardVariant(v)) return out;
  auto add = [&](const ReduceParams& p, size_t limit) {
    if (out.size() < limit && guardParams(v, p) && std::find(out.begin(), out.end(), p) == out.end()) {
      out.push_back(p);
    }
  };
  auto fitThreads = [](int64_t nvec) {
    int threads = 32;
    while (threads < 1024 && static_cast<int64_t>(threads) * 4 < nvec) threads *= 2;
    return threads;
  };
  auto unrollFor = [](int64_t perThread) {
    int unroll = 1;
    while (unroll < 8 && unroll < perThread) unroll *= 2;
    return unroll;
  };
  const int vec = widestVec(v.dtype, v.cols);
  const int64_t nvec = v.cols / vec;
  const size_t headLimit = kMaxSpaceSize - 1;
  if (nvec <= 64 && v.rows >= kMultiRowMinRows) {
    int added = 0;
    for (int rowThreads : kRowThreadChoices) {
      if (added == 2) break;
      if (static_cast<int64_t>(rowThreads) * 8 < nvec) continue;
      add({kMultiRowThreads, vec, unrollFor(ceilDiv(nvec, rowThreads)), kMultiRowThreads / rowThreads}, headLimit);
      ++added;
    }
  }
  const int t = fitThreads(nvec);
  const int packBytes = vec * static_cast<int>(elementSize(v.dtype));
  const int preferredUnroll = std::min(unrollFor(ceilDiv(nvec, t)), std::max(1, 64 / packBytes));
  add({t, vec, preferredUnroll, 1}, headLimit);
  for (int threads : {t, std::max(32, t / 2), std::min(1024, t * 2)}) {
    for (int unroll : {preferredUnroll, preferredUnroll * 2, std::max(1, preferredUnroll / 2)}) {
      add({threads, vec, std::min(unroll, 8), 1}, headLimit);
    }
  }
  if (vec > 1) add({t, vec / 2, preferredUnroll, 1}, headLimit);
  add({fitThreads(v.cols), 1, 4, 1}, kMaxSpaceSize);
  HOTKERNEL_INTERNAL_ASSERT(!out.empty(), "empty reduction parameter space for cols=", v.cols);
  return out;
}

std::string ReduceFamily::source() { return expandPrelude(kernelSource(kName).text); }

std::vector<std::string> ReduceFamily::compileOptions(DType dtype, const ReduceParams& p, ReduceOp op) {
  HOTKERNEL_CHECK(isPoint(dtype, p), "not a reduction parameter point for ", dtypeName(dtype), ": ", p.describe());
  HOTKERNEL_CHECK(knownOp(op), "unknown reduction op ", static_cast<int>(op));
  return {"-DHK_DTYPE=" + std::to_string(static_cast<int>(dtype)), "-DHK_OP=" + std::to_string(static_cast<int>(op)),
          "-DHK_THREADS=" + std::to_string(p.threads),       "-DHK_ROWS=" + std::to_string(p.rowsPerCta),
          "-DHK_VEC=" + std::to_string(p.vec),               "-DHK_UNROLL=" + std::to_string(p.unroll)};
}

LaunchGeometry ReduceFamily::launchGeometry(const ReduceVariant& v, const ReduceParams& p) {
  constexpr int64_t kMaxGridX = std::numeric_limits<int32_t>::max();
  LaunchGeometry g;
  const int64_t ctas = ceilDiv(std::max<int64_t>(v.rows, 1), std::max(p.rowsPerCta, 1));
  g.gridX = static_cast<unsigned>(std::clamp<int64_t>(ctas, 1, kMaxGridX));
  g.blockX = static_cast<unsigned>(p.threads);
  g.sharedBytes = 0;
  return g;
}

double ReduceFamily::bytesMoved(const ReduceVariant& v) {
  const double rows = static_cast<double>(v.rows), cols = static_cast<double>(v.cols);
  const double indices = knownOp(v.op) && reduceOpInfo(v.op).pair ? sizeof(int64_t) : 0.0;
  return rows * cols * static_cast<double>(elementSize(v.dtype)) +
         rows * (static_cast<double>(outputElementSize(v.op, v.dtype)) + indices);
}

ReduceTolerance ReduceFamily::tolerance(ReduceOp op, DType dtype, int64_t cols) {
  ReduceTolerance t;
  if (knownOp(op) && reduceOpInfo(op).exact) {
    t.exact = true;
    return t;
  }
  t.sumRel = sumChainRel(cols);
  switch (dtype) {
    case DType::Float32:
      t.outRel = std::ldexp(1.0, -22);
      break;
    case DType::Float16:
      t.outRel = std::ldexp(1.0, -10);
      t.outAbs = std::ldexp(1.0, -24);
      break;
    case DType::BFloat16:
      t.outRel = std::ldexp(1.0, -7);
      break;
  }
  return t;
}

}  // namespace hotkernel::kernels
