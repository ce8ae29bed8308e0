// The softmax family's parameter space: the whitelist of points
// (allParameterPoints, the guard's) and the ranked points worth measuring for
// one variant (parameterSpace).

#include "SoftmaxSpace.h"

#include <algorithm>
#include <cstdint>

#include "FamilyMath.h"
#include "RowPoints.h"
#include "hotkernel/runtime/Check.h"

namespace hotkernel::kernels {
namespace {

using detail::ceilDiv;
using detail::contains;
using detail::isPowerOfTwo;
using detail::knownDType;
using detail::maxVec;

// The one-CTA-per-row axes (threads, items; several rows per CTA) are
// RowPoints.h's, shared with the norms.
using detail::itemsFactor;
using detail::kItemChoices;
using detail::kMultiRowItemChoices;
using detail::kMultiRowThreads;
using detail::kRowThreadChoices;
using detail::kThreadChoices;
constexpr int kMaxSpaceSize = 12;
// Split rows (Note [Split rows over a cluster] in the template): cluster sizes
// and CTA sizes. 8 is sm_90's portable maximum; 16 is non-portable (the
// launcher opts in: Note [Function attributes before launch] in
// CudaKernelLauncher.h) and offered for few rows only (Note [Decode clusters]).
constexpr int kClusterChoices[] = {2, 4, 8, 16};
constexpr int kPortableCluster = 8;
constexpr int kClusterThreadChoices[] = {256, 512, 1024};
// Slices staged in shared memory (Note [Shared-memory slices] in the
// template): CTA sizes and the items (16-byte vectors a thread) the family
// lists; a staged point takes any count up to kMaxSmemItems, since the fewest
// items that hold a slice decide how many CTAs share an SM (Note [Tight
// staged slices]).
constexpr int kSmemThreadChoices[] = {256, 512};
constexpr int kSmemItemChoices[] = {1, 2, 3, 4, 6, 8, 12, 16};
constexpr int kMaxSmemItems = 16;
// Slices streamed twice (Note [Split streaming] in the template): CTA sizes;
// 16-byte vectors only (the L2 hints need them).
constexpr int kSplitStreamThreadChoices[] = {512, 1024};
// Many rows at least this long (bytes) get split-streaming points first: at
// two 1024-thread CTAs an SM, one CTA a row keeps 264 rows in flight, 33 MB
// of 128 KB rows, beyond which a streaming row's second read misses the
// H200's 50 MB L2 (the lines written compete for it too).
constexpr int64_t kSplitStreamMinRowBytes = 128 * 1024;
// Fewer rows than this leave SMs idle with one CTA per row (H200: 132 SMs, two
// 1024-thread CTAs each): split rows over clusters instead.
constexpr int64_t kFewRows = 264;
// Clusters start to pay off for rows of at least this many elements.
constexpr int64_t kClusterMinCols = 4096;
// Split-row points the space starts with: few rows (Note [Decode clusters]), or rows no CTA holds.
constexpr size_t kFewRowsSplitHead = 8;
constexpr size_t kSplitHead = 8;

int registerElements(int threads) {
  return std::min(SoftmaxFamily::kMaxRegisterElements, SoftmaxFamily::kRegisterFileElements / threads);
}

}  // namespace

namespace detail {

bool isSoftmaxPoint(DType dtype, const SoftmaxParams& p) {
  if (!isPowerOfTwo(p.vec) || p.vec > maxVec(dtype)) return false;
  if (p.smem) {
    if (p.clusterRows != 1) {
      if (!contains(std::begin(SoftmaxFamily::kPipelinedClusterRows), std::end(SoftmaxFamily::kPipelinedClusterRows),
                    p.clusterRows)) {
        return false;
      }
    }
    return p.cluster != 1 && contains(std::begin(kClusterChoices), std::end(kClusterChoices), p.cluster) &&
           p.rowsPerCta == 1 && p.vec == maxVec(dtype) &&
           contains(std::begin(kSmemThreadChoices), std::end(kSmemThreadChoices), p.threads) && p.items >= 1 &&
           p.items <= kMaxSmemItems;
  }
  if (p.clusterRows != 1) return false;  // pipelining is of staged slices only
  if (p.cluster != 1 && p.items == 0) {
    return contains(std::begin(kClusterChoices), std::end(kClusterChoices), p.cluster) && p.rowsPerCta == 1 &&
           p.vec == maxVec(dtype) &&
           contains(std::begin(kSplitStreamThreadChoices), std::end(kSplitStreamThreadChoices), p.threads);
  }
  if (p.cluster != 1) {
    if (!contains(std::begin(kClusterChoices), std::end(kClusterChoices), p.cluster)) return false;
    if (p.rowsPerCta != 1 || p.items < 1) return false;
    if (!contains(std::begin(kClusterThreadChoices), std::end(kClusterThreadChoices), p.threads)) return false;
    if (!contains(std::begin(kItemChoices), std::end(kItemChoices), p.items)) return false;
  } else if (p.rowsPerCta == 1) {
    if (!contains(std::begin(kThreadChoices), std::end(kThreadChoices), p.threads)) return false;
    if (!contains(std::begin(kItemChoices), std::end(kItemChoices), p.items)) return false;
  } else {
    if (p.threads != kMultiRowThreads) return false;
    if (p.rowsPerCta < 1 || p.threads % p.rowsPerCta != 0) return false;
    if (!contains(std::begin(kRowThreadChoices), std::end(kRowThreadChoices), p.rowThreads())) return false;
    if (!contains(std::begin(kMultiRowItemChoices), std::end(kMultiRowItemChoices), p.items)) return false;
  }
  return p.items * p.vec <= registerElements(p.threads);
}

}  // namespace detail

namespace {

using detail::isSoftmaxPoint;

// Register-resident points at width `vec`, best guess first (Note [Register
// point ranking] in RowPoints.h).
std::vector<SoftmaxParams> registerPoints(const SoftmaxVariant& v, int vec) {
  return detail::rankRegisterPoints<SoftmaxParams>(
      v.cols / vec, vec, [&v](const SoftmaxParams& p) { return SoftmaxFamily::guardParams(v, p); });
}

// Several-rows-per-CTA points at width `vec` for rows of at most 32 x 8
// vectors, best guess first.
std::vector<SoftmaxParams> multiRowPoints(const SoftmaxVariant& v, int vec) {
  return detail::rankMultiRowPoints<SoftmaxParams>(
      v.rows, v.cols / vec, vec, [&v](const SoftmaxParams& p) { return SoftmaxFamily::guardParams(v, p); });
}

// Streaming points at width `vec` (Note [Streaming point widths] in RowPoints.h).
std::vector<SoftmaxParams> streamingPoints(const SoftmaxVariant& v, int vec) {
  return detail::streamingWidths<SoftmaxParams>(v.cols / vec, vec);
}

// Note [Tight staged slices]
// A staged point's shared memory is threads x items x 16 bytes, and an SM
// holds as many of its CTAs as fit in its shared memory. The register points'
// item counts (powers of two and a few between) round a slice up: float32
// rows of 400,000 columns in clusters of 16 are slices of 6,250 vectors, 16
// items of 512 threads, 128 KB a CTA and one CTA an SM, so the SM idles at
// every cluster barrier of its one row. The fewest items that hold the slice,
// 13, take 104 KB: two CTAs an SM, one row's barriers overlapping another's
// loads. So each staged point comes with its tight twin, and many rows of a
// length no portable cluster stages get the 16-CTA cluster's tight points.
// allParameterPoints lists the family's item counts only (every listed point
// is compiled by the tests); the tuner searches the space's points besides
// them, and the whitelist takes any staged count up to 16.
// tightStaged: `p` with the fewest items that hold a slice of `slice` vectors.
SoftmaxParams tightStaged(SoftmaxParams p, int64_t slice) {
  p.items = static_cast<int>(std::max<int64_t>(1, ceilDiv(slice, p.threads)));
  return p;
}

// Note [Pipelined slices]
// A staged point's CTA loads its slice, waits for all of it, reduces it,
// waits at the cluster's exchange and writes it out: its loads and its writes
// never overlap, and a cluster a row means the GPU starts a new cluster of
// 16 CTAs, which needs 16 free CTA slots on one GPC at once, for every row.
// Many rows of a length only a 16-CTA cluster stages (float32 [4096,
// 400000]) stay short of the copy bandwidth that way (docs/design/softmax.md
// has the measurements). A pipelined point serves clusterRows rows per
// cluster in turn, and its write pass refills the stage: a thread issues the
// copy of a slot's vector of the cluster's next row right after it stored
// that slot's output, so the next row's loads are in flight while this row
// is written, in the one stage (a second stage would halve the CTAs an SM
// holds: the tight float32 point's 104 KB fit twice an SM, 208 KB once), and
// 16 or 4 times fewer clusters are started. Each thread stages and reads only
// its own slots, so no barrier guards a refill. Its arithmetic is the staged
// point's: the outputs are the same bits. Offered for many rows, as the twin
// (16 rows a cluster) of each staged point (4 rows a cluster, a shorter
// tail, is one step of the search's variant axis away: FamilyPoint::variant
// carries clusterRows).
SoftmaxParams pipelined(SoftmaxParams p, int clusterRows) {
  p.clusterRows = clusterRows;
  return p;
}

// Split-row points at width `vec` (sm_90+), best guess first: per cluster
// size, the two CTA sizes with the fewest items that cover a slice. Few rows:
// the largest clusters first (more SMs per row: Note [Decode clusters]); many
// rows: the smallest cluster that covers the row first (fewer barriers per
// byte), portable sizes only. Each point's shared-memory twin (Note
// [Shared-memory slices] in the template) and its tight twin (Note [Tight
// staged slices]), where there is one: for many rows
// every twin comes first, the smallest stage first (more CTAs, so more rows,
// in flight per SM); for few rows (a row per cluster, nothing to overlap)
// the best point's twin right after it, then the second point (its twin is
// one step of the search's smem axis away).
//
// Note [Decode clusters]
// A guess, to be measured like every point. Few rows of a long row (decode:
// bf16 [1, 128256] and [32, 128256]) are latency-bound: a launch, one DRAM
// round trip for the row, the CTA reduction and the cluster's exchange of
// pairs. Spreading the row over 16 CTAs (a non-portable cluster: its
// 16 CTAs are co-scheduled on one GPC) halves the bytes each CTA must bring
// in and each thread's items (16 x 256 threads x 4 items hold 131072
// elements), at the price of a wider barrier and 16 pairs to merge, and the
// launch fails on a GPU that cannot co-schedule it (the candidate is then
// dropped: Note [Function attributes before launch] in CudaKernelLauncher.h).
// Few rows therefore rank the largest cluster
// first, and, within a cluster, 8 items a thread as the best count instead
// of 4: a thread's vectors are all loads issued before the first use, and a
// smaller CTA (256 rather than 512 threads for the same slice) has a shorter
// reduction before the cluster barrier. Many rows fill the GPU without wide
// clusters: no cluster 16 there (but the staged slices of rows no portable
// cluster stages: Note [Tight staged slices]). With the pairs pushed (Note [Pushed cluster
// pairs] in hk_prelude.cuh) and 16-bit slices rescaled (Note [Rescaled split
// softmax]), the space's first 16-CTA point (16 x 256 threads x 4 items) is
// what the H200 serves for both decode shapes (docs/design/softmax.md).
std::vector<SoftmaxParams> clusterPoints(const SoftmaxVariant& v, int vec) {
  struct Scored {
    SoftmaxParams p;
    double score;
  };
  const bool fewRows = v.rows < kFewRows;
  const int bestItems = fewRows ? 8 : 4;
  std::vector<SoftmaxParams> registers, staged, interleaved;
  std::vector<int> clusters;
  for (int cluster : kClusterChoices) {
    if (fewRows || cluster <= kPortableCluster) clusters.push_back(cluster);
  }
  if (fewRows) std::reverse(clusters.begin(), clusters.end());
  const int64_t nvec = v.cols / vec;
  for (int cluster : clusters) {
    const int64_t slice = ceilDiv(nvec, cluster);
    std::vector<Scored> scored;
    for (int threads : kClusterThreadChoices) {
      for (int items : kItemChoices) {
        if (items == 0 || static_cast<int64_t>(threads) * items < slice) continue;
        SoftmaxParams p{threads, vec, items, 1, cluster};
        if (!SoftmaxFamily::guardParams(v, p)) break;
        const double util = static_cast<double>(slice) / (static_cast<double>(threads) * items);
        if (util >= 0.5) scored.push_back({p, util * itemsFactor(items, bestItems)});
        break;
      }
    }
    std::stable_sort(scored.begin(), scored.end(), [](const Scored& a, const Scored& b) { return a.score > b.score; });
    bool interleavedStaged = false;  // few rows: the cluster's first staged point (and its tight twin) only
    for (size_t i = 0; i < scored.size() && i < 2; ++i) {
      SoftmaxParams twin = scored[i].p;
      twin.smem = true;
      registers.push_back(scored[i].p);
      interleaved.push_back(scored[i].p);
      const bool first = !interleavedStaged;
      if (SoftmaxFamily::guardParams(v, twin)) {
        staged.push_back(twin);
        if (first) interleaved.push_back(twin);
        interleavedStaged = true;
      }
      const SoftmaxParams tight = tightStaged(twin, slice);
      if (tight.items != twin.items && SoftmaxFamily::guardParams(v, tight)) {
        staged.push_back(tight);
        if (first) interleaved.push_back(tight);
        interleavedStaged = true;
      }
    }
  }
  // Many rows too long for any staged slice of a portable cluster: the
  // 16-CTA cluster's tight slices (Note [Tight staged slices]).
  if (!fewRows && staged.empty()) {
    const int64_t slice = ceilDiv(nvec, 16);
    for (int threads : kSmemThreadChoices) {
      SoftmaxParams p{threads, vec, 1, 1, 16};
      p.smem = true;
      p = tightStaged(p, slice);  // the items
      if (SoftmaxFamily::guardParams(v, p)) staged.push_back(p);
    }
  }
  if (fewRows) return interleaved;
  std::stable_sort(staged.begin(), staged.end(), [](const SoftmaxParams& a, const SoftmaxParams& b) {
    return a.threads * a.items < b.threads * b.items;
  });
  // Each staged point's pipelined twin right after it (Note [Pipelined slices]).
  for (size_t i = 0; i < staged.size(); ++i) {
    const SoftmaxParams twin = pipelined(staged[i], SoftmaxFamily::kPipelinedClusterRows[0]);
    if (SoftmaxFamily::guardParams(v, twin)) staged.insert(staged.begin() + static_cast<std::ptrdiff_t>(++i), twin);
  }
  staged.insert(staged.end(), registers.begin(), registers.end());
  // Long rows: the split-streaming points first (Note [Split streaming]), in
  // the order measured on the H200 (bf16 and fp32 [8192, 128256]): 512 x
  // cluster 4, 1024 x cluster 2, 512 x cluster 2.
  if (v.cols * static_cast<int64_t>(elementSize(v.dtype)) >= kSplitStreamMinRowBytes && vec == maxVec(v.dtype)) {
    const SoftmaxParams streamed[] = {{512, vec, 0, 1, 4}, {1024, vec, 0, 1, 2}, {512, vec, 0, 1, 2}};
    staged.insert(staged.begin(), std::begin(streamed), std::end(streamed));
  }
  return staged;
}

}  // namespace

std::vector<SoftmaxParams> SoftmaxFamily::parameterSpace(const SoftmaxVariant& v, int computeCapability) {
  std::vector<SoftmaxParams> out;
  if (!guardVariant(v)) return out;
  // Adds `p` unless the space already holds `limit` points (or `p`).
  auto add = [&](const SoftmaxParams& p, size_t limit) {
    if (out.size() < limit && guardParams(v, p) && std::find(out.begin(), out.end(), p) == out.end()) {
      out.push_back(p);
    }
  };
  const int vec = detail::widestVec(v.dtype, v.cols);
  const std::vector<SoftmaxParams> wide = registerPoints(v, vec);
  const std::vector<SoftmaxParams> multi = multiRowPoints(v, vec);
  const std::vector<SoftmaxParams> narrow = vec > 1 ? registerPoints(v, vec / 2) : std::vector<SoftmaxParams>{};
  const std::vector<SoftmaxParams> scalar = vec > 1 ? registerPoints(v, 1) : std::vector<SoftmaxParams>{};
  const std::vector<SoftmaxParams> streaming = streamingPoints(v, vec);
  // The two points every space holds: streaming, and vec == 1 (the fallback
  // for unaligned data). Both pass guardParams for any valid variant.
  const SoftmaxParams mustStreaming = streaming.front();
  const SoftmaxParams mustScalar =
      vec == 1 ? mustStreaming : (!scalar.empty() ? scalar.front() : streamingPoints(v, 1).front());
  const size_t headLimit = kMaxSpaceSize - 2;

  // Rows that one warp covers with a few vectors per thread: several rows per
  // CTA first (one warp per CTA leaves the SMs short of resident warps: bf16
  // [32768, 128] measured 0.54x of ATen with one row per CTA). Then the best
  // register-resident guesses at the widest vector, one at half width, the
  // streaming points and the vec == 1 fallback; the rest of the wide register
  // points fill up to kMaxSpaceSize.
  const size_t kHeadWide = 5;
  const bool shortRows = v.cols / vec <= 8 * 32;
  // Split rows (sm_90+) first for rows one CTA cannot hold in registers or
  // too few rows to fill the GPU; one or two to try otherwise, after the head.
  const std::vector<SoftmaxParams> split =
      computeCapability >= 90 && v.cols >= kClusterMinCols ? clusterPoints(v, vec) : std::vector<SoftmaxParams>{};
  const bool splitFirst = !split.empty() && (wide.empty() || v.rows < kFewRows);
  const size_t splitHead = v.rows < kFewRows ? kFewRowsSplitHead : kSplitHead;
  for (size_t i = 0; splitFirst && i < split.size() && i < splitHead; ++i) add(split[i], headLimit);
  for (size_t i = 0; shortRows && i < multi.size() && i < 3; ++i) add(multi[i], headLimit);
  for (size_t i = 0; i < wide.size() && i < kHeadWide; ++i) add(wide[i], headLimit);
  for (size_t i = 0; i < multi.size() && i < 2; ++i) add(multi[i], headLimit);
  for (size_t i = 0; !splitFirst && i < split.size() && i < 2; ++i) add(split[i], headLimit);
  if (!narrow.empty()) add(narrow.front(), headLimit);
  add(mustStreaming, kMaxSpaceSize);
  add(mustScalar, kMaxSpaceSize);
  for (const SoftmaxParams& p : streaming) add(p, kMaxSpaceSize);
  for (size_t i = kHeadWide; i < wide.size(); ++i) add(wide[i], kMaxSpaceSize);
  if (vec > 1) add(streamingPoints(v, 1).front(), kMaxSpaceSize);

  HOTKERNEL_INTERNAL_ASSERT(!out.empty(), "empty softmax parameter space for cols=", v.cols);
  return out;
}

std::vector<SoftmaxParams> SoftmaxFamily::allParameterPoints(DType dtype) {
  std::vector<SoftmaxParams> out;
  for (int threads : kThreadChoices) {
    for (int vec = 1; vec <= maxVec(dtype); vec *= 2) {
      for (int items : kItemChoices) {
        SoftmaxParams p{threads, vec, items, 1};
        if (isSoftmaxPoint(dtype, p)) out.push_back(p);
      }
    }
  }
  for (int rowThreads : kRowThreadChoices) {
    for (int vec = 1; vec <= maxVec(dtype); vec *= 2) {
      for (int items : kMultiRowItemChoices) {
        SoftmaxParams p{kMultiRowThreads, vec, items, kMultiRowThreads / rowThreads};
        if (isSoftmaxPoint(dtype, p)) out.push_back(p);
      }
    }
  }
  for (int cluster : kClusterChoices) {
    for (int threads : kClusterThreadChoices) {
      for (int vec = 1; vec <= maxVec(dtype); vec *= 2) {
        for (int items : kItemChoices) {
          SoftmaxParams p{threads, vec, items, 1, cluster};
          if (isSoftmaxPoint(dtype, p)) out.push_back(p);
        }
      }
    }
  }
  for (int cluster : kClusterChoices) {
    for (int threads : kSmemThreadChoices) {
      for (int items : kSmemItemChoices) {
        SoftmaxParams p{threads, maxVec(dtype), items, 1, cluster};
        p.smem = true;
        if (isSoftmaxPoint(dtype, p)) out.push_back(p);
      }
    }
  }
  // (The cluster loop above includes the split-streaming points: items 0.)
  return out;
}

}  // namespace hotkernel::kernels
