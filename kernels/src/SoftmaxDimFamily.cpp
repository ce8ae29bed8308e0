#include "hotkernel/kernels/SoftmaxDimFamily.h"

#include <algorithm>
#include <limits>

#include "FamilyMath.h"
#include "MiddleDimTiles.h"
#include "hotkernel/kernels/KernelSource.h"
#include "hotkernel/runtime/Check.h"

namespace hotkernel::kernels {
namespace {

using detail::isMiddleDimTile;
using detail::knownDType;
using detail::middleDimGeometry;
using detail::middleDimGuesses;
using detail::middleDimSharedBytes;
using detail::middleDimTiles;
using detail::MiddleDimTile;

// Each position keeps a (max, sum) pair of floats.
bool isPoint(DType dtype, const SoftmaxDimParams& p) {
  return isMiddleDimTile(dtype, p) && middleDimSharedBytes(p, 2 * sizeof(float)) <= SoftmaxDimFamily::kMaxSharedBytes;
}

}  // namespace

SoftmaxDimVariant softmaxDimVariantOf(const VariantKey& key) {
  return SoftmaxDimVariant{static_cast<DType>(key.dtype), key.rows, key.cols, key.inner};
}

VariantKey softmaxDimKeyOf(const SoftmaxDimVariant& v, int32_t device) {
  VariantKey key{static_cast<int32_t>(v.dtype), device, v.outer, v.dim};
  key.inner = v.inner;
  return key;
}

bool softmaxLayoutOf(const int64_t* sizes, int64_t ndim, int64_t dim, SoftmaxLayout* layout) {
  if (ndim < 1 || sizes == nullptr) return false;
  const int64_t d = dim < 0 ? dim + ndim : dim;
  if (d < 0 || d >= ndim) return false;
  SoftmaxLayout l;
  for (int64_t i = 0; i < ndim; ++i) {
    const int64_t n = sizes[i];
    if (n < 1) return false;  // empty (or malformed)
    int64_t& product = i < d ? l.outer : i == d ? l.dim : l.inner;
    if (product > std::numeric_limits<int64_t>::max() / n) return false;
    product *= n;
  }
  if (layout) *layout = l;
  return true;
}

bool SoftmaxDimFamily::guardVariant(const SoftmaxDimVariant& v) {
  if (!knownDType(v.dtype)) return false;
  if (v.outer < 1 || v.dim < 1 || v.dim > kMaxDim || v.inner < 2) return false;
  const int64_t maxElements = std::numeric_limits<int64_t>::max() / static_cast<int64_t>(elementSize(v.dtype));
  if (v.outer > maxElements / v.dim) return false;
  return v.outer * v.dim <= maxElements / v.inner;
}

bool SoftmaxDimFamily::guardParams(const SoftmaxDimVariant& v, const SoftmaxDimParams& p) {
  return guardVariant(v) && isPoint(v.dtype, p) && v.inner % p.vec == 0;
}

bool SoftmaxDimFamily::guardPointers(const void* in, const void* out, DType dtype, const SoftmaxDimParams& p) {
  if (in == nullptr || out == nullptr || p.vec < 1) return false;
  const size_t a = requiredAlignment(dtype, p);
  return reinterpret_cast<uintptr_t>(in) % a == 0 && reinterpret_cast<uintptr_t>(out) % a == 0;
}

size_t SoftmaxDimFamily::requiredAlignment(DType dtype, const SoftmaxDimParams& p) {
  return static_cast<size_t>(std::max(p.vec, 1)) * elementSize(dtype);
}

std::vector<SoftmaxDimParams> SoftmaxDimFamily::allParameterPoints(DType dtype) {
  std::vector<SoftmaxDimParams> out;
  for (const MiddleDimTile& t : middleDimTiles(dtype)) {
    if (isPoint(dtype, t)) out.push_back(t);
  }
  return out;
}

// Note [Middle-dim softmax ranking]
// The middle-dim reductions' guesses (Note [Middle-dim parameter ranking] in
// MiddleDimTiles.cpp), each with its rows halved until it fits the shared
// memory bound: a pair takes twice a reduction's bytes, so a guess over
// kMaxSharedBytes gives up rows first.
std::vector<SoftmaxDimParams> SoftmaxDimFamily::parameterSpace(const SoftmaxDimVariant& v) {
  std::vector<SoftmaxDimParams> out;
  if (!guardVariant(v)) return out;
  for (SoftmaxDimParams p : middleDimGuesses(v.dtype, v.outer, v.dim, v.inner)) {
    while (p.ty > 1 && !isPoint(v.dtype, p)) p.ty /= 2;
    if (out.size() < kMaxSpaceSize && guardParams(v, p) && std::find(out.begin(), out.end(), p) == out.end()) {
      out.push_back(p);
    }
  }
  HOTKERNEL_INTERNAL_ASSERT(!out.empty(), "empty middle-dim softmax parameter space for inner=", v.inner);
  return out;
}

std::string SoftmaxDimFamily::source() { return expandPrelude(kernelSource(kName).text); }

std::vector<std::string> SoftmaxDimFamily::compileOptions(DType dtype, const SoftmaxDimParams& p, SoftmaxOp op) {
  HOTKERNEL_CHECK(isPoint(dtype, p), "not a middle-dim softmax point for ", dtypeName(dtype), ": ", p.describe());
  return {"-DHK_DTYPE=" + std::to_string(static_cast<int>(dtype)), "-DHK_TX=" + std::to_string(p.tx),
          "-DHK_TY=" + std::to_string(p.ty), "-DHK_VEC=" + std::to_string(p.vec),
          "-DHK_UNROLL=" + std::to_string(p.unroll), std::string("-DHK_LOG=") + (op == SoftmaxOp::LogSoftmax ? "1" : "0")};
}

LaunchGeometry SoftmaxDimFamily::launchGeometry(const SoftmaxDimVariant& v, const SoftmaxDimParams& p) {
  return middleDimGeometry(v.outer, v.inner, p);
}

double SoftmaxDimFamily::bytesMoved(const SoftmaxDimVariant& v) {
  return 2.0 * static_cast<double>(v.outer) * static_cast<double>(v.dim) * static_cast<double>(v.inner) *
         static_cast<double>(elementSize(v.dtype));
}

}  // namespace hotkernel::kernels
