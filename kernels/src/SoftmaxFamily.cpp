#include "hotkernel/kernels/SoftmaxFamily.h"

#include <algorithm>
#include <cmath>
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
// clusters: no cluster 16 there. With the pairs pushed (Note [Pushed cluster
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

namespace {

// The relative difference of two float32 sums of a row's exponentials in
// different orders (Note [Rms norm tolerance]'s s(cols), the same chains).
double sumNoise(int64_t cols) {
  return 4e-6 * std::max(1.0, std::sqrt(static_cast<double>(std::max<int64_t>(cols, 1)) / 16384.0));
}

}  // namespace

// Note [Softmax bound]
// The issue with an absolute bound alone: outputs are probabilities, most of
// them far below 2^-8 on long rows, so a bfloat16 bound of 2^-8 let a kernel
// off by 1% on every element, or one writing 0 for every probability below
// 2^-8, pass. The bound is relative, with an absolute floor for what rounds
// absolutely:
//  - 16-bit types: both sides compute in float32 and round once. The float32
//    values differ by the sum's order (s(cols) relative, Note [Softmax
//    tolerance]) and, for the family, by ex2.approx and one fma (Note [Lean
//    softmax]: below 2^-21 relative where the result is above 2^-126), far
//    below one 16-bit step, so the rounded outputs are equal or one step
//    apart: at most 1 ulp, which is at most 2^-7 (bfloat16) or 2^-10
//    (float16) of |ref|. Absolute floor: float16's subnormal step 2^-24 (a
//    result below 2^-14 rounds absolutely); bfloat16 2^-126, where the
//    family's ex2.approx.ftz flushes to 0 what ATen keeps as a subnormal.
//  - float32: the terms are ATen's bit for bit (the same expf), the sum's
//    order differs (s(cols) relative each way: 2 s) and 1/sum times the term
//    against ATen's division adds at most 2 roundings (2^-22). Absolute
//    floor 2^-126: results in the subnormal range round absolutely.
// A 1% error fails every dtype (2^-7 is 0.78%); a zero where the reference
// is above the floor fails.
SoftmaxFamily::Bound SoftmaxFamily::softmaxBound(DType dtype, int64_t cols) {
  switch (dtype) {
    case DType::Float32:
      return {std::ldexp(1.0, -126), 2.0 * sumNoise(cols) + std::ldexp(1.0, -22)};
    case DType::Float16:
      return {std::ldexp(1.0, -24), std::ldexp(1.0, -10)};
    case DType::BFloat16:
      return {std::ldexp(1.0, -126), std::ldexp(1.0, -7)};
  }
  HOTKERNEL_INTERNAL_ASSERT(false, "unknown DType ", static_cast<int>(dtype));
}

// Note [Softmax row sums]
// Against exact probabilities p (float64, sum 1), a correct kernel's output
// o_c = round(p_c (1 + e_c)) with |e_c| the float32 error: the sum's order
// (s(cols); 2 s for margin), the exponential and the scaling (a few float32
// roundings; for 16-bit outputs ex2.approx's argument error is |log2 p_c|
// 2^-24 relative, which summed with weights p_c is at most the row's
// entropy in bits (<= 30) times 2^-24: 2^-19 covers both). Rounding to the
// output type moves each o_c by at most half a step: 2^-(m+1) of it for a
// normal result (m = 7 bfloat16, 10 float16, 23 float32), at most `perSmall`
// below `smallBelow` (float16: half its subnormal step 2^-25 below 2^-14;
// bfloat16: 2^-126 below 2^-126, the family's flush to zero; float32: 2^-150
// below 2^-126). Summed over the row: |sum o - 1| <= relative + (count of
// small p) perSmall. Half a step, not the elementwise bound's full step: a
// kernel biased by up to one step on every element passes elementwise and
// fails here.
SoftmaxFamily::RowSumBound SoftmaxFamily::rowSumBound(DType dtype, int64_t cols) {
  const double arithmetic = 2.0 * sumNoise(cols) + std::ldexp(1.0, -19);
  switch (dtype) {
    case DType::Float32:
      return {arithmetic + std::ldexp(1.0, -24), std::ldexp(1.0, -126), std::ldexp(1.0, -150)};
    case DType::Float16:
      return {arithmetic + std::ldexp(1.0, -11), std::ldexp(1.0, -14), std::ldexp(1.0, -25)};
    case DType::BFloat16:
      return {arithmetic + std::ldexp(1.0, -8), std::ldexp(1.0, -126), std::ldexp(1.0, -126)};
  }
  HOTKERNEL_INTERNAL_ASSERT(false, "unknown DType ", static_cast<int>(dtype));
}

// Note [Log-softmax logsumexp]
// For exact l_c = log p_c, logsumexp(l) = 0. A correct kernel's o_c = l_c +
// d_c with |d_c| <= a + r |l_c|: a the float32 error of log(sum) (s(cols)
// from the sum's order plus logf's ulp; doubled), r the rounding to the
// output type (half a step: 2^-8, 2^-11, 2^-24, plus 2^-23 for the float32
// subtraction). logsumexp(o) = log sum p_c e^(d_c) ~ sum p_c d_c, so
// |logsumexp(o)| <= a + r H with H = sum p_c |l_c| the row's entropy in nats
// (<= log cols); twice that bounds the second-order terms (e^d - 1 - d) for
// the elements with |d| < 1, and those with larger d have p_c < e^-(1/r).
SoftmaxFamily::Bound SoftmaxFamily::logSumExpBound(DType dtype, int64_t cols) {
  const double a = 2.0 * (sumNoise(cols) + std::ldexp(1.0, -21));
  switch (dtype) {
    case DType::Float32:
      return {2.0 * a, 2.0 * (std::ldexp(1.0, -24) + std::ldexp(1.0, -23))};
    case DType::Float16:
      return {2.0 * a, 2.0 * (std::ldexp(1.0, -11) + std::ldexp(1.0, -23))};
    case DType::BFloat16:
      return {2.0 * a, 2.0 * (std::ldexp(1.0, -8) + std::ldexp(1.0, -23))};
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
