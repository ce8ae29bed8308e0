#include "hotkernel/kernels/ReduceDimFamily.h"

#include <algorithm>
#include <limits>

#include "FamilyMath.h"
#include "MiddleDimTiles.h"
#include "hotkernel/kernels/KernelSource.h"
#include "hotkernel/runtime/Check.h"

namespace hotkernel::kernels {
namespace {

using detail::contiguous;
using detail::isMiddleDimTile;
using detail::knownDType;
using detail::middleDimGeometry;
using detail::middleDimGuesses;
using detail::middleDimSharedBytes;
using detail::middleDimTiles;
using detail::MiddleDimTile;

bool knownOp(ReduceOp op) {
  for (ReduceOp o : kAllReduceOps) {
    if (o == op) return true;
  }
  return false;
}

// The index ops (max.dim and min.dim among them) keep an int32 index with each float.
bool isPoint(DType dtype, ReduceOp op, const ReduceDimParams& p) {
  if (!knownOp(op) || !isMiddleDimTile(dtype, p)) return false;
  const size_t perPosition = sizeof(float) + (reduceOpInfo(op).index ? sizeof(int32_t) : 0);
  return middleDimSharedBytes(p, perPosition) <= ReduceDimFamily::kMaxSharedBytes;
}

}  // namespace

ReduceDimVariant reduceDimVariantOf(const VariantKey& key, ReduceOp op) {
  return ReduceDimVariant{static_cast<DType>(key.dtype), key.rows, key.cols, key.inner, op};
}

VariantKey reduceDimKeyOf(const ReduceDimVariant& v, int32_t device) {
  VariantKey key{static_cast<int32_t>(v.dtype), device, v.outer, v.reduced};
  key.inner = v.inner;
  return key;
}

int64_t ReduceDimFamily::middleDim(int64_t ndim, const int64_t* dims, size_t count) {
  if (ndim < 2 || count != 1) return -1;
  const int64_t d = dims[0] < 0 ? dims[0] + ndim : dims[0];
  return d >= 0 && d < ndim - 1 ? d : -1;
}

bool ReduceDimFamily::guardCall(const ReduceCall& call, ReduceDimVariant* variant) {
  if (!knownOp(call.op) || !call.floating || !knownDType(call.dtype) || call.dtypeGiven || !call.dims) return false;
  const int64_t ndim = static_cast<int64_t>(call.sizes.size());
  const int64_t d = middleDim(ndim, call.dims->data(), call.dims->size());
  if (d < 0 || !contiguous(call.sizes, call.strides)) return false;
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < ndim; ++i) {
    const int64_t n = call.sizes[static_cast<size_t>(i)];
    if (n < 1) return false;  // empty (or malformed)
    if (i == d) continue;
    int64_t& product = i < d ? outer : inner;
    if (product > std::numeric_limits<int64_t>::max() / n) return false;
    product *= n;
  }
  const ReduceDimVariant v{call.dtype, outer, call.sizes[static_cast<size_t>(d)], inner, call.op};
  if (!guardVariant(v)) return false;  // inner < 2 among the rest
  if (variant) *variant = v;
  return true;
}

std::vector<int64_t> ReduceDimFamily::outputSizes(const ReduceCall& call) {
  const auto ndim = static_cast<int64_t>(call.sizes.size());
  const int64_t d = call.dims ? middleDim(ndim, call.dims->data(), call.dims->size()) : -1;
  std::vector<int64_t> out(call.sizes.begin(), call.sizes.end());
  if (d < 0) return out;
  if (call.keepdim) {
    out[static_cast<size_t>(d)] = 1;
  } else {
    out.erase(out.begin() + d);
  }
  return out;
}

bool ReduceDimFamily::guardVariant(const ReduceDimVariant& v) {
  if (!knownDType(v.dtype) || !knownOp(v.op)) return false;
  if (v.outer < 1 || v.reduced < 1 || v.reduced > kMaxReduced || v.inner < 2) return false;
  const int64_t maxElements = std::numeric_limits<int64_t>::max() / static_cast<int64_t>(elementSize(v.dtype));
  if (v.outer > maxElements / v.reduced) return false;
  return v.outer * v.reduced <= maxElements / v.inner;
}

bool ReduceDimFamily::guardParams(const ReduceDimVariant& v, const ReduceDimParams& p) {
  return guardVariant(v) && isPoint(v.dtype, v.op, p) && v.inner % p.vec == 0;
}

bool ReduceDimFamily::guardPointers(const void* in, const void* out, const ReduceDimVariant& v,
                                    const ReduceDimParams& p) {
  if (in == nullptr || out == nullptr || in == out || p.vec < 1) return false;
  const auto aligned = [](const void* ptr, size_t a) { return reinterpret_cast<uintptr_t>(ptr) % a == 0; };
  return aligned(in, requiredAlignment(v.dtype, p)) &&
         aligned(out, outputAlignment(v.op, v.dtype, requiredAlignment(v.dtype, p)));
}

size_t ReduceDimFamily::requiredAlignment(DType dtype, const ReduceDimParams& p) {
  return static_cast<size_t>(std::max(p.vec, 1)) * elementSize(dtype);
}

size_t ReduceDimFamily::outputAlignment(ReduceOp op, DType dtype, size_t inputAlignment) {
  return std::max<size_t>(inputAlignment / elementSize(dtype), 1) * outputElementSize(op, dtype);
}

std::vector<ReduceDimParams> ReduceDimFamily::allParameterPoints(DType dtype, ReduceOp op) {
  std::vector<ReduceDimParams> out;
  for (const MiddleDimTile& t : middleDimTiles(dtype)) {
    if (isPoint(dtype, op, t)) out.push_back(t);
  }
  return out;
}

// The guesses of Note [Middle-dim parameter ranking] (MiddleDimTiles.cpp),
// each with its rows halved until it fits the shared memory bound.
std::vector<ReduceDimParams> ReduceDimFamily::parameterSpace(const ReduceDimVariant& v) {
  std::vector<ReduceDimParams> out;
  if (!guardVariant(v)) return out;
  for (ReduceDimParams p : middleDimGuesses(v.dtype, v.outer, v.reduced, v.inner)) {
    while (p.ty > 1 && !isPoint(v.dtype, v.op, p)) p.ty /= 2;
    if (out.size() < kMaxSpaceSize && guardParams(v, p) && std::find(out.begin(), out.end(), p) == out.end()) {
      out.push_back(p);
    }
  }
  HOTKERNEL_INTERNAL_ASSERT(!out.empty(), "empty middle-dim parameter space for inner=", v.inner);
  return out;
}

std::string ReduceDimFamily::source() { return expandPrelude(kernelSource(kName).text); }

std::string ReduceDimFamily::displayName(ReduceOp op) { return std::string(reduceOpName(op)) + "_dim"; }

std::vector<std::string> ReduceDimFamily::compileOptions(DType dtype, const ReduceDimParams& p, ReduceOp op) {
  HOTKERNEL_CHECK(isPoint(dtype, op, p), "not a middle-dim reduction point for ", dtypeName(dtype), " ",
                  knownOp(op) ? reduceOpName(op) : "?", ": ", p.describe());
  return {"-DHK_DTYPE=" + std::to_string(static_cast<int>(dtype)), "-DHK_OP=" + std::to_string(static_cast<int>(op)),
          "-DHK_TX=" + std::to_string(p.tx), "-DHK_TY=" + std::to_string(p.ty), "-DHK_VEC=" + std::to_string(p.vec),
          "-DHK_UNROLL=" + std::to_string(p.unroll)};
}

LaunchGeometry ReduceDimFamily::launchGeometry(const ReduceDimVariant& v, const ReduceDimParams& p) {
  return middleDimGeometry(v.outer, v.inner, p);
}

double ReduceDimFamily::bytesMoved(const ReduceDimVariant& v) {
  const double outer = static_cast<double>(v.outer), inner = static_cast<double>(v.inner);
  const double indices = knownOp(v.op) && reduceOpInfo(v.op).pair ? sizeof(int64_t) : 0.0;
  return outer * static_cast<double>(v.reduced) * inner * static_cast<double>(elementSize(v.dtype)) +
         outer * inner * (static_cast<double>(outputElementSize(v.op, v.dtype)) + indices);
}

}  // namespace hotkernel::kernels
