#include "MiddleDimTiles.h"

#include <algorithm>
#include <limits>

#include "FamilyMath.h"

namespace hotkernel::kernels::detail {
namespace {

// Threads a guess aims to keep busy: about 2048 resident threads on each of
// ~130 SMs (Note [Middle-dim parameter ranking]).
constexpr int64_t kFillThreads = 256 * 1024;

int64_t nextPowerOfTwo(int64_t x) {
  int64_t p = 1;
  while (p < x) p <<= 1;
  return p;
}

}  // namespace

bool isMiddleDimTile(DType dtype, const MiddleDimTile& t) {
  if (!knownDType(dtype)) return false;
  if (!isPowerOfTwo(t.vec) || t.vec > maxVec(dtype)) return false;
  if (!contains(std::begin(kMiddleDimTxChoices), std::end(kMiddleDimTxChoices), t.tx)) return false;
  if (!contains(std::begin(kMiddleDimUnrolls), std::end(kMiddleDimUnrolls), t.unroll)) return false;
  return isPowerOfTwo(t.ty) && t.ty <= kMiddleDimMaxTy && t.threads() <= 1024;
}

size_t middleDimSharedBytes(const MiddleDimTile& t, size_t bytesPerPosition) {
  return static_cast<size_t>(t.ty) * static_cast<size_t>(t.tx) * static_cast<size_t>(t.vec) * bytesPerPosition;
}

std::vector<MiddleDimTile> middleDimTiles(DType dtype) {
  std::vector<MiddleDimTile> out;
  if (!knownDType(dtype)) return out;
  for (int vec = 1; vec <= maxVec(dtype); vec *= 2) {
    for (int tx : kMiddleDimTxChoices) {
      for (int ty = 1; ty <= kMiddleDimMaxTy; ty *= 2) {
        for (int unroll : kMiddleDimUnrolls) {
          const MiddleDimTile t{tx, ty, vec, unroll};
          if (isMiddleDimTile(dtype, t)) out.push_back(t);
        }
      }
    }
  }
  return out;
}

// Note [Middle-dim parameter ranking]
// The widest vector that divides inner; the narrowest tile (tx of 32, 64 or
// 128 vectors) that covers inner, so that few lanes idle when inner is small;
// then enough threads along the dim that the CTAs (one per outer index and
// tile) keep about kFillThreads threads busy, never more rows per CTA than
// the dim has. Around that guess: half and twice the rows, the other tile
// widths, narrower vectors, and a vec == 1 point. Every guess loads 4 rows at
// once (Note [Rows in flight] in reduce_dim.cu); the first also 1 and 8.
std::vector<MiddleDimTile> middleDimGuesses(DType dtype, int64_t outer, int64_t dim, int64_t inner) {
  const int vec = widestVec(dtype, inner);
  const int64_t vectors = inner / vec;
  const int tx = static_cast<int>(std::clamp<int64_t>(nextPowerOfTwo(vectors), 32, 128));
  const int64_t ctas = outer * ceilDiv(inner, static_cast<int64_t>(tx) * vec);
  const int64_t wanted = ceilDiv(kFillThreads, std::max<int64_t>(ctas * tx, 1));
  const int ty = static_cast<int>(std::clamp<int64_t>(nextPowerOfTwo(std::min(wanted, nextPowerOfTwo(dim))), 1,
                                                      std::min(kMiddleDimMaxTy, 1024 / tx)));
  constexpr int kUnroll = 4;
  std::vector<MiddleDimTile> out;
  out.push_back({tx, ty, vec, kUnroll});
  out.push_back({tx, ty, vec, 1});
  out.push_back({tx, ty, vec, 8});
  out.push_back({tx, std::max(ty / 2, 1), vec, kUnroll});
  out.push_back({tx, std::min(ty * 2, kMiddleDimMaxTy), vec, kUnroll});
  for (int otherTx : kMiddleDimTxChoices) out.push_back({otherTx, ty, vec, kUnroll});
  if (vec > 1) out.push_back({tx, ty, vec / 2, kUnroll});
  out.push_back({tx, std::max(ty, 4), vec, kUnroll});
  out.push_back({32, std::min(ty * 2, kMiddleDimMaxTy), 1, kUnroll});
  out.push_back({32, 8, 1, kUnroll});
  out.push_back({32, 1, 1, kUnroll});
  return out;
}

LaunchGeometry middleDimGeometry(int64_t outer, int64_t inner, const MiddleDimTile& t) {
  constexpr int64_t kMaxGridX = std::numeric_limits<int32_t>::max();
  const int64_t tiles = ceilDiv(std::max<int64_t>(inner, 1), static_cast<int64_t>(t.tx) * std::max(t.vec, 1));
  const int64_t rows = std::max<int64_t>(outer, 1);
  LaunchGeometry g;
  g.gridX = static_cast<unsigned>(rows > kMaxGridX / tiles ? kMaxGridX : rows * tiles);
  g.blockX = static_cast<unsigned>(t.threads());
  g.sharedBytes = 0;
  return g;
}

}  // namespace hotkernel::kernels::detail
