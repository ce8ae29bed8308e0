#include "hotkernel/kernels/SoftmaxFamily.h"

#include <algorithm>
#include <cstdint>
#include <limits>

#include "hotkernel/kernels/KernelSource.h"
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
// template): CTA sizes and items (16-byte vectors a thread).
constexpr int kSmemThreadChoices[] = {256, 512};
constexpr int kSmemItemChoices[] = {1, 2, 3, 4, 6, 8, 12, 16};
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

// Whether `p` is one of allParameterPoints(dtype).
bool isPoint(DType dtype, const SoftmaxParams& p) {
  if (!isPowerOfTwo(p.vec) || p.vec > maxVec(dtype)) return false;
  if (p.smem) {
    return p.cluster != 1 && contains(std::begin(kClusterChoices), std::end(kClusterChoices), p.cluster) &&
           p.rowsPerCta == 1 && p.vec == maxVec(dtype) &&
           contains(std::begin(kSmemThreadChoices), std::end(kSmemThreadChoices), p.threads) &&
           contains(std::begin(kSmemItemChoices), std::end(kSmemItemChoices), p.items);
  }
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

// Split-row points at width `vec` (sm_90+), best guess first: per cluster
// size, the two CTA sizes with the fewest items that cover a slice. Few rows:
// the largest clusters first (more SMs per row: Note [Decode clusters]); many
// rows: the smallest cluster that covers the row first (fewer barriers per
// byte), portable sizes only. Each point's shared-memory twin (Note
// [Shared-memory slices] in the template), where there is one: for many rows
// every twin comes first, the smallest stage first (more CTAs, so more rows,
// in flight per SM: bf16 [8192, 128256] 256 x 8 cluster 8 measured 1472 ->
// 1322 us on the H200); for few rows (a row per cluster, nothing to overlap)
// the best point's twin right after it, then the second point (its twin is
// one step of the search's smem axis away).
//
// Note [Decode clusters]
// A guess, to be measured like every point. Few rows of a long row (decode:
// bf16 [1, 128256] and [32, 128256]) are latency-bound: a launch, one DRAM
// round trip for the row, the CTA reduction and two cluster barriers. Served
// on the H200 by cluster 8 x 256 threads x 8 items (7.6 and 12.5 us; ATen 36
// and 38 us). Spreading the row over 16 CTAs (a non-portable cluster: its
// 16 CTAs are co-scheduled on one GPC) halves the bytes each CTA must bring
// in and each thread's items (16 x 256 threads x 4 items hold 131072
// elements), at the price of a wider barrier and 16 pairs to merge, and the
// launch fails on a GPU that cannot co-schedule it (the candidate is then
// dropped: Note [Function attributes before launch] in CudaKernelLauncher.h).
// Few rows therefore rank the largest cluster
// first, and, within a cluster, 8 items a thread as the best count instead
// of 4: a thread's vectors are all loads issued before the first use, and a
// smaller CTA (256 rather than 512 threads for the same slice) has a shorter
// reduction before the cluster barrier; the cluster-8 winner above is such a
// point. Many rows fill the GPU without wide clusters: no cluster 16 there.
// Since the pairs are pushed (Note [Pushed cluster pairs] in hk_prelude.cuh)
// and 16-bit slices rescaled (Note [Rescaled split softmax]), the H200 serves
// both shapes with 16 x 256 threads x 4 items, the space's first 16-CTA point
// (bf16 [1, 128256] 5.1 us, 6.98x eager; [32, 128256] 9.2 us, 4.15x:
// bench/results/h200-ops-2026-12-01-run3a.json). The times above are from
// before those changes (2026-11-30).
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
    for (size_t i = 0; i < scored.size() && i < 2; ++i) {
      SoftmaxParams twin = scored[i].p;
      twin.smem = true;
      registers.push_back(scored[i].p);
      interleaved.push_back(scored[i].p);
      if (SoftmaxFamily::guardParams(v, twin)) {
        staged.push_back(twin);
        if (i == 0) interleaved.push_back(twin);
      }
    }
  }
  if (fewRows) return interleaved;
  std::stable_sort(staged.begin(), staged.end(), [](const SoftmaxParams& a, const SoftmaxParams& b) {
    return a.threads * a.items < b.threads * b.items;
  });
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

const char* softmaxOpName(SoftmaxOp op) {
  return op == SoftmaxOp::LogSoftmax ? "aten::_log_softmax" : "aten::_softmax";
}

const char* softmaxFamilyName(SoftmaxOp op) {
  return op == SoftmaxOp::LogSoftmax ? "log_softmax_lastdim" : SoftmaxFamily::kName;
}

nlohmann::json SoftmaxParams::toJson() const {
  nlohmann::json j = {{"threads", threads}, {"vec", vec}, {"items", items}, {"rowsPerCta", rowsPerCta}};
  if (cluster != 1) j["cluster"] = cluster;
  if (smem) j["smem"] = true;
  return j;
}

SoftmaxParams SoftmaxParams::fromJson(const nlohmann::json& j) {
  HOTKERNEL_CHECK(j.is_object(), "softmax params must be a JSON object: ", j.dump());
  SoftmaxParams p;
  for (const char* key : {"threads", "vec", "items"}) {
    HOTKERNEL_CHECK(j.contains(key) && j.at(key).is_number_integer(), "softmax params need an integer '", key,
                    "': ", j.dump());
  }
  p.threads = j.at("threads").get<int>();
  p.vec = j.at("vec").get<int>();
  p.items = j.at("items").get<int>();
  if (j.contains("rowsPerCta")) {
    HOTKERNEL_CHECK(j.at("rowsPerCta").is_number_integer(), "softmax params need an integer 'rowsPerCta': ",
                    j.dump());
    p.rowsPerCta = j.at("rowsPerCta").get<int>();
  }
  if (j.contains("cluster")) {
    HOTKERNEL_CHECK(j.at("cluster").is_number_integer(), "softmax params need an integer 'cluster': ", j.dump());
    p.cluster = j.at("cluster").get<int>();
  }
  if (j.contains("smem")) {
    HOTKERNEL_CHECK(j.at("smem").is_boolean(), "softmax params need a boolean 'smem': ", j.dump());
    p.smem = j.at("smem").get<bool>();
  }
  return p;
}

std::string SoftmaxParams::describe() const {
  return "threads=" + std::to_string(threads) + " vec=" + std::to_string(vec) + " items=" + std::to_string(items) +
         (rowsPerCta != 1 ? " rowsPerCta=" + std::to_string(rowsPerCta) : std::string()) +
         (cluster != 1 ? " cluster=" + std::to_string(cluster) : std::string()) +
         (smem ? " (shared-memory-resident)" : items > 0 ? " (register-resident)" : " (streaming)");
}

bool SoftmaxFamily::guardVariant(const SoftmaxVariant& v) {
  bool knownDType = false;
  for (DType d : kAllDTypes) knownDType = knownDType || d == v.dtype;
  if (!knownDType || v.rows < 1 || v.cols < 1 || v.cols > kMaxCols) return false;
  // rows * cols elements must be addressable in bytes without overflow.
  const int64_t maxElements = std::numeric_limits<int64_t>::max() / static_cast<int64_t>(elementSize(v.dtype));
  return v.rows <= maxElements / v.cols;
}

bool SoftmaxFamily::guardParams(const SoftmaxVariant& v, const SoftmaxParams& p) {
  if (!guardVariant(v) || !isPoint(v.dtype, p)) return false;
  if (p.vec > 1 && v.cols % p.vec != 0) return false;
  if (p.items > 0 && v.cols > static_cast<int64_t>(p.cluster) * p.rowThreads() * p.vec * p.items) return false;
  return true;
}

size_t SoftmaxFamily::requiredAlignment(DType dtype, const SoftmaxParams& p) {
  return static_cast<size_t>(p.vec) * elementSize(dtype);
}

bool SoftmaxFamily::guardPointers(const void* in, const void* out, DType dtype, const SoftmaxParams& p) {
  if (in == nullptr || out == nullptr || p.vec < 1) return false;
  const uintptr_t align = requiredAlignment(dtype, p);
  return reinterpret_cast<uintptr_t>(in) % align == 0 && reinterpret_cast<uintptr_t>(out) % align == 0;
}

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
        if (isPoint(dtype, p)) out.push_back(p);
      }
    }
  }
  for (int rowThreads : kRowThreadChoices) {
    for (int vec = 1; vec <= maxVec(dtype); vec *= 2) {
      for (int items : kMultiRowItemChoices) {
        SoftmaxParams p{kMultiRowThreads, vec, items, kMultiRowThreads / rowThreads};
        if (isPoint(dtype, p)) out.push_back(p);
      }
    }
  }
  for (int cluster : kClusterChoices) {
    for (int threads : kClusterThreadChoices) {
      for (int vec = 1; vec <= maxVec(dtype); vec *= 2) {
        for (int items : kItemChoices) {
          SoftmaxParams p{threads, vec, items, 1, cluster};
          if (isPoint(dtype, p)) out.push_back(p);
        }
      }
    }
  }
  for (int cluster : kClusterChoices) {
    for (int threads : kSmemThreadChoices) {
      for (int items : kSmemItemChoices) {
        SoftmaxParams p{threads, maxVec(dtype), items, 1, cluster};
        p.smem = true;
        if (isPoint(dtype, p)) out.push_back(p);
      }
    }
  }
  // (The cluster loop above includes the split-streaming points: items 0.)
  return out;
}

std::string SoftmaxFamily::source() { return expandPrelude(kernelSource(kName).text); }

std::vector<std::string> SoftmaxFamily::compileOptions(DType dtype, const SoftmaxParams& p, SoftmaxOp op) {
  HOTKERNEL_CHECK(isPoint(dtype, p), "not a softmax parameter point for ", dtypeName(dtype), ": ", p.describe());
  std::vector<std::string> options = {
      "-DHK_DTYPE=" + std::to_string(static_cast<int>(dtype)), "-DHK_THREADS=" + std::to_string(p.threads),
      "-DHK_ROWS=" + std::to_string(p.rowsPerCta), "-DHK_VEC=" + std::to_string(p.vec),
      "-DHK_ITEMS=" + std::to_string(p.items)};
  if (p.cluster != 1) options.push_back("-DHK_CLUSTER=" + std::to_string(p.cluster));
  if (p.smem) options.push_back("-DHK_SMEM=1");
  if (op == SoftmaxOp::LogSoftmax) options.push_back("-DHK_LOG=1");
  return options;
}

LaunchGeometry SoftmaxFamily::launchGeometry(const SoftmaxVariant& v, const SoftmaxParams& p) {
  constexpr int64_t kMaxGridX = std::numeric_limits<int32_t>::max();  // cuLaunchKernel's limit for gridDim.x
  LaunchGeometry g;
  const int64_t cluster = std::max(p.cluster, 1);
  const int64_t ctas = p.rowsPerCta > 0 ? ceilDiv(v.rows, p.rowsPerCta) * cluster : v.rows * cluster;
  // A whole number of clusters (the kernel's clusters are `cluster` consecutive CTAs).
  g.gridX = static_cast<unsigned>(std::clamp<int64_t>(ctas, cluster, kMaxGridX / cluster * cluster));
  g.blockX = static_cast<unsigned>(p.threads);
  g.sharedBytes = p.smem ? static_cast<unsigned>(p.threads * p.items * p.vec * static_cast<int>(elementSize(v.dtype)))
                         : 0;
  return g;
}

double SoftmaxFamily::bytesMoved(const SoftmaxVariant& v) {
  return 2.0 * static_cast<double>(v.rows) * static_cast<double>(v.cols) * static_cast<double>(elementSize(v.dtype));
}

SoftmaxFamily::Bound SoftmaxFamily::logSoftmaxTolerance(DType dtype) {
  // Note [Log-softmax tolerance]
  switch (dtype) {
    case DType::Float32:
      return {4e-6, 1.0 / 4194304.0};
    case DType::Float16:
      return {4e-6, 1.0 / 1024.0};
    case DType::BFloat16:
      return {4e-6, 1.0 / 128.0};
  }
  HOTKERNEL_INTERNAL_ASSERT(false, "unknown DType ", static_cast<int>(dtype));
}

double SoftmaxFamily::tolerance(DType dtype, int64_t /*cols*/) {
  switch (dtype) {
    case DType::Float32:
      return 2e-6;  // Note [Softmax tolerance]
    case DType::Float16:
      return 1.0 / 2048.0;
    case DType::BFloat16:
      return 1.0 / 256.0;
  }
  HOTKERNEL_INTERNAL_ASSERT(false, "unknown DType ", static_cast<int>(dtype));
}

}  // namespace hotkernel::kernels
