#pragma once
// The CTA tiles of the middle-dim kernels (reductions and softmax over a dim
// that is not the last, as [outer, dim, inner]): which tiles exist, the
// ranked guesses a parameter space starts from, and the launch geometry.
// Internal to kernels/src; each family keeps its own params type, shared
// memory bound and guards.

#include <cstddef>
#include <cstdint>
#include <vector>

#include "hotkernel/kernels/DType.h"
#include "hotkernel/kernels/MiddleDimParams.h"
#include "hotkernel/kernels/SoftmaxFamily.h"  // LaunchGeometry

namespace hotkernel::kernels::detail {

// tx lanes of vec elements along inner, ty rows along the dim (tx * ty
// threads), unroll rows a thread loads at once: a point of either family.
using MiddleDimTile = MiddleDimParams;

constexpr int kMiddleDimTxChoices[] = {32, 64, 128};
constexpr int kMiddleDimMaxTy = 32;

// A tile the middle-dim kernels compile for dtype, ignoring shared memory:
// tx one of kMiddleDimTxChoices, ty and vec powers of two (ty <= 32, vec
// within 16 bytes), at most 1024 threads, unroll one of kMiddleDimUnrolls.
bool isMiddleDimTile(DType dtype, const MiddleDimTile& t);

// Shared memory of a tile that keeps bytesPerPosition per (row, lane, element).
size_t middleDimSharedBytes(const MiddleDimTile& t, size_t bytesPerPosition);

// Every tile of dtype (isMiddleDimTile), vec outermost, then tx, then ty, then unroll.
std::vector<MiddleDimTile> middleDimTiles(DType dtype);

// The ranked guesses for [outer, dim, inner] (Note [Middle-dim parameter
// ranking]), best first, possibly repeated; a family shrinks ty to its shared
// memory bound, guards and dedupes them.
std::vector<MiddleDimTile> middleDimGuesses(DType dtype, int64_t outer, int64_t dim, int64_t inner);

// One CTA per (outer index, tile of tx * vec inner elements), capped at the
// largest grid.x; no dynamic shared memory.
LaunchGeometry middleDimGeometry(int64_t outer, int64_t inner, const MiddleDimTile& t);

}  // namespace hotkernel::kernels::detail
