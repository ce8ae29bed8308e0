#include "hotkernel/kernels/MmPadFamily.h"

#include <algorithm>

#include "hotkernel/kernels/KernelSource.h"
#include "hotkernel/runtime/Check.h"

// Note [Padded GEMMs]
// cuBLAS's fast tensor-core GEMM kernels need the output's contiguous extent
// to be a multiple of 8 16-bit elements; with N = 50,257 (GPT-2's vocabulary,
// the LM head F.linear(h, wte.weight)) or 30,522 (BERT's) it runs kernels for
// 2-byte alignment, several times slower (docs/design/gemm-padding.md has the
// measurements). Giving cuBLAS an output view with aligned rows but N as it is
// does not change its choice: N itself must be a multiple of 8. So the weight
// is padded with zero rows to [N8, K], the GEMM computes [M, N8] (its last
// N8 - N columns are dot products with zero rows, never read), and the first
// N columns are copied into a contiguous [M, N]: eager's shape, strides and
// dtype. With addmm's bias, the bias is padded with zeros to [N8] the same
// way and the GEMM is ATen's addmm (its beta and alpha as given). Every copy
// is one kernel, hk_pad_rows. The values are those of
// another cuBLAS kernel on the same inputs (fp32 accumulation in another
// order): the tuner checks them against a float64 GEMM and times the whole
// plan against ATen's mm, and the family is opt-in (HOTKERNEL_OPS).

namespace hotkernel::kernels {
namespace {

constexpr int kThreads[] = {128, 256, 512, 1024};
constexpr int kVecs[] = {1, 2, 4, 8};
constexpr int64_t kMaxThreadsInGrid = int64_t{1} << 20;

bool isPoint(const MmPadParams& p) {
  return std::find(std::begin(kThreads), std::end(kThreads), p.threads) != std::end(kThreads) &&
         std::find(std::begin(kVecs), std::end(kVecs), p.vec) != std::end(kVecs);
}

}  // namespace

nlohmann::json MmPadParams::toJson() const { return {{"threads", threads}, {"vec", vec}}; }

MmPadParams MmPadParams::fromJson(const nlohmann::json& j) {
  HOTKERNEL_CHECK(j.is_object() && j.contains("threads") && j.contains("vec") && j["threads"].is_number_integer() &&
                      j["vec"].is_number_integer(),
                  "mm_pad_n parameters need integer threads and vec: ", j.dump());
  MmPadParams p;
  p.threads = j["threads"].get<int>();
  p.vec = j["vec"].get<int>();
  return p;
}

std::string MmPadParams::describe() const {
  return "threads=" + std::to_string(threads) + " vec=" + std::to_string(vec);
}

bool MmPadFamily::guardVariant(const MmPadVariant& v) {
  if (v.dtype != DType::Float16 && v.dtype != DType::BFloat16) return false;
  if (v.m < 1 || v.n < 1 || v.k < 1) return false;
  if (v.m > kMaxExtent || v.n > kMaxExtent || v.k > kMaxExtent) return false;
  if (v.n % 8 == 0 || v.k % 8 != 0) return false;
  const int64_t n8 = v.paddedN();
  return v.m <= kMaxElements / n8 && v.k <= kMaxElements / n8;
}

bool MmPadFamily::guardParams(const MmPadVariant& v, const MmPadParams& p) { return guardVariant(v) && isPoint(p); }

size_t MmPadFamily::requiredAlignment(DType dtype, const MmPadParams& p) {
  return static_cast<size_t>(std::max(p.vec, 1)) * elementSize(dtype);
}

std::vector<MmPadParams> MmPadFamily::parameterSpace(const MmPadVariant& v) {
  if (!guardVariant(v)) return {};
  return {{256, 8}, {512, 8}, {128, 8}, {1024, 8}, {256, 4}, {512, 4}, {256, 2}, {256, 1}};
}

std::vector<MmPadParams> MmPadFamily::allParameterPoints() {
  std::vector<MmPadParams> all;
  for (int t : kThreads) {
    for (int v : kVecs) all.push_back({t, v});
  }
  return all;
}

std::string MmPadFamily::source() { return std::string(kernelSource(kSourceName).text); }

std::vector<std::string> MmPadFamily::compileOptions(const MmPadParams& p) {
  HOTKERNEL_CHECK(isPoint(p), "not an mm_pad_n parameter point: ", p.describe());
  return {"-DHK_THREADS=" + std::to_string(p.threads), "-DHK_VEC=" + std::to_string(p.vec)};
}

LaunchGeometry MmPadFamily::launchGeometry(const MmPadVariant& v, const MmPadParams& p) {
  HOTKERNEL_CHECK(guardParams(v, p), "mm_pad_n parameters ", p.describe(), " do not fit the variant");
  const int64_t largest = std::max(v.m * v.n, v.paddedN() * v.k);
  const int64_t packs = (largest + p.vec - 1) / p.vec;
  const int64_t ctas = std::min((packs + p.threads - 1) / p.threads, kMaxThreadsInGrid / p.threads);
  LaunchGeometry g;
  g.gridX = static_cast<unsigned>(std::max<int64_t>(ctas, 1));
  g.blockX = static_cast<unsigned>(p.threads);
  return g;
}

double MmPadFamily::bytesMoved(const MmPadVariant& v) {
  const double e = static_cast<double>(elementSize(v.dtype));
  const double m = static_cast<double>(v.m), n = static_cast<double>(v.n), k = static_cast<double>(v.k);
  return (m * k + n * k + m * n + (v.bias ? n : 0.0)) * e;
}

}  // namespace hotkernel::kernels
