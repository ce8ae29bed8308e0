#pragma once
// The one-CTA-per-row parameter axes, their ranking and the streaming widths, shared by the
// families whose rows a CTA (or part of a warp) holds in registers:
// softmax_lastdim, rms_norm and layer_norm (internal to kernels/src).

#include <algorithm>
#include <cstdint>
#include <vector>

#include "FamilyMath.h"

namespace hotkernel::kernels::detail {

// The axes. Items are not only powers of two so that rows like 24576
// (3 x 8192) fill the registers without a wasted third.
inline constexpr int kThreadChoices[] = {32, 64, 128, 256, 512, 1024};
inline constexpr int kItemChoices[] = {0, 1, 2, 3, 4, 6, 8, 12, 16};
// Several rows per CTA (short rows): the CTA size, threads per row, register-resident items.
inline constexpr int kMultiRowThreads = 128;
inline constexpr int kRowThreadChoices[] = {4, 8, 16, 32};
inline constexpr int kMultiRowItemChoices[] = {1, 2, 4, 8};
// Below this many rows a multi-row CTA has nothing to gain over one warp per CTA.
inline constexpr int64_t kMultiRowMinRows = 256;

// Note [Register point ranking]
// A guess only: the optimizer measures every point. Per thread count, the
// fewest items that cover the row; then rank by the share of lanes that hold
// an element (idle lanes cost registers and occupancy, not bandwidth), times
// 0.9 per factor of two that items is away from 4 (2 for several rows per
// CTA), and 0.9 for CTAs under 128 threads on rows long enough to fill more.
// Measured for softmax on H200, bf16: [16384, 8192] ran 141 us at 256 threads
// x 4 items, 147-152 us at 8 or 2 items, 171-236 us at 16 or 1; [4096, 32000]
// 191 us at 4 items, 214 at 8, 238 at 16; [32768, 128] 8.7 us at 2 items per
// row, 9.6 at 1 or 4. The norms (one read, one write a row, also bound by
// memory) use the same ranking.
inline double itemsFactor(int items, int best) {
  double factor = 1.0;
  for (int i = items; i < best; i *= 2) factor *= 0.9;
  for (int i = best; i < items; i *= 2) factor *= 0.9;
  return factor;
}

// Register-resident points, one CTA a row, for rows of `nvec` vectors of
// width `vec`, best guess first (Note [Register point ranking]). `fits(p)`
// is the family's guard for the variant; Params is built as
// {threads, vec, items}.
template <typename Params, typename Fits>
std::vector<Params> rankRegisterPoints(int64_t nvec, int vec, Fits fits) {
  struct Scored {
    Params p;
    double score;
  };
  std::vector<Scored> scored;
  for (int threads : kThreadChoices) {
    const int64_t need = ceilDiv(nvec, threads);
    for (int items : kItemChoices) {
      if (items == 0 || items < need) continue;
      const Params p{threads, vec, items};
      if (!fits(p)) break;  // larger items only need more registers
      const double util = static_cast<double>(nvec) / (static_cast<double>(threads) * items);
      if (util < 0.25 && threads > 32) break;  // most lanes idle: a smaller CTA does the same
      double score = util * itemsFactor(items, 4);
      if (threads < 128 && nvec >= 4 * 128) score *= 0.9;
      scored.push_back({p, score});
      break;  // the fewest items for this thread count
    }
  }
  std::stable_sort(scored.begin(), scored.end(), [](const Scored& a, const Scored& b) {
    if (a.score != b.score) return a.score > b.score;
    return a.p.threads > b.p.threads;
  });
  std::vector<Params> out;
  for (const Scored& s : scored) out.push_back(s.p);
  return out;
}

// Several-rows-per-CTA points for `rows` rows of `nvec` vectors of width
// `vec`, best guess first: per threads-per-row, the fewest items that cover
// the row, ranked like rankRegisterPoints; those with at least half their
// lanes busy (and the best one). None below kMultiRowMinRows rows. Params is
// built as {kMultiRowThreads, vec, items, rowsPerCta}.
template <typename Params, typename Fits>
std::vector<Params> rankMultiRowPoints(int64_t rows, int64_t nvec, int vec, Fits fits) {
  std::vector<Params> out;
  if (rows < kMultiRowMinRows) return out;
  struct Scored {
    int rowThreads, items;
    double util, score;
  };
  std::vector<Scored> scored;
  for (int rowThreads : kRowThreadChoices) {
    for (int items : kMultiRowItemChoices) {
      if (static_cast<int64_t>(rowThreads) * items < nvec) continue;
      if (!fits(Params{kMultiRowThreads, vec, items, kMultiRowThreads / rowThreads})) break;
      const double util = static_cast<double>(nvec) / (static_cast<double>(rowThreads) * items);
      scored.push_back({rowThreads, items, util, util * itemsFactor(items, 2)});
      break;
    }
  }
  std::stable_sort(scored.begin(), scored.end(), [](const Scored& a, const Scored& b) {
    if (a.score != b.score) return a.score > b.score;
    return a.rowThreads > b.rowThreads;
  });
  for (const Scored& c : scored) {
    if (c.util >= 0.5 || &c == &scored.front()) {
      out.push_back(Params{kMultiRowThreads, vec, c.items, kMultiRowThreads / c.rowThreads});
    }
  }
  return out;
}

// Note [Streaming point widths]
// The streaming points a space holds at width `vec`, in this order: for rows
// of 4096 vectors or more, 1024 and 512 threads; else the narrowest CTA whose
// threads load at most 4 vectors each, then the CTAs half and twice as wide
// (within 32..1024, the wider one only while every thread gets a vector).
// The neighbours are there because the best width sits on either side of that
// guess, and the search reaches a point outside the seeds only by chance
// (docs/design/softmax.md has shapes where each neighbour is the best).
template <typename Params>
std::vector<Params> streamingWidths(int64_t nvec, int vec) {
  std::vector<Params> out;
  if (nvec >= 4 * 1024) {
    out.push_back({1024, vec, 0});
    out.push_back({512, vec, 0});
    return out;
  }
  int threads = 32;
  while (threads < 1024 && threads * 4 < nvec) threads *= 2;
  out.push_back({threads, vec, 0});
  if (threads > 32) out.push_back({threads / 2, vec, 0});
  if (threads < 1024 && threads * 2 <= nvec) out.push_back({threads * 2, vec, 0});
  return out;
}

}  // namespace hotkernel::kernels::detail
