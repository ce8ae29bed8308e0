#pragma once
// The padded-GEMM families: aten::mm(self [M, K], mat2 [K, N]) (mm_pad_n) and
// aten::addmm(bias [N], self, mat2, beta, alpha) (addmm_pad_n: F.linear with a
// bias) on CUDA, float16 / bfloat16, where mat2 is a transposed contiguous
// weight (w.t() of w [N, K]: F.linear's layout) and N is not a multiple of 8,
// computed as a GEMM padded to N8 = N rounded up to 8 (Note [Padded GEMMs] in
// src/MmPadFamily.cpp):
//   w8  = [N8, K], w's rows then zero rows          (hk_pad_rows)
//   b8  = [N8], the bias then zeros (addmm)          (hk_pad_rows)
//   buf = mm(self, w8.t()) or addmm(b8, self, w8.t(), beta, alpha)  [M, N8]  (ATen's own: cuBLAS)
//   out = buf[:, :N] as a contiguous [M, N]         (hk_pad_rows)
// The families' kernel is the copy (kernels/gemm/pad_rows.cu); the GEMM is
// ATen's. The op overrides (interpose/serving/MmPadOverride, AddmmPadOverride)
// run the steps; the optimizer's tuner (optimizer/search/MmPadTuner) times the
// whole plan against ATen's op and checks its values.
//
// A key: rows = M, cols = N, inner = K; the bias option for addmm_pad_n.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "hotkernel/kernels/DType.h"
#include "hotkernel/kernels/SoftmaxFamily.h"  // LaunchGeometry

namespace hotkernel {
struct VariantKey;
}  // namespace hotkernel

namespace hotkernel::kernels {

// One variant of the op: self [m, k], mat2 [k, n] (a weight [n, k] transposed).
struct MmPadVariant {
  DType dtype = DType::Float16;
  int64_t m = 0;
  int64_t n = 0;
  int64_t k = 0;
  bool bias = false;  // addmm: a bias [N] added (beta * bias + alpha * self @ mat2)
  // N rounded up to a multiple of 8: the padded GEMM's output width.
  int64_t paddedN() const { return (n + 7) / 8 * 8; }
};

struct FamilyDescriptor;
// The variant a plan-table key stands for (rows = m, cols = n, inner = k, the bias option).
MmPadVariant mmPadVariantOf(const VariantKey& key);
// Its key on `device`.
VariantKey mmPadKeyOf(const MmPadVariant& v, int device);
// The descriptors of mm_pad_n (aten::mm) and addmm_pad_n (aten::addmm) (Note [Family descriptors]).
const FamilyDescriptor& mmPadDescriptor();
const FamilyDescriptor& addmmPadDescriptor();
// The descriptor of v's op: addmm_pad_n with a bias, else mm_pad_n.
const FamilyDescriptor& mmPadDescriptorOf(const MmPadVariant& v);

// One point of the copy kernel's space; becomes HK_THREADS and HK_VEC.
struct MmPadParams {
  int threads = 256;  // 128, 256, 512 or 1024
  int vec = 8;        // destination elements a thread stores at once: 1, 2, 4 or 8

  nlohmann::json toJson() const;
  // Throws Error on a missing or non-integer field.
  static MmPadParams fromJson(const nlohmann::json& j);
  std::string describe() const;  // "threads=256 vec=8"
  bool operator==(const MmPadParams& o) const { return threads == o.threads && vec == o.vec; }
};

class MmPadFamily {
 public:
  static constexpr const char* kName = "mm_pad_n";         // the cache's family of aten::mm
  static constexpr const char* kAddmmName = "addmm_pad_n";  // the cache's family of aten::addmm
  static constexpr const char* kSourceName = "pad_rows";  // the embedded source
  // extern "C" __global__ void hk_pad_rows(const void* src, void* dst, long long dstRows, long long dstCols,
  //                                        long long srcRows, long long srcCols, long long srcLd)
  static constexpr const char* kKernelName = "hk_pad_rows";
  // The largest extent the family takes (each of m, n, k), and the largest m * n8 or n8 * k.
  static constexpr int64_t kMaxExtent = int64_t{1} << 31;
  static constexpr int64_t kMaxElements = int64_t{1} << 40;

  // Whether the family serves the variant: float16 or bfloat16; m, n, k >= 1
  // and <= kMaxExtent; n % 8 != 0 (an aligned n gains nothing); k % 8 == 0
  // (self's and the weight's rows 16-byte aligned, so that the padded GEMM
  // runs cuBLAS's aligned kernels); m * n8 and n8 * k <= kMaxElements.
  static bool guardVariant(const MmPadVariant& v);
  // Whether `p` is one of allParameterPoints() (every point fits every variant).
  static bool guardParams(const MmPadVariant& v, const MmPadParams& p);
  // Bytes of alignment the copy's destination needs: vec * 2.
  static size_t requiredAlignment(DType dtype, const MmPadParams& p);

  // Up to 8 points worth timing, best guess first; empty iff !guardVariant(v).
  static std::vector<MmPadParams> parameterSpace(const MmPadVariant& v);
  // Every point (the guard's whitelist): threads {128, 256, 512, 1024} x vec {1, 2, 4, 8}.
  static std::vector<MmPadParams> allParameterPoints();

  // The CUDA template (kernelSource(kSourceName).text).
  static std::string source();
  // -DHK_THREADS=, -DHK_VEC=. Throws Error if `p` is not a point.
  static std::vector<std::string> compileOptions(const MmPadParams& p);

  // A grid-stride copy: ceil(packs / threads) CTAs of `threads` for the larger
  // of the two copies (the output's m * n, the weight's n8 * k), at most
  // 2^20 / threads CTAs; the smaller copy runs on the same grid.
  static LaunchGeometry launchGeometry(const MmPadVariant& v, const MmPadParams& p);

  // Ideal DRAM traffic of the op (what ATen's mm must move at least): self,
  // the weight and the bias read once, the output written once.
  static double bytesMoved(const MmPadVariant& v);
};

}  // namespace hotkernel::kernels
