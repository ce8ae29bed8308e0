#include "hotkernel/kernels/SoftmaxDimFamily.h"

#include <algorithm>
#include <limits>

#include "FamilyMath.h"
#include "hotkernel/kernels/KernelSource.h"
#include "hotkernel/runtime/Check.h"

namespace hotkernel::kernels {
namespace {

using detail::ceilDiv;
using detail::isPowerOfTwo;
using detail::knownDType;
using detail::maxVec;
using detail::widestVec;

constexpr int kTxChoices[] = {32, 64, 128};
constexpr int kMaxTy = 32;
constexpr size_t kMaxSpaceSize = 12;
// Threads a parameter guess aims to keep busy: about 2048 resident threads on
// each of ~130 SMs (Note [Middle-dim softmax ranking]).
constexpr int64_t kFillThreads = 256 * 1024;

size_t sharedBytes(const SoftmaxDimParams& p) {
  return static_cast<size_t>(p.ty) * static_cast<size_t>(p.tx) * static_cast<size_t>(p.vec) * 2 * sizeof(float);
}

bool isPoint(DType dtype, const SoftmaxDimParams& p) {
  if (!knownDType(dtype)) return false;
  if (!isPowerOfTwo(p.vec) || p.vec > maxVec(dtype)) return false;
  if (std::find(std::begin(kTxChoices), std::end(kTxChoices), p.tx) == std::end(kTxChoices)) return false;
  if (!isPowerOfTwo(p.ty) || p.ty > kMaxTy || p.threads() > 1024) return false;
  return sharedBytes(p) <= SoftmaxDimFamily::kMaxSharedBytes;
}

int64_t nextPowerOfTwo(int64_t x) {
  int64_t p = 1;
  while (p < x) p <<= 1;
  return p;
}

}  // namespace

nlohmann::json SoftmaxDimParams::toJson() const { return {{"tx", tx}, {"ty", ty}, {"vec", vec}}; }

SoftmaxDimParams SoftmaxDimParams::fromJson(const nlohmann::json& j) {
  HOTKERNEL_CHECK(j.is_object(), "middle-dim softmax params must be a JSON object: ", j.dump());
  for (const char* key : {"tx", "ty", "vec"}) {
    HOTKERNEL_CHECK(j.contains(key) && j.at(key).is_number_integer(), "middle-dim softmax params need an integer '",
                    key, "': ", j.dump());
  }
  SoftmaxDimParams p;
  p.tx = j.at("tx").get<int>();
  p.ty = j.at("ty").get<int>();
  p.vec = j.at("vec").get<int>();
  return p;
}

std::string SoftmaxDimParams::describe() const {
  return "tx=" + std::to_string(tx) + " ty=" + std::to_string(ty) + " vec=" + std::to_string(vec);
}

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
  if (!knownDType(dtype)) return out;
  for (int vec = 1; vec <= maxVec(dtype); vec *= 2) {
    for (int tx : kTxChoices) {
      for (int ty = 1; ty <= kMaxTy; ty *= 2) {
        const SoftmaxDimParams p{tx, ty, vec};
        if (isPoint(dtype, p)) out.push_back(p);
      }
    }
  }
  return out;
}

// Note [Middle-dim softmax ranking]
// As the middle-dim reductions' (Note [Middle-dim parameter ranking] in
// ReduceDimFamily.cpp): the widest vector that divides inner; the narrowest
// tile (tx of 32, 64 or 128 vectors) that covers inner, so that few lanes
// idle when inner is small; then enough threads along the softmax dim that
// the CTAs (one per outer index and tile) keep about kFillThreads threads
// busy, never more rows per CTA than the dim has. Around that guess: half and
// twice the rows, the other tile widths, narrower vectors, and a vec == 1
// point. Each pair in shared memory takes twice a reduction's bytes, so a
// guess over kMaxSharedBytes gives up rows first.
std::vector<SoftmaxDimParams> SoftmaxDimFamily::parameterSpace(const SoftmaxDimVariant& v) {
  std::vector<SoftmaxDimParams> out;
  if (!guardVariant(v)) return out;
  auto add = [&](SoftmaxDimParams p) {
    while (p.ty > 1 && !isPoint(v.dtype, p)) p.ty /= 2;  // within the shared memory bound
    if (out.size() < kMaxSpaceSize && guardParams(v, p) && std::find(out.begin(), out.end(), p) == out.end()) {
      out.push_back(p);
    }
  };
  const int vec = widestVec(v.dtype, v.inner);
  const int64_t vectors = v.inner / vec;
  const int tx = static_cast<int>(std::clamp<int64_t>(nextPowerOfTwo(vectors), 32, 128));
  const int64_t ctas = v.outer * ceilDiv(v.inner, static_cast<int64_t>(tx) * vec);
  const int64_t wanted = ceilDiv(kFillThreads, std::max<int64_t>(ctas * tx, 1));
  const int ty = static_cast<int>(
      std::clamp<int64_t>(nextPowerOfTwo(std::min(wanted, nextPowerOfTwo(v.dim))), 1, std::min(kMaxTy, 1024 / tx)));
  add({tx, ty, vec});
  add({tx, std::max(ty / 2, 1), vec});
  add({tx, std::min(ty * 2, kMaxTy), vec});
  for (int otherTx : kTxChoices) add({otherTx, ty, vec});
  if (vec > 1) add({tx, ty, vec / 2});
  add({tx, std::max(ty, 4), vec});
  add({32, std::min(ty * 2, kMaxTy), 1});
  add({32, 8, 1});
  add({32, 1, 1});
  HOTKERNEL_INTERNAL_ASSERT(!out.empty(), "empty middle-dim softmax parameter space for inner=", v.inner);
  return out;
}

std::string SoftmaxDimFamily::source() { return expandPrelude(kernelSource(kName).text); }

std::vector<std::string> SoftmaxDimFamily::compileOptions(DType dtype, const SoftmaxDimParams& p, SoftmaxOp op) {
  HOTKERNEL_CHECK(isPoint(dtype, p), "not a middle-dim softmax point for ", dtypeName(dtype), ": ", p.describe());
  return {"-DHK_DTYPE=" + std::to_string(static_cast<int>(dtype)), "-DHK_TX=" + std::to_string(p.tx),
          "-DHK_TY=" + std::to_string(p.ty), "-DHK_VEC=" + std::to_string(p.vec),
          std::string("-DHK_LOG=") + (op == SoftmaxOp::LogSoftmax ? "1" : "0")};
}

LaunchGeometry SoftmaxDimFamily::launchGeometry(const SoftmaxDimVariant& v, const SoftmaxDimParams& p) {
  constexpr int64_t kMaxGridX = std::numeric_limits<int32_t>::max();
  const int64_t tiles = ceilDiv(std::max<int64_t>(v.inner, 1), static_cast<int64_t>(p.tx) * std::max(p.vec, 1));
  const int64_t outer = std::max<int64_t>(v.outer, 1);
  LaunchGeometry g;
  g.gridX = static_cast<unsigned>(outer > kMaxGridX / tiles ? kMaxGridX : outer * tiles);
  g.blockX = static_cast<unsigned>(p.threads());
  g.sharedBytes = 0;
  return g;
}

double SoftmaxDimFamily::bytesMoved(const SoftmaxDimVariant& v) {
  return 2.0 * static_cast<double>(v.outer) * static_cast<double>(v.dim) * static_cast<double>(v.inner) *
         static_cast<double>(elementSize(v.dtype));
}

}  // namespace hotkernel::kernels
