#include "hotkernel/kernels/SoftmaxFamily.h"

#include <algorithm>
#include <cstdint>
#include <limits>

#include "hotkernel/kernels/KernelSource.h"
#include "hotkernel/runtime/Check.h"

namespace hotkernel::kernels {
namespace {

// The axes of the parameter space. Items are not only powers of two so that
// rows like 24576 (3 x 8192) fill the registers without a wasted third.
constexpr int kThreadChoices[] = {32, 64, 128, 256, 512, 1024};
constexpr int kItemChoices[] = {0, 1, 2, 3, 4, 6, 8, 12, 16};
constexpr int kMaxSpaceSize = 12;

bool isPowerOfTwo(int64_t x) { return x > 0 && (x & (x - 1)) == 0; }

bool contains(const int* begin, const int* end, int x) { return std::find(begin, end, x) != end; }

int maxVec(DType dtype) { return static_cast<int>(16 / elementSize(dtype)); }

int registerElements(int threads) {
  return std::min(SoftmaxFamily::kMaxRegisterElements, SoftmaxFamily::kRegisterFileElements / threads);
}

// Whether `p` is one of allParameterPoints(dtype).
bool isPoint(DType dtype, const SoftmaxParams& p) {
  if (!contains(std::begin(kThreadChoices), std::end(kThreadChoices), p.threads)) return false;
  if (!isPowerOfTwo(p.vec) || p.vec > maxVec(dtype)) return false;
  if (!contains(std::begin(kItemChoices), std::end(kItemChoices), p.items)) return false;
  return p.items * p.vec <= registerElements(p.threads);
}

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The widest vector (in elements) that divides cols and fits 16 bytes.
int widestVec(const SoftmaxVariant& v) {
  int vec = maxVec(v.dtype);
  while (vec > 1 && v.cols % vec != 0) vec /= 2;
  return vec;
}

// Register-resident points at width `vec`, best guess first.
//
// Note [Softmax parameter ranking]
// A guess only: the optimizer measures every point. Per thread count, the
// fewest items that cover the row; then rank by the share of lanes that hold
// an element (idle lanes cost registers and occupancy, not bandwidth), with a
// small penalty for one item per thread (no independent loads in flight) and
// for CTAs under 128 threads on rows long enough to fill more.
std::vector<SoftmaxParams> registerPoints(const SoftmaxVariant& v, int vec) {
  struct Scored {
    SoftmaxParams p;
    double score;
  };
  std::vector<Scored> scored;
  const int64_t nvec = v.cols / vec;
  for (int threads : kThreadChoices) {
    const int64_t need = ceilDiv(nvec, threads);
    for (int items : kItemChoices) {
      if (items == 0 || items < need) continue;
      SoftmaxParams p{threads, vec, items};
      if (!SoftmaxFamily::guardParams(v, p)) break;  // larger items only need more registers
      double score = static_cast<double>(nvec) / (static_cast<double>(threads) * items);
      if (score < 0.25 && threads > 32) break;  // most lanes idle: a smaller CTA does the same
      if (items == 1 && nvec > threads) score *= 0.9;
      if (threads < 128 && nvec >= 4 * 128) score *= 0.9;
      scored.push_back({p, score});
      break;  // the fewest items for this thread count
    }
  }
  std::stable_sort(scored.begin(), scored.end(), [](const Scored& a, const Scored& b) {
    if (a.score != b.score) return a.score > b.score;
    return a.p.threads > b.p.threads;
  });
  std::vector<SoftmaxParams> out;
  for (const Scored& s : scored) out.push_back(s.p);
  return out;
}

// Streaming points at width `vec`: enough threads that each loads a few
// vectors, 512 and 1024 for long rows.
std::vector<SoftmaxParams> streamingPoints(const SoftmaxVariant& v, int vec) {
  const int64_t nvec = v.cols / vec;
  std::vector<SoftmaxParams> out;
  if (nvec >= 4 * 1024) {
    out.push_back({1024, vec, 0});
    out.push_back({512, vec, 0});
  } else {
    int threads = 32;
    while (threads < 1024 && threads * 4 < nvec) threads *= 2;
    out.push_back({threads, vec, 0});
  }
  return out;
}

}  // namespace

nlohmann::json SoftmaxParams::toJson() const { return {{"threads", threads}, {"vec", vec}, {"items", items}}; }

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
  return p;
}

std::string SoftmaxParams::describe() const {
  return "threads=" + std::to_string(threads) + " vec=" + std::to_string(vec) + " items=" + std::to_string(items) +
         (items > 0 ? " (register-resident)" : " (streaming)");
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
  if (p.items > 0 && v.cols > static_cast<int64_t>(p.threads) * p.vec * p.items) return false;
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

std::vector<SoftmaxParams> SoftmaxFamily::parameterSpace(const SoftmaxVariant& v) {
  std::vector<SoftmaxParams> out;
  if (!guardVariant(v)) return out;
  auto add = [&](const SoftmaxParams& p) {
    if (static_cast<int>(out.size()) < kMaxSpaceSize && guardParams(v, p) &&
        std::find(out.begin(), out.end(), p) == out.end()) {
      out.push_back(p);
    }
  };
  const int vec = widestVec(v);
  const std::vector<SoftmaxParams> wide = registerPoints(v, vec);
  const std::vector<SoftmaxParams> narrow = vec > 1 ? registerPoints(v, vec / 2) : std::vector<SoftmaxParams>{};
  const std::vector<SoftmaxParams> scalar = vec > 1 ? registerPoints(v, 1) : std::vector<SoftmaxParams>{};

  // The best register-resident guesses at the widest vector, one at half width,
  // the streaming points, then the vec == 1 fallback; the rest of the wide
  // register points fill up to kMaxSpaceSize.
  const size_t kHeadWide = 5;
  for (size_t i = 0; i < wide.size() && i < kHeadWide; ++i) add(wide[i]);
  if (!narrow.empty()) add(narrow.front());
  for (const SoftmaxParams& p : streamingPoints(v, vec)) add(p);
  // Reserve room for the fallback before filling up.
  if (vec > 1) {
    if (!scalar.empty()) {
      add(scalar.front());
    } else {
      for (const SoftmaxParams& p : streamingPoints(v, 1)) add(p);
    }
  }
  for (size_t i = kHeadWide; i < wide.size(); ++i) add(wide[i]);
  if (vec > 1 && !scalar.empty()) add(streamingPoints(v, 1).front());

  HOTKERNEL_INTERNAL_ASSERT(!out.empty(), "empty softmax parameter space for cols=", v.cols);
  return out;
}

std::vector<SoftmaxParams> SoftmaxFamily::allParameterPoints(DType dtype) {
  std::vector<SoftmaxParams> out;
  for (int threads : kThreadChoices) {
    for (int vec = 1; vec <= maxVec(dtype); vec *= 2) {
      for (int items : kItemChoices) {
        SoftmaxParams p{threads, vec, items};
        if (isPoint(dtype, p)) out.push_back(p);
      }
    }
  }
  return out;
}

std::string SoftmaxFamily::source() { return std::string(kernelSource(kName).text); }

std::vector<std::string> SoftmaxFamily::compileOptions(DType dtype, const SoftmaxParams& p) {
  HOTKERNEL_CHECK(isPoint(dtype, p), "not a softmax parameter point for ", dtypeName(dtype), ": ", p.describe());
  return {"-DHK_DTYPE=" + std::to_string(static_cast<int>(dtype)), "-DHK_THREADS=" + std::to_string(p.threads),
          "-DHK_VEC=" + std::to_string(p.vec), "-DHK_ITEMS=" + std::to_string(p.items)};
}

LaunchGeometry SoftmaxFamily::launchGeometry(const SoftmaxVariant& v, const SoftmaxParams& p) {
  constexpr int64_t kMaxGridX = std::numeric_limits<int32_t>::max();  // cuLaunchKernel's limit for gridDim.x
  LaunchGeometry g;
  g.gridX = static_cast<unsigned>(std::clamp<int64_t>(v.rows, 1, kMaxGridX));
  g.blockX = static_cast<unsigned>(p.threads);
  g.sharedBytes = 0;
  return g;
}

double SoftmaxFamily::bytesMoved(const SoftmaxVariant& v) {
  return 2.0 * static_cast<double>(v.rows) * static_cast<double>(v.cols) * static_cast<double>(elementSize(v.dtype));
}

double SoftmaxFamily::tolerance(DType dtype, int64_t /*cols*/) {
  switch (dtype) {
    case DType::Float32:
      return 1e-6;
    case DType::Float16:
      return 1.0 / 2048.0;
    case DType::BFloat16:
      return 1.0 / 256.0;
  }
  HOTKERNEL_INTERNAL_ASSERT(false, "unknown DType ", static_cast<int>(dtype));
}

}  // namespace hotkernel::kernels
