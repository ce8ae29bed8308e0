#include "hotkernel/kernels/CrossEntropyFamily.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "FamilyMath.h"
#include "hotkernel/kernels/KernelSource.h"
#include "hotkernel/runtime/Check.h"

// Note [What ATen's cross_entropy_loss computes]
// Read in torch's aten/src/ATen/native/LossNLL.cpp (cross_entropy_loss_symint)
// and aten/src/ATen/native/cuda/Loss.cu (nll_loss_forward_out_cuda_template and
// its kernels), main branch:
//  - cross_entropy_loss is CompositeImplicitAutograd. With class-index labels,
//    no weight and label_smoothing == 0 it is
//    nll_loss_nd(log_softmax(self, 1, self.scalar_type()), labels, weight, reduction, ignore_index):
//    log_softmax in the logits' dtype, i.e. ROUNDED to float16 / bfloat16
//    before nll_loss reads it. Floating labels are class probabilities
//    (another formula); label smoothing and weights change the formula too.
//  - log_softmax's epilogue is (x - max) - log(sum) in fp32 (std::log), then rounded.
//  - nll_loss, reduction none, 2-D: output[i] = -w * input[i][t] in scalar_t
//    (w = 1: exact), 0 for ignore_index; a label outside [0, C) trips
//    CUDA_KERNEL_ASSERT.
//  - nll_loss, sum / mean, 2-D: ONE CTA of 32 threads; thread j accumulates
//    -input[i][t] for rows i = j, j + 32, ... in acc_type (float for the
//    16-bit types) and counts them (total_weight, also float); thread 0 adds
//    the 32 partials in order; output = scalar_t(acc) for sum,
//    scalar_t(acc / total_weight) for mean: every row ignored gives 0 / 0 = NaN
//    (unlike the 1-D kernel, which returns 0).
//  - output: a 0-dim tensor of the logits' dtype for sum / mean, [rows] for none.
// The family reproduces this: per-row losses rounded to the logits' dtype,
// summed in fp32 (in its own fixed order: Note [Deterministic cross entropy
// reduction] in the template), one rounding of the result; count exact
// (rows <= 2^24, like ATen's float count).

namespace hotkernel::kernels {
namespace {

using detail::ceilDiv;
using detail::contains;
using detail::isPowerOfTwo;
using detail::knownDType;
using detail::maxVec;
using detail::widestVec;

constexpr int kThreadChoices[] = {32, 64, 128, 256, 512, 1024};
constexpr int kUnrollChoices[] = {1, 2, 4, 8};
// Several rows per CTA (short rows): the CTA size and threads per row.
constexpr int kMultiRowThreads = 128;
constexpr int kRowThreadChoices[] = {4, 8, 16, 32};
constexpr int64_t kMultiRowMinRows = 256;
// Split rows over a cluster (sm_90+): cluster sizes and CTA sizes. 8 is sm_90's
// portable maximum; 16 is non-portable (the launcher opts in: Note [Function
// attributes before launch] in CudaKernelLauncher.h), offered for few rows only.
constexpr int kClusterChoices[] = {2, 4, 8, 16};
constexpr int kPortableCluster = 8;
constexpr int kClusterThreadChoices[] = {256, 512, 1024};
// Fewer rows than this leave SMs idle with one CTA per row (H200: 132 SMs).
constexpr int64_t kFewRows = 264;
constexpr int64_t kClusterMinCols = 4096;
constexpr size_t kMaxSpaceSize = 12;
// Cluster points the space starts with for few rows.
constexpr size_t kFewRowsSplitHead = 6;


// Note [Cross entropy register budget]
// A thread keeps `unroll` vectors in flight as raw bits: at most
// min(128, 65536 / threads) bytes (64 at 1024 threads). Above that ptxas
// spilled at 1024 threads (bf16 8 x 8 and fp32 4 x 8 hit the 64-register
// cap of __launch_bounds__(1024)); the compile tests read every point's
// ptxas report.
int maxBytesInFlight(int threads) { return std::min(128, 65536 / threads); }

bool isPoint(DType dtype, const CrossEntropyParams& p) {
  if (!knownDType(dtype)) return false;
  if (!isPowerOfTwo(p.vec) || p.vec > maxVec(dtype)) return false;
  if (!contains(std::begin(kUnrollChoices), std::end(kUnrollChoices), p.unroll)) return false;
  if (p.cluster != 1) {
    if (!contains(std::begin(kClusterChoices), std::end(kClusterChoices), p.cluster)) return false;
    if (p.rowsPerCta != 1) return false;
    if (!contains(std::begin(kClusterThreadChoices), std::end(kClusterThreadChoices), p.threads)) return false;
  } else if (p.rowsPerCta == 1) {
    if (!contains(std::begin(kThreadChoices), std::end(kThreadChoices), p.threads)) return false;
  } else {
    if (p.threads != kMultiRowThreads || p.rowsPerCta < 1 || p.threads % p.rowsPerCta != 0) return false;
    if (!contains(std::begin(kRowThreadChoices), std::end(kRowThreadChoices), p.rowThreads())) return false;
  }
  return p.unroll * p.vec * static_cast<int>(elementSize(dtype)) <= maxBytesInFlight(p.threads);
}

// The largest unroll within the budget that is at most `want` (rounded up to a power of two).
int unrollFor(DType dtype, int threads, int vec, int64_t want) {
  int unroll = 1;
  while (unroll < 8 && unroll < want &&
         2 * unroll * vec * static_cast<int>(elementSize(dtype)) <= maxBytesInFlight(threads)) {
    unroll *= 2;
  }
  return unroll;
}

// Note [Cross entropy parameter ranking]
// A guess, not a measurement (the optimizer measures every point). The kernel
// streams each row once, so what matters is enough bytes in flight per SM and
// enough CTAs for the SMs: per CTA size, the unroll that issues a thread's
// vectors of the row in as few batches as the budget allows; CTA sizes
// ranked by vectors per thread closest to 8 (a few batches of loads in flight
// without most lanes idle), ties to the larger CTA. Short rows (<= 256
// vectors) and many of them: several rows per CTA first.
// Few rows (< 264) of >= 4096 classes on sm_90+: clusters first, the largest
// first (decode: [1, 128256] on one SM cannot beat ATen's one CTA a row), 16
// (non-portable) included. A decode row is latency-bound: a launch, DRAM
// round trips, the CTA and cluster reductions. So within a cluster each CTA
// size gets the unroll that covers its thread's share of the slice in ONE
// batch where the budget allows (cluster 16 x 256 threads x vec 8 on
// [32, 128256]: ~4 vectors a thread, unroll 4: every load issued before the
// first use), and CTA sizes rank by vectors per thread closest to 4 (a
// thread's loads in flight at once, without a CTA of mostly single loads),
// ties to the smaller CTA (a shorter reduction before the cluster barrier);
// a CTA size larger than the slice (idle threads) is left out, and so is a
// cluster whose slice leaves most threads of a 256-thread CTA idle. The
// search reaches the unrolls between the seeds by mutation. Each point reads
// the label's logit after the label (a second DRAM round trip): that
// gather is not on the decode row's critical path (docs/design/cross_entropy.md
// has the points the H200 serves and the variant that folded the gather in).
// Many rows keep the portable clusters, smallest first, 1024 threads first.
std::vector<CrossEntropyParams> rowPoints(const CrossEntropyVariant& v, int vec) {
  struct Scored {
    CrossEntropyParams p;
    double score;
  };
  std::vector<Scored> scored;
  const int64_t nvec = v.cols / vec;
  for (int threads : kThreadChoices) {
    if (threads > 32 && threads / 4 > nvec) continue;  // most lanes idle: a smaller CTA does the same
    const int64_t need = ceilDiv(nvec, threads);
    const CrossEntropyParams p{threads, vec, unrollFor(v.dtype, threads, vec, need), 1, 1};
    const double distance = std::fabs(std::log2(static_cast<double>(std::max<int64_t>(need, 1))) - 3.0);
    scored.push_back({p, -distance});
  }
  std::stable_sort(scored.begin(), scored.end(), [](const Scored& a, const Scored& b) {
    if (a.score != b.score) return a.score > b.score;
    return a.p.threads > b.p.threads;
  });
  std::vector<CrossEntropyParams> out;
  for (const Scored& s : scored) out.push_back(s.p);
  return out;
}

std::vector<CrossEntropyParams> multiRowPoints(const CrossEntropyVariant& v, int vec) {
  std::vector<CrossEntropyParams> out;
  const int64_t nvec = v.cols / vec;
  if (v.rows < kMultiRowMinRows || nvec > 8 * 32) return out;
  for (int rowThreads : kRowThreadChoices) {
    if (rowThreads / 2 > nvec && rowThreads > 4) continue;
    const int64_t need = ceilDiv(nvec, rowThreads);
    out.push_back({kMultiRowThreads, vec, unrollFor(v.dtype, kMultiRowThreads, vec, need),
                   kMultiRowThreads / rowThreads, 1});
  }
  // Fewest batches per row first: the row's threads issue every vector at once.
  std::stable_sort(out.begin(), out.end(), [&](const CrossEntropyParams& a, const CrossEntropyParams& b) {
    return ceilDiv(nvec, static_cast<int64_t>(a.rowThreads()) * a.unroll) <
           ceilDiv(nvec, static_cast<int64_t>(b.rowThreads()) * b.unroll);
  });
  return out;
}

// Split-row points (sm_90+), best guess first (Note [Cross entropy parameter ranking]).
std::vector<CrossEntropyParams> clusterPoints(const CrossEntropyVariant& v, int vec) {
  std::vector<CrossEntropyParams> out;
  const bool fewRows = v.rows < kFewRows;
  std::vector<int> clusters;
  for (int cluster : kClusterChoices) {
    if (fewRows || cluster <= kPortableCluster) clusters.push_back(cluster);
  }
  if (fewRows) std::reverse(clusters.begin(), clusters.end());
  const int64_t nvec = v.cols / vec;
  for (int cluster : clusters) {
    const int64_t slice = ceilDiv(nvec, cluster);
    if (2 * slice < 256) continue;  // most of even a 256-thread CTA idle: a smaller cluster does the same
    std::vector<CrossEntropyParams> sizes;
    for (int threads : {1024, 512, 256}) {
      if (threads > 256 && (fewRows ? threads > slice : threads / 2 > slice)) continue;
      sizes.push_back({threads, vec, unrollFor(v.dtype, threads, vec, ceilDiv(slice, threads)), 1, cluster});
    }
    if (fewRows) {
      auto distance = [&](const CrossEntropyParams& p) {
        return std::fabs(std::log2(static_cast<double>(std::max<int64_t>(ceilDiv(slice, p.threads), 1))) - 2.0);
      };
      std::stable_sort(sizes.begin(), sizes.end(), [&](const CrossEntropyParams& a, const CrossEntropyParams& b) {
        if (distance(a) != distance(b)) return distance(a) < distance(b);
        return a.threads < b.threads;
      });
    }
    out.insert(out.end(), sizes.begin(), sizes.end());
  }
  return out;
}

// Note [Cross entropy tolerance]
// Per row, both sides compute v = (x[t] - max) - log(sum) in fp32 from logits
// fp32 holds exactly; max is the same element, only the sum's order (and our
// online rescaling: one more rounding per merge) differs: ~1e-6 relative for
// long rows (the softmax family measured ATen itself 6.6e-7 from fp64), i.e.
// ~1e-6 absolute in log(sum). rowAbs = s(cols) = 4e-6 * max(1, sqrt(cols / 16384))
// bounds that with margin (11e-6 at 128256 classes); x[t] - max is exact on
// both sides. float32 adds 2 ulp of rounding (rowRel 2^-22); the 16-bit types
// round both fp32 values once: at most one step apart, one ulp <= 2^-10
// (float16) or 2^-7 (bfloat16) of the value.
// Sum and mean: the per-row losses enter as rounded values. float32: each
// differs by its row bound, so the sum by count * rowAbs + rowRel * sumAbs.
// 16-bit: a row's rounded loss differs only when the two fp32 values straddle
// a rounding boundary (probability ~ rowAbs / ulp, 1e-4 at worst for float16
// losses near 10), by one ulp <= rowRel * maxAbs: we allow 8 + count / 256
// such rows. Then the summation order: ATen's 32 chains of count / 32 terms
// against our chains of count / threads plus a butterfly; each errs by at most
// (chain + 64) * 2^-24 * sumAbs, twice that for both. Last, both round the
// result once to the output type: one ulp of |ref| (rowRel * |ref|; 2^-23 for
// float32). Mean divides everything but that final ulp by count. Every term
// is derived, not yet measured (no GPU where this was written).
double noise(int64_t cols) {
  return 4e-6 * std::max(1.0, std::sqrt(static_cast<double>(std::max<int64_t>(cols, 1)) / 16384.0));
}

}  // namespace

const char* reductionName(CrossEntropyReduction r) {
  switch (r) {
    case CrossEntropyReduction::None:
      return "none";
    case CrossEntropyReduction::Mean:
      return "mean";
    case CrossEntropyReduction::Sum:
      return "sum";
  }
  return "unknown";
}

nlohmann::json CrossEntropyParams::toJson() const {
  return {{"threads", threads}, {"vec", vec}, {"unroll", unroll}, {"rowsPerCta", rowsPerCta}, {"cluster", cluster}};
}

CrossEntropyParams CrossEntropyParams::fromJson(const nlohmann::json& j) {
  HOTKERNEL_CHECK(j.is_object(), "cross_entropy params must be a JSON object: ", j.dump());
  for (const char* key : {"threads", "vec", "unroll"}) {
    HOTKERNEL_CHECK(j.contains(key) && j.at(key).is_number_integer(), "cross_entropy params need an integer '",
                    key, "': ", j.dump());
  }
  CrossEntropyParams p;
  p.threads = j.at("threads").get<int>();
  p.vec = j.at("vec").get<int>();
  p.unroll = j.at("unroll").get<int>();
  for (const char* key : {"rowsPerCta", "cluster"}) {
    if (!j.contains(key)) continue;
    HOTKERNEL_CHECK(j.at(key).is_number_integer(), "cross_entropy params need an integer '", key, "': ", j.dump());
  }
  p.rowsPerCta = j.value("rowsPerCta", 1);
  p.cluster = j.value("cluster", 1);
  return p;
}

std::string CrossEntropyParams::describe() const {
  return "threads=" + std::to_string(threads) + " vec=" + std::to_string(vec) + " unroll=" + std::to_string(unroll) +
         (rowsPerCta != 1 ? " rowsPerCta=" + std::to_string(rowsPerCta) : std::string()) +
         (cluster != 1 ? " cluster=" + std::to_string(cluster) : std::string());
}

bool CrossEntropyTolerance::rowWithin(double got, double ref) const {
  if (std::isnan(ref) || std::isnan(got)) return std::isnan(ref) && std::isnan(got);
  if (std::isinf(ref) || std::isinf(got)) return got == ref;
  return std::fabs(got - ref) <= rowAbs + rowRel * std::fabs(ref);
}

double CrossEntropyTolerance::reducedBound(CrossEntropyReduction r, int64_t count, double sumAbs, double maxAbs,
                                           double ref) const {
  const double n = static_cast<double>(std::max<int64_t>(count, 0));
  const double chain = n / 32.0 + 64.0;
  double bound = 2.0 * chain * std::ldexp(1.0, -24) * sumAbs;
  if (dtype == DType::Float32) {
    bound += n * rowAbs + rowRel * sumAbs;
  } else {
    bound += (8.0 + n / 256.0) * rowRel * maxAbs;
  }
  if (r == CrossEntropyReduction::Mean && n > 0) bound /= n;
  const double lastRounding = dtype == DType::Float32 ? std::ldexp(1.0, -23) : rowRel;
  return bound + lastRounding * std::fabs(ref);
}

// Note [What the cross entropy override refuses]
// The family serves exactly the calls whose ATen result it reproduces; the
// override runs ATen for everything else, never an approximation:
//  - class weights (another formula for the loss and the mean's divisor),
//    label_smoothing != 0, floating labels (class probabilities) or labels
//    that are not int64 -> refused;
//  - logits that are not float32 / float16 / bfloat16, not 2-D [rows, classes]
//    (1-D logits use nll_loss's 1-D kernel, whose mean over an ignored row is 0;
//    K-dimensional losses [N, C, d1, ...] put the classes in dim 1, not last),
//    or not contiguous -> refused;
//  - a label that is not a contiguous [rows] vector on the logits' device -> refused;
//  - a reduction other than none / mean / sum, and shapes outside guardVariant -> refused.
bool CrossEntropyFamily::guardCall(const CrossEntropyCall& c, CrossEntropyVariant* variant) {
  if (!c.logitsFloating || !c.labelsInt64 || !c.sameDevice || c.hasWeight || c.labelSmoothing != 0.0) return false;
  if (c.logitsSizes.size() != 2 || c.logitsStrides.size() != 2) return false;
  if (c.labelsSizes.size() != 1 || c.labelsStrides.size() != 1) return false;
  const int64_t rows = c.logitsSizes[0], cols = c.logitsSizes[1];
  if (c.labelsSizes[0] != rows) return false;
  // Contiguous; a stride is free where its size is 1 (torch's own rule).
  if (cols != 1 && c.logitsStrides[1] != 1) return false;
  if (rows != 1 && c.logitsStrides[0] != cols) return false;
  if (rows != 1 && c.labelsStrides[0] != 1) return false;
  if (c.reduction < 0 || c.reduction > 2) return false;
  const CrossEntropyVariant v{c.dtype, rows, cols, static_cast<CrossEntropyReduction>(c.reduction)};
  if (!guardVariant(v)) return false;
  if (variant != nullptr) *variant = v;
  return true;
}

bool CrossEntropyFamily::guardVariant(const CrossEntropyVariant& v) {
  if (!knownDType(v.dtype)) return false;
  const auto r = static_cast<int32_t>(v.reduction);
  if (r < 0 || r > 2) return false;
  if (v.rows < 1 || v.rows > kMaxRows || v.cols < 1 || v.cols > kMaxCols) return false;
  const int64_t maxElements = std::numeric_limits<int64_t>::max() / static_cast<int64_t>(elementSize(v.dtype));
  return v.rows <= maxElements / v.cols;
}

bool CrossEntropyFamily::guardParams(const CrossEntropyVariant& v, const CrossEntropyParams& p) {
  if (!guardVariant(v) || !isPoint(v.dtype, p)) return false;
  return p.vec == 1 || v.cols % p.vec == 0;
}

size_t CrossEntropyFamily::requiredAlignment(DType dtype, const CrossEntropyParams& p) {
  return static_cast<size_t>(std::max(p.vec, 1)) * elementSize(dtype);
}

bool CrossEntropyFamily::guardPointers(const void* logits, const void* labels, const void* out, const void* work,
                                       const CrossEntropyVariant& v, const CrossEntropyParams& p) {
  auto aligned = [](const void* ptr, size_t a) {
    return ptr != nullptr && reinterpret_cast<uintptr_t>(ptr) % a == 0;
  };
  if (p.vec < 1) return false;
  if (!aligned(logits, requiredAlignment(v.dtype, p)) || !aligned(labels, 8) ||
      !aligned(out, elementSize(v.dtype))) {
    return false;
  }
  return workspaceFloats(v) == 0 || aligned(work, 4);
}

int64_t CrossEntropyFamily::workspaceFloats(const CrossEntropyVariant& v) {
  // One row: the kernel writes the reduced loss itself and never touches the
  // workspace (the template's Note [One row needs no reduction pass]).
  return v.reduction == CrossEntropyReduction::None || v.rows == 1 ? 0 : v.rows + 1;
}

bool CrossEntropyFamily::needsCounter(const CrossEntropyVariant& v, const CrossEntropyParams& p) {
  if (workspaceFloats(v) == 0) return false;
  // The cluster kernel takes a ticket a row (Note [Cluster rows take their own
  // tickets] in cross_entropy.cu); the one-CTA kernel a ticket a CTA.
  if (p.cluster > 1) return true;
  return launchGeometry(v, p).gridX > 1u;
}

std::vector<CrossEntropyParams> CrossEntropyFamily::parameterSpace(const CrossEntropyVariant& v,
                                                                   int computeCapability) {
  std::vector<CrossEntropyParams> out;
  if (!guardVariant(v)) return out;
  auto add = [&](const CrossEntropyParams& p, size_t limit) {
    if (out.size() < limit && guardParams(v, p) && p.minComputeCapability() <= std::max(computeCapability, 0) &&
        std::find(out.begin(), out.end(), p) == out.end()) {
      out.push_back(p);
    }
  };
  const int vec = widestVec(v.dtype, v.cols);
  const std::vector<CrossEntropyParams> wide = rowPoints(v, vec);
  const std::vector<CrossEntropyParams> multi = multiRowPoints(v, vec);
  const std::vector<CrossEntropyParams> split =
      computeCapability >= 90 && v.cols >= kClusterMinCols ? clusterPoints(v, vec) : std::vector<CrossEntropyParams>{};
  const std::vector<CrossEntropyParams> scalar = rowPoints(v, 1);
  const size_t headLimit = kMaxSpaceSize - 2;
  const bool splitFirst = !split.empty() && v.rows < kFewRows;
  for (size_t i = 0; splitFirst && i < split.size() && i < kFewRowsSplitHead; ++i) add(split[i], headLimit);
  for (size_t i = 0; i < multi.size() && i < 3; ++i) add(multi[i], headLimit);
  for (size_t i = 0; i < wide.size() && i < 4; ++i) add(wide[i], headLimit);
  for (size_t i = 0; !splitFirst && i < split.size() && i < 2; ++i) add(split[i], headLimit);
  if (vec > 1) add(rowPoints(v, vec / 2).front(), headLimit);
  add(scalar.front(), kMaxSpaceSize);  // the fallback for unaligned logits
  for (const CrossEntropyParams& p : wide) add(p, kMaxSpaceSize);
  HOTKERNEL_INTERNAL_ASSERT(!out.empty(), "empty cross_entropy parameter space for cols=", v.cols);
  return out;
}

std::vector<CrossEntropyParams> CrossEntropyFamily::allParameterPoints(DType dtype) {
  std::vector<CrossEntropyParams> out;
  for (int vec = 1; vec <= maxVec(dtype); vec *= 2) {
    for (int unroll : kUnrollChoices) {
      for (int threads : kThreadChoices) {
        const CrossEntropyParams p{threads, vec, unroll, 1, 1};
        if (isPoint(dtype, p)) out.push_back(p);
      }
      for (int rowThreads : kRowThreadChoices) {
        const CrossEntropyParams p{kMultiRowThreads, vec, unroll, kMultiRowThreads / rowThreads, 1};
        if (isPoint(dtype, p)) out.push_back(p);
      }
      for (int cluster : kClusterChoices) {
        for (int threads : kClusterThreadChoices) {
          const CrossEntropyParams p{threads, vec, unroll, 1, cluster};
          if (isPoint(dtype, p)) out.push_back(p);
        }
      }
    }
  }
  return out;
}

std::string CrossEntropyFamily::source() { return expandPrelude(kernelSource(kName).text); }

std::vector<std::string> CrossEntropyFamily::compileOptions(DType dtype, const CrossEntropyParams& p,
                                                            CrossEntropyReduction reduction) {
  HOTKERNEL_CHECK(isPoint(dtype, p), "not a cross_entropy parameter point for ", dtypeName(dtype), ": ",
                  p.describe());
  const auto r = static_cast<int32_t>(reduction);
  HOTKERNEL_CHECK(r >= 0 && r <= 2, "unknown cross_entropy reduction ", r);
  std::vector<std::string> options = {
      "-DHK_DTYPE=" + std::to_string(static_cast<int>(dtype)), "-DHK_THREADS=" + std::to_string(p.threads),
      "-DHK_ROWS=" + std::to_string(p.rowsPerCta),             "-DHK_VEC=" + std::to_string(p.vec),
      "-DHK_UNROLL=" + std::to_string(p.unroll),               "-DHK_REDUCTION=" + std::to_string(r)};
  if (p.cluster != 1) options.push_back("-DHK_CLUSTER=" + std::to_string(p.cluster));
  return options;
}

LaunchGeometry CrossEntropyFamily::launchGeometry(const CrossEntropyVariant& v, const CrossEntropyParams& p) {
  constexpr int64_t kMaxGridX = std::numeric_limits<int32_t>::max();
  const int64_t cluster = std::max(p.cluster, 1);
  const int64_t ctas = ceilDiv(std::max<int64_t>(v.rows, 1), std::max(p.rowsPerCta, 1)) * cluster;
  LaunchGeometry g;
  g.gridX = static_cast<unsigned>(std::clamp<int64_t>(ctas, cluster, kMaxGridX / cluster * cluster));
  g.blockX = static_cast<unsigned>(p.threads);
  g.sharedBytes = 0;
  return g;
}

double CrossEntropyFamily::bytesMoved(const CrossEntropyVariant& v) {
  const double rows = static_cast<double>(v.rows);
  const double logits = rows * static_cast<double>(v.cols) * static_cast<double>(elementSize(v.dtype));
  if (v.reduction == CrossEntropyReduction::None) return logits + rows * 8.0 + rows * elementSize(v.dtype);
  return logits + 2.0 * rows * 8.0 + 2.0 * rows * 4.0 + elementSize(v.dtype);
}

double CrossEntropyFamily::flops(const CrossEntropyVariant& v) {
  return 4.0 * static_cast<double>(v.rows) * static_cast<double>(v.cols);
}

CrossEntropyTolerance CrossEntropyFamily::tolerance(DType dtype, int64_t cols) {
  const double s = noise(cols);
  switch (dtype) {
    case DType::Float32:
      return {dtype, s, std::ldexp(1.0, -22)};
    case DType::Float16:
      return {dtype, s, std::ldexp(1.0, -10)};
    case DType::BFloat16:
      return {dtype, s, std::ldexp(1.0, -7)};
  }
  HOTKERNEL_INTERNAL_ASSERT(false, "unknown DType ", static_cast<int>(dtype));
}

}  // namespace hotkernel::kernels
