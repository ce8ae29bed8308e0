#include "hotkernel/kernels/NormCommon.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>

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
using detail::widestVec;

// The axes are softmax_lastdim's (RowPoints.h).
using detail::kItemChoices;
using detail::kMultiRowItemChoices;
using detail::kMultiRowThreads;
using detail::kRowThreadChoices;
using detail::kThreadChoices;
constexpr size_t kMaxSpaceSize = 12;
// Split rows (Note [Split norm rows over a cluster] in kernels/norm/rms_norm.cu): the cluster sizes
// (8: sm_90's portable maximum; 16: non-portable, the launcher opts in), the CTA sizes of register
// slices and of streamed slices (16-byte vectors only, as softmax_lastdim's split streaming).
constexpr int kClusterChoices[] = {2, 4, 8, 16};
constexpr int kClusterThreadChoices[] = {256, 512, 1024};
constexpr int kSplitStreamThreadChoices[] = {512, 1024};
// Split rows over a cooperative grid (Note [Split norm rows over a cooperative grid] in
// kernels/norm/rms_norm.cu): CTAs a row, streamed slices of 16-byte vectors at 512 or 1024 threads.
constexpr int kGridSplitChoices[] = {4, 8, 16, 32, 64};
constexpr int kMaxGridSplit = kGridSplitChoices[std::size(kGridSplitChoices) - 1];
// Note [Norm split-row points]
// A guess, to be measured like every point. Fewer rows than kFewRows leave SMs
// idle with a CTA a row (H200: 132 SMs, two 1024-thread CTAs each), and rows
// of kNormClusterMinCols elements or more (a caller's splitMinCols) are long enough for a slice per CTA to
// pay for the cluster's exchange of sums: the space then starts with up to
// kSplitHead split-row points. The bound sits far above the hidden sizes of
// decode (4096-16384 columns, rows one CTA reads in a few microseconds),
// whose spaces keep their one-CTA points. Cluster sizes are ranked so that the grid
// (rows * cluster CTAs) comes nearest to one wave (kClusterTargetCtas) with
// the fewest CTAs a row: the smallest cluster reaching it first, then the
// larger ones, then the smaller; per cluster size, the register slice with
// the fewest items at 1024 and 512 threads where the slice fits in
// registers, then the streamed slice at 1024 and 512 threads.
//
// Grid-split points serve rows too few for clusters to fill the GPU (rows *
// 16 CTAs below a wave): a cluster's CTAs share one GPC, and 16 is the widest
// cluster, so 4 rows reach at most 64 SMs. A cooperative grid spreads a row
// over any number of SMs: per CTA size, the split that puts the most CTAs
// within one co-resident wave (kGridWaveCtas: one CTA an SM, as the
// templates' launch bounds let a CTA of 512 threads take the registers of two)
// first, then half of it. They lead the space where clusters
// cannot fill a wave and the rows are long enough (kGridLeadMinCols) for a
// slice a CTA to outweigh the grid's barrier, and follow the cluster points
// otherwise (at least kSplitMinorShare of the head for the second kind).
constexpr int64_t kFewRows = 264;
constexpr int64_t kClusterTargetCtas = 120;
constexpr int64_t kGridWaveCtas = 128;
constexpr int64_t kGridLeadMinCols = int64_t{1} << 20;
constexpr size_t kSplitHead = 6;
constexpr size_t kSplitMinorShare = 2;

struct Shape {
  DType dtype;
  int64_t rows, cols;
};

bool guardParams(const Shape& s, const NormParams& p) {
  return detail::normGuardParams(s.dtype, s.rows, s.cols, p);
}

// The split-row points for `s` at width `vec`, best guess first (Note [Norm split-row points]).
std::vector<NormParams> splitRowPoints(const Shape& s, int vec) {
  std::vector<int> clusters(std::begin(kClusterChoices), std::end(kClusterChoices));
  auto reaches = [&s](int cluster) { return s.rows * cluster >= kClusterTargetCtas; };
  std::stable_sort(clusters.begin(), clusters.end(), [&](int a, int b) {
    if (reaches(a) != reaches(b)) return reaches(a);
    return reaches(a) ? a < b : a > b;
  });
  const int64_t nvec = s.cols / vec;
  std::vector<NormParams> out;
  for (int cluster : clusters) {
    const int64_t slice = ceilDiv(nvec, cluster);
    for (int threads : {1024, 512}) {
      for (int items : kItemChoices) {
        if (items == 0 || static_cast<int64_t>(threads) * items < slice) continue;
        const NormParams p{threads, vec, items, 1, cluster};
        if (detail::normGuardParams(s.dtype, s.rows, s.cols, p)) out.push_back(p);
        break;  // the fewest items for this CTA size
      }
    }
    for (int threads : {1024, 512}) {
      const NormParams p{threads, vec, 0, 1, cluster};
      if (detail::normGuardParams(s.dtype, s.rows, s.cols, p)) out.push_back(p);
    }
  }
  return out;
}

// The grid-split points for `s` at width `vec` (the dtype's widest), best guess first (Note [Norm
// split-row points]).
std::vector<NormParams> gridSplitPoints(const Shape& s, int vec) {
  int split = 0;  // the widest split whose grid fits one wave
  for (int c : kGridSplitChoices) {
    if (s.rows * c <= kGridWaveCtas) split = c;
  }
  if (split == 0) return {};
  std::vector<NormParams> best, halves;
  for (int threads : {1024, 512}) {
    const NormParams p{threads, vec, 0, 1, 1, split};
    const NormParams half{threads, vec, 0, 1, 1, split / 2};
    if (detail::normGuardParams(s.dtype, s.rows, s.cols, p)) best.push_back(p);
    if (detail::normGuardParams(s.dtype, s.rows, s.cols, half)) halves.push_back(half);
  }
  best.insert(best.end(), halves.begin(), halves.end());
  return best;
}

// Note [Norm parameter ranking]
// Softmax_lastdim's (Note [Register point ranking] in RowPoints.h): both are
// one-read, one-write row kernels bound by memory. Not measured separately
// for the norms; the optimizer measures every point anyway.
std::vector<NormParams> registerPoints(const Shape& s, int vec) {
  return detail::rankRegisterPoints<NormParams>(s.cols / vec, vec,
                                                [&s](const NormParams& p) { return guardParams(s, p); });
}

std::vector<NormParams> multiRowPoints(const Shape& s, int vec) {
  return detail::rankMultiRowPoints<NormParams>(s.rows, s.cols / vec, vec,
                                                [&s](const NormParams& p) { return guardParams(s, p); });
}

// Note [Streaming point widths] in RowPoints.h.
std::vector<NormParams> streamingPoints(const Shape& s, int vec) {
  return detail::streamingWidths<NormParams>(s.cols / vec, vec);
}

// NaN meets NaN, infinities must be equal, finite values within `bound`.
bool within(double got, double ref, double bound) {
  if (std::isnan(ref)) return std::isnan(got);
  if (std::isnan(got)) return false;
  if (std::isinf(ref) || std::isinf(got)) return got == ref;
  return std::fabs(got - ref) <= bound;
}

}  // namespace

nlohmann::json NormParams::toJson() const {
  nlohmann::json j = {{"threads", threads}, {"vec", vec}, {"items", items}, {"rowsPerCta", rowsPerCta}};
  if (cluster != 1) j["cluster"] = cluster;
  if (split != 1) j["split"] = split;
  return j;
}

NormParams NormParams::fromJson(const nlohmann::json& j) {
  HOTKERNEL_CHECK(j.is_object(), "norm params must be a JSON object: ", j.dump());
  NormParams p;
  for (const char* key : {"threads", "vec", "items"}) {
    HOTKERNEL_CHECK(j.contains(key) && j.at(key).is_number_integer(), "norm params need an integer '", key,
                    "': ", j.dump());
  }
  p.threads = j.at("threads").get<int>();
  p.vec = j.at("vec").get<int>();
  p.items = j.at("items").get<int>();
  if (j.contains("rowsPerCta")) {
    HOTKERNEL_CHECK(j.at("rowsPerCta").is_number_integer(), "norm params need an integer 'rowsPerCta': ", j.dump());
    p.rowsPerCta = j.at("rowsPerCta").get<int>();
  }
  if (j.contains("cluster")) {
    HOTKERNEL_CHECK(j.at("cluster").is_number_integer(), "norm params need an integer 'cluster': ", j.dump());
    p.cluster = j.at("cluster").get<int>();
  }
  if (j.contains("split")) {
    HOTKERNEL_CHECK(j.at("split").is_number_integer(), "norm params need an integer 'split': ", j.dump());
    p.split = j.at("split").get<int>();
  }
  return p;
}

std::string NormParams::describe() const {
  return "threads=" + std::to_string(threads) + " vec=" + std::to_string(vec) + " items=" + std::to_string(items) +
         (rowsPerCta != 1 ? " rowsPerCta=" + std::to_string(rowsPerCta) : std::string()) +
         (cluster != 1 ? " cluster=" + std::to_string(cluster) : std::string()) +
         (split != 1 ? " split=" + std::to_string(split) : std::string()) +
         (items > 0 ? " (register-resident)" : " (streaming)");
}

bool NormTolerance::outputWithin(double got, double ref) const {
  return within(got, ref, outAbs + outRel * std::fabs(ref));
}

bool NormTolerance::rstdWithin(double got, double ref) const { return within(got, ref, statRel * std::fabs(ref)); }

bool NormTolerance::meanWithin(double got, double ref, double refRstd) const {
  const double scale = refRstd > 0 && std::isfinite(refRstd) ? 1.0 / refRstd : 0.0;
  return within(got, ref, statRel * (std::fabs(ref) + scale));
}

namespace detail {

bool normIsPoint(DType dtype, const NormParams& p) {
  if (!knownDType(dtype) || !isPowerOfTwo(p.vec) || p.vec > maxVec(dtype)) return false;
  if (p.split != 1) {
    return p.cluster == 1 && p.rowsPerCta == 1 && p.items == 0 && p.vec == maxVec(dtype) &&
           contains(std::begin(kSplitStreamThreadChoices), std::end(kSplitStreamThreadChoices), p.threads) &&
           contains(std::begin(kGridSplitChoices), std::end(kGridSplitChoices), p.split);
  }
  if (p.cluster != 1) {
    if (p.rowsPerCta != 1) return false;
    if (!contains(std::begin(kClusterChoices), std::end(kClusterChoices), p.cluster)) return false;
    if (p.items == 0) {
      return p.vec == maxVec(dtype) &&
             contains(std::begin(kSplitStreamThreadChoices), std::end(kSplitStreamThreadChoices), p.threads);
    }
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
  return p.items * p.vec <= std::min(kNormMaxRegisterValues, kNormRegisterFile / p.threads);
}

std::vector<NormParams> normAllPoints(DType dtype) {
  std::vector<NormParams> out;
  for (int threads : kThreadChoices) {
    for (int vec = 1; vec <= maxVec(dtype); vec *= 2) {
      for (int items : kItemChoices) {
        NormParams p{threads, vec, items, 1};
        if (normIsPoint(dtype, p)) out.push_back(p);
      }
    }
  }
  for (int rowThreads : kRowThreadChoices) {
    for (int vec = 1; vec <= maxVec(dtype); vec *= 2) {
      for (int items : kMultiRowItemChoices) {
        NormParams p{kMultiRowThreads, vec, items, kMultiRowThreads / rowThreads};
        if (normIsPoint(dtype, p)) out.push_back(p);
      }
    }
  }
  for (int cluster : kClusterChoices) {
    for (int threads : kThreadChoices) {
      for (int vec = 1; vec <= maxVec(dtype); vec *= 2) {
        for (int items : kItemChoices) {
          NormParams p{threads, vec, items, 1, cluster};
          if (normIsPoint(dtype, p)) out.push_back(p);
        }
      }
    }
  }
  for (int split : kGridSplitChoices) {
    for (int threads : kSplitStreamThreadChoices) {
      const NormParams p{threads, maxVec(dtype), 0, 1, 1, split};
      if (normIsPoint(dtype, p)) out.push_back(p);
    }
  }
  return out;
}

bool normGuardShape(DType dtype, int64_t rows, int64_t cols) {
  // rows <= kNormMaxCtas: one CTA a row group covers them (Note [One row group a CTA] in kernels/norm/rms_norm.cu).
  if (!knownDType(dtype) || rows < 1 || rows > kNormMaxCtas || cols < 1 || cols > kNormMaxCols) return false;
  // rows * cols elements must be addressable in bytes without overflow.
  const int64_t maxElements = std::numeric_limits<int64_t>::max() / static_cast<int64_t>(elementSize(dtype));
  return rows <= maxElements / cols;
}

bool normGuardParams(DType dtype, int64_t rows, int64_t cols, const NormParams& p) {
  if (!normGuardShape(dtype, rows, cols) || !normIsPoint(dtype, p)) return false;
  if (p.vec > 1 && cols % p.vec != 0) return false;
  // A cluster's CTA holds ceil(vectors / cluster) of them: within threads * items when cols is within this.
  if (p.items > 0 && cols > static_cast<int64_t>(p.cluster) * p.rowThreads() * p.vec * p.items) return false;
  if (p.cluster > 1 && rows > kNormMaxCtas / p.cluster) return false;  // the grid is rows * cluster CTAs
  if (p.split > 1 && rows > kNormMaxGridCtas / p.split) return false;  // ... rows * split CTAs
  return true;
}

std::vector<NormParams> normParameterSpace(DType dtype, int64_t rows, int64_t cols, int computeCapability,
                                           int64_t splitMinCols) {
  std::vector<NormParams> out;
  if (!normGuardShape(dtype, rows, cols)) return out;
  const Shape s{dtype, rows, cols};
  auto add = [&](const NormParams& p, size_t limit) {
    if (out.size() < limit && normGuardParams(dtype, rows, cols, p) &&
        std::find(out.begin(), out.end(), p) == out.end()) {
      out.push_back(p);
    }
  };
  const int vec = widestVec(dtype, cols);
  if (rows < kFewRows && cols >= splitMinCols) {  // Note [Norm split-row points]
    const std::vector<NormParams> cluster =
        computeCapability >= 90 ? splitRowPoints(s, vec) : std::vector<NormParams>{};
    const std::vector<NormParams> gridded =
        computeCapability >= 70 && vec == maxVec(dtype) ? gridSplitPoints(s, vec) : std::vector<NormParams>{};
    const bool gridFirst =
        rows * kClusterChoices[std::size(kClusterChoices) - 1] < kClusterTargetCtas && cols >= kGridLeadMinCols;
    const std::vector<NormParams>& lead = gridFirst ? gridded : cluster;
    const std::vector<NormParams>& minor = gridFirst ? cluster : gridded;
    const size_t leadShare = minor.empty() ? kSplitHead : kSplitHead - kSplitMinorShare;
    for (const NormParams& p : lead) add(p, leadShare);
    for (const NormParams& p : minor) add(p, kSplitHead);
    for (const NormParams& p : lead) add(p, kSplitHead);
  }
  const std::vector<NormParams> wide = registerPoints(s, vec);
  const std::vector<NormParams> multi = multiRowPoints(s, vec);
  const std::vector<NormParams> narrow = vec > 1 ? registerPoints(s, vec / 2) : std::vector<NormParams>{};
  const std::vector<NormParams> scalar = vec > 1 ? registerPoints(s, 1) : std::vector<NormParams>{};
  const std::vector<NormParams> streaming = streamingPoints(s, vec);
  // The two points every space holds: streaming, and vec == 1 (the fallback
  // for unaligned data). Both pass guardParams for any valid variant.
  const NormParams mustStreaming = streaming.front();
  const NormParams mustScalar =
      vec == 1 ? mustStreaming : (!scalar.empty() ? scalar.front() : streamingPoints(s, 1).front());
  const size_t headLimit = kMaxSpaceSize - 2;

  // As softmax_lastdim's space: several rows per CTA first for rows a few
  // vectors per lane of one warp cover; then the best register-resident
  // guesses at the widest vector, one at half width, the streaming points,
  // the vec == 1 fallback; the rest of the wide register points fill up.
  const size_t kHeadWide = 5;
  const bool shortRows = cols / vec <= 8 * 32;
  for (size_t i = 0; shortRows && i < multi.size() && i < 3; ++i) add(multi[i], headLimit);
  for (size_t i = 0; i < wide.size() && i < kHeadWide; ++i) add(wide[i], headLimit);
  for (size_t i = 0; i < multi.size() && i < 2; ++i) add(multi[i], headLimit);
  if (!narrow.empty()) add(narrow.front(), headLimit);
  add(mustStreaming, kMaxSpaceSize);
  add(mustScalar, kMaxSpaceSize);
  for (const NormParams& p : streaming) add(p, kMaxSpaceSize);
  for (size_t i = kHeadWide; i < wide.size(); ++i) add(wide[i], kMaxSpaceSize);
  if (vec > 1) add(streamingPoints(s, 1).front(), kMaxSpaceSize);

  HOTKERNEL_INTERNAL_ASSERT(!out.empty(), "empty norm parameter space for cols=", cols);
  return out;
}

LaunchGeometry normLaunchGeometry(int64_t rows, const NormParams& p) {
  HOTKERNEL_INTERNAL_ASSERT(p.rowsPerCta >= 1 && p.cluster >= 1 && rows >= 1, "norm launch for ", rows, " rows of ",
                            p.describe());
  // Split rows: one cluster of `cluster` (a run of `split`) consecutive CTAs a row.
  const int64_t ctas = p.cluster > 1 ? rows * p.cluster : p.split > 1 ? rows * p.split : ceilDiv(rows, p.rowsPerCta);
  // The kernels serve one row group a CTA: a grid that does not cover the rows would skip some.
  HOTKERNEL_INTERNAL_ASSERT(ctas <= kNormMaxCtas, "norm launch of ", ctas, " CTAs (the shape guard refuses it)");
  LaunchGeometry g;
  g.gridX = static_cast<unsigned>(ctas);
  g.blockX = static_cast<unsigned>(p.threads);
  g.sharedBytes = 0;
  g.cooperative = p.split > 1;  // Note [Cooperative launches] in runtime/CudaKernelLauncher.h
  return g;
}

int64_t normWorkspaceFloats(int64_t rows, const NormParams& p, int valuesPerCta) {
  return p.split > 1 ? rows * p.split * valuesPerCta + 1 : 0;
}

int64_t normMaxWorkspaceFloats(int64_t rows, int valuesPerCta) {
  return std::min(rows * kMaxGridSplit, kNormMaxGridCtas) * valuesPerCta + 1;
}

std::vector<std::string> normCompileOptions(DType dtype, const NormParams& p) {
  std::vector<std::string> options = {
      "-DHK_DTYPE=" + std::to_string(static_cast<int>(dtype)), "-DHK_THREADS=" + std::to_string(p.threads),
      "-DHK_ROWS=" + std::to_string(p.rowsPerCta), "-DHK_VEC=" + std::to_string(p.vec),
      "-DHK_ITEMS=" + std::to_string(p.items)};
  if (p.cluster != 1) options.push_back("-DHK_CLUSTER=" + std::to_string(p.cluster));
  if (p.split != 1) options.push_back("-DHK_SPLIT=" + std::to_string(p.split));
  return options;
}

void normAppendCols(std::vector<std::string>& options, int64_t cols) {
  HOTKERNEL_CHECK(cols >= 0 && cols <= kNormMaxCols, "norm column count ", cols, " out of range");
  if (cols > 0) options.push_back("-DHK_COLS=" + std::to_string(cols) + "LL");
}

bool normAligned(const void* ptr, size_t alignment) {
  return ptr != nullptr && alignment > 0 && reinterpret_cast<uintptr_t>(ptr) % alignment == 0;
}

}  // namespace detail
}  // namespace hotkernel::kernels
