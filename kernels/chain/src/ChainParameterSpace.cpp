// The parameter points of a chain variant (ChainParameterSpace.h).

#include "hotkernel/chain/ChainParameterSpace.h"

#include <algorithm>

#include "hotkernel/kernels/DType.h"
#include "hotkernel/runtime/Check.h"

namespace hotkernel::chain {
namespace {

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The most vectors a thread holds in a row of several a CTA: 32-thread rows of 16 spill on sm_90.
constexpr int64_t kMaxSubWarpRowItems = 8;

// Note [Rows split over a cluster]: clusters are offered to variants of fewer rows than two CTAs an SM would need
// on an H100 or H200 (132 SMs), each row at least this many vectors.
constexpr int64_t kClusterRowsBelow = 264;
constexpr int64_t kClusterMinVectors = 1024;
// A cluster's CTA holds its slice in registers only with 512 threads of at most 32 elements each (the group norm's
// points with more, or with 1024 threads, spill on sm_90).
constexpr int64_t kClusterRegisterElements = 32;

// Whether `p` is a point the generator takes and that serves [rows, cols].
bool serves(const ChainIR& ir, const ChainKernelParams& p, int64_t rows, int64_t cols, const ChainLayout& layout) {
  try {
    return chainVariantProblem(ir, p, rows, cols, layout).empty();
  } catch (const Error&) {
    return false;  // checkChainKernel: outside the generator's ranges, or too many arguments
  }
}

void addRowPoints(std::vector<ChainKernelParams>& out, int threads, int vec, int rowsPerCta, int64_t vectors) {
  const int64_t rowThreads = threads / rowsPerCta;
  out.push_back({threads, vec, rowsPerCta, 0});
  const int64_t items = ceilDiv(vectors, rowThreads);
  if (items <= 16) out.push_back({threads, vec, rowsPerCta, static_cast<int>(items)});
}

}  // namespace

bool chainArchHasClusters(const std::string& arch) {
  if (arch.rfind("sm_", 0) != 0 || arch.size() < 5) return false;
  int major = 0;
  for (size_t i = 3; i < arch.size() && arch[i] >= '0' && arch[i] <= '9'; ++i) major = major * 10 + (arch[i] - '0');
  return major >= 90;
}

int chainWidestVec(const ChainIR& ir) {
  size_t narrowest = 0;
  std::vector<int> tensors = ir.inputs();
  tensors.insert(tensors.end(), ir.outputs().begin(), ir.outputs().end());
  for (int i : tensors) {
    const Node& n = ir.node(i);
    if (n.shape != ShapeClass::Full && n.shape != ShapeClass::Column) continue;
    const size_t e = kernels::elementSize(n.dtype);
    narrowest = narrowest == 0 ? e : std::min(narrowest, e);
  }
  return narrowest == 0 ? 4 : static_cast<int>(16 / narrowest);
}

namespace {

// Whether every row stride, input extent and Cat boundary is a multiple of `vec`.
bool vecFits(const ChainIR& ir, const ChainLayout& layout, int vec) {
  for (size_t k = 0; k < layout.strides.size(); ++k) {
    if (layoutColRepeat(layout, k) > 1) continue;  // Note [Repeated columns]: element loads
    for (int64_t s : layout.strides[k]) {
      if (s % vec != 0) return false;
    }
  }
  for (const Node& n : ir.nodes()) {
    if (n.op == OpKind::Input && n.cols % vec != 0) return false;
  }
  for (int64_t b : chainCatBoundaries(ir)) {
    if (b % vec != 0) return false;
  }
  return true;
}

}  // namespace

std::vector<ChainKernelParams> chainParameterSpace(const ChainIR& ir, int64_t rows, int64_t cols,
                                                   const ChainLayout& layout) {
  ir.validate();
  std::vector<ChainKernelParams> candidates;
  if (rows < 1 || cols < 1) return candidates;
  if (layout.transposed()) {
    // Note [Transposed copies]: vec, the tile side, then the CTA's threads (the first guess: vec 2, 64 a side, 256 threads).
    // Each thread holds at least two vectors of the tile: one a thread leaves a single load in flight.
    for (int vec : {2, 1}) {
      for (int tile : {64, 32}) {
        for (int threads : {256, 512, 128, 1024}) {
          if (threads * vec * 2 <= tile * tile) candidates.push_back({threads, vec, tile, 0});
        }
      }
    }
    std::vector<ChainKernelParams> space;
    for (const ChainKernelParams& p : candidates) {
      if (serves(ir, p, rows, cols, layout)) space.push_back(p);
    }
    return space;  // no elementwise or row point serves a transposed layout
  }
  std::vector<int> vecs;
  const int widest = chainWidestVec(ir);
  for (int v : {widest, widest / 2}) {
    if (v >= 1 && cols % v == 0 && vecFits(ir, layout, v)) vecs.push_back(v);
  }
  if (vecs.empty()) vecs.push_back(1);
  for (int vec : vecs) {
    const int64_t vectors = cols / vec;
    if (!chainUsesRowKernel(ir, layout)) {
      // Note [Folded segments]: equal Cat segments are tried folded too.
      const bool fold = chainFoldWidth(ir, cols) > 0;
      for (int threads : {128, 256, 512, 1024}) {
        candidates.push_back({threads, vec, 1, 0});
        if (fold) candidates.push_back({threads, vec, 1, 0, false, true});
      }
      // Note [Unrolled elementwise chains]: at the widest vec only; a chain with Cat segments only folded.
      if (vec != vecs.front()) continue;
      const bool segments = !chainCatBoundaries(ir).empty();
      for (int items : {2, 4}) {
        for (int threads : {128, 256}) {
          if (!segments) candidates.push_back({threads, vec, 1, items});
          if (fold) candidates.push_back({threads, vec, 1, items, false, true});
        }
      }
      continue;
    }
    // One row a CTA: up to the first power of two that covers the row's vectors (96 vectors: 128 threads).
    for (int threads = 64; threads <= 1024; threads *= 2) {
      if (threads > 64 && threads / 2 >= vectors) break;
      addRowPoints(candidates, threads, vec, 1, vectors);
    }
    // Several rows a CTA, 8, 16 or 32 threads a row, where such a row fits kMaxSubWarpRowItems vectors a thread.
    for (int rowThreads : {8, 16, 32}) {
      if (ceilDiv(vectors, rowThreads) > kMaxSubWarpRowItems) continue;
      for (int threads : {128, 256}) addRowPoints(candidates, threads, vec, threads / rowThreads, vectors);
    }
    // Few long rows: each split over a cluster of 2, 4 or 8 CTAs (Note [Rows split over a cluster]), at the widest
    // vec, streamed or held in registers where the slice fits kClusterRegisterElements.
    if (rows < kClusterRowsBelow && vectors >= kClusterMinVectors && vec == vecs.front()) {
      for (int cluster : {2, 4, 8}) {
        const int64_t slice = ceilDiv(vectors, cluster);
        for (int threads : {512, 1024}) {
          candidates.push_back({threads, vec, 1, 0, false, false, cluster});
          const int64_t items = ceilDiv(slice, threads);
          if (threads == 512 && items * vec <= kClusterRegisterElements) {
            candidates.push_back({threads, vec, 1, static_cast<int>(items), false, false, cluster});
          }
        }
      }
    }
  }
  std::vector<ChainKernelParams> space;
  for (const ChainKernelParams& p : candidates) {
    if (std::find(space.begin(), space.end(), p) == space.end() && serves(ir, p, rows, cols, layout)) {
      space.push_back(p);
    }
  }
  return space;
}

std::vector<ChainKernelParams> firstChainPoints(const std::vector<ChainKernelParams>& space, size_t count,
                                                const ChainIR& ir, bool eagerRounding) {
  const bool round = eagerRounding && atenRoundingApplies(ir);
  std::vector<ChainKernelParams> out(space.begin(), space.begin() + std::min(count, space.size()));
  for (ChainKernelParams& p : out) p.atenRounding = p.atenRounding || round;
  return out;
}

bool chainParamsRoundAsAsked(const ChainIR& ir, const ChainKernelParams& p, bool eagerRounding) {
  return !eagerRounding || p.atenRounding || !atenRoundingApplies(ir);
}

}  // namespace hotkernel::chain
