// The device functions of every chain kernel (ChainCodegen).
//
// Note [Self-contained chain sources]
// A chain kernel mixes element types (a bfloat16 input, float32
// intermediates, a float16 output), where hk_prelude.cuh serves programs of
// one element type (HK_DTYPE). So a chain program carries its own small
// library: conversions of the three types by cvt.rn (sm_80+, the rounding of
// Note [Round to nearest even]), vector accesses of HK_VEC elements per type
// in 16-byte pieces, the op helpers of Note [Chain op arithmetic], and row
// sums and maxima over HK_ROW_THREADS threads. The whole program is generated
// text: its SHA-256 identifies the kernel, library included, so a change here
// changes every chain kernel's identity, as the prelude's hash does for the
// families.
//
// Note [Deterministic chain reductions]
// Each thread folds its elements in index order; the threads of a row then
// combine by an xor butterfly within the warp and, for rows wider than a
// warp, every thread folds the warps' partials from shared memory in warp
// order. Float addition is commutative bit for bit, so every lane of a
// butterfly ends with the same sum; the NaN-propagating maximum is not (for
// +0 and -0 it keeps one operand), so a row's maximum is taken from its
// first lane. Every thread of a row sees the same bits of every reduction,
// and the result depends only on (cols, threads, rowsPerCta, vec).

#include <cstdio>
#include <cstring>
#include <string>

#include "CodegenDetail.h"
#include "hotkernel/runtime/Check.h"

namespace hotkernel::chain::detail {
namespace {

constexpr const char* kCommon = R"(#define HK_ROW_THREADS (HK_THREADS / HK_ROWS)
#define HK_ROW_WARPS (HK_ROW_THREADS / 32)
static_assert(HK_THREADS >= 32 && HK_THREADS <= 1024 && (HK_THREADS & (HK_THREADS - 1)) == 0,
              "HK_THREADS must be a power of two in [32, 1024]");
static_assert(HK_VEC == 1 || HK_VEC == 2 || HK_VEC == 4 || HK_VEC == 8, "HK_VEC must be 1, 2, 4 or 8");
static_assert(HK_ROWS >= 1 && (HK_ROWS & (HK_ROWS - 1)) == 0 && (HK_ROWS == 1 || HK_ROW_THREADS <= 32),
              "HK_ROWS must be 1 or leave each row at most one warp");

__device__ __forceinline__ float hk_neg_inf() { return __uint_as_float(0xff800000u); }
__device__ __forceinline__ float hk_id(float f) { return f; }
__device__ __forceinline__ float hk_f16_to_f32(unsigned short h) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
  return f;
}
__device__ __forceinline__ unsigned short hk_f32_to_f16(float f) {
  unsigned short h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
}
__device__ __forceinline__ float hk_bf16_to_f32(unsigned short h) { return __uint_as_float(static_cast<unsigned>(h) << 16); }
__device__ __forceinline__ unsigned short hk_f32_to_bf16(float f) {
  unsigned short h;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
}
__device__ __forceinline__ float hk_round_f16(float f) { return hk_f16_to_f32(hk_f32_to_f16(f)); }
__device__ __forceinline__ float hk_round_bf16(float f) { return hk_bf16_to_f32(hk_f32_to_bf16(f)); }

// N elements of T in one access of N * sizeof(T) <= 16 bytes.
template <typename T, int N>
struct alignas(sizeof(T) * N) hk_chunk {
  T v[N];
};

// The ops (Note [Chain op arithmetic]).
__device__ __forceinline__ float hk_sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }
__device__ __forceinline__ float hk_silu(float x) { return x / (1.0f + expf(-x)); }
__device__ __forceinline__ float hk_gelu_erf(float x) { return x * 0.5f * (1.0f + erff(x * 0.70710678118654752440f)); }
__device__ __forceinline__ float hk_gelu_tanh(float x) {
  const float beta = 0.79788456080286535588f;  // sqrt(2) * 2 / sqrt(pi) * 0.5
  const float kappa = 0.044715f;
  const float cube = x * x * x;
  return 0.5f * x * (1.0f + tanhf(beta * (x + kappa * cube)));
}
__device__ __forceinline__ float hk_relu(float x) { return x < 0.0f ? 0.0f : x; }
__device__ __forceinline__ float hk_sq(float x) { return x * x; }
__device__ __forceinline__ float hk_cube(float x) { return x * x * x; }
__device__ __forceinline__ float hk_max_nan(float a, float b) { return (a != a || a > b) ? a : b; }
__device__ __forceinline__ float hk_hard_clip(float x) {
  const float s = x + 3.0f;
  const float lo = s < 0.0f ? 0.0f : s;
  return 6.0f < lo ? 6.0f : lo;
}
__device__ __forceinline__ float hk_hardsigmoid(float x) { return hk_hard_clip(x) * (1.0f / 6.0f); }
__device__ __forceinline__ float hk_hardswish(float x) { return x * hk_hard_clip(x) * (1.0f / 6.0f); }
__device__ __forceinline__ float hk_leaky_relu(float x, float slope) { return x > 0.0f ? x : x * slope; }
__device__ __forceinline__ float hk_softplus(float x) { return x > 20.0f ? x : log1pf(expf(x)); }
__device__ __forceinline__ float hk_mish(float x) { return x * tanhf(log1pf(expf(x))); }
__device__ __forceinline__ float hk_maximum(float a, float b) { return a != a ? a : b != b ? b : fmaxf(a, b); }
__device__ __forceinline__ float hk_minimum(float a, float b) { return a != a ? a : b != b ? b : fminf(a, b); }
// Note [Division by a row value]: a / b for a Row b is (a * (1 / (b * k))) * k, k a power of two: 1, or 2^64
// where b is a nonzero subnormal whose own reciprocal overflows (below 2^-128). A row kernel computes k and the
// reciprocal once a row (hk_row_scale, r<N>_k and r<N>_rcp); hk_div_row does it all for one value.
__device__ __forceinline__ float hk_row_scale(float b) {
  const bool tiny = b != 0.0f && fabsf(__fdiv_rn(1.0f, b)) == __uint_as_float(0x7f800000u);
  return tiny ? __uint_as_float(0x5f800000u) : 1.0f;  // 2^64 or 1
}
__device__ __forceinline__ float hk_div_row(float a, float b) {
  const float k = hk_row_scale(b);
  return __fmul_rn(__fmul_rn(a, __fdiv_rn(1.0f, __fmul_rn(b, k))), k);
}

// Row reductions over the HK_ROW_THREADS threads of a row (Note [Deterministic
// chain reductions]); `buf` holds HK_ROW_WARPS floats used once.
__device__ __forceinline__ float hk_row_sum(float v, float* buf) {
#if HK_ROW_THREADS <= 32
#pragma unroll
  for (int o = HK_ROW_THREADS / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
#else
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  if ((threadIdx.x & 31) == 0) buf[threadIdx.x >> 5] = v;
  __syncthreads();
  float s = 0.0f;
#pragma unroll
  for (int w = 0; w < HK_ROW_WARPS; ++w) s += buf[w];
  return s;
#endif
}

__device__ __forceinline__ float hk_row_max(float v, float* buf) {
#if HK_ROW_THREADS <= 32
#pragma unroll
  for (int o = HK_ROW_THREADS / 2; o > 0; o >>= 1) v = hk_max_nan(v, __shfl_xor_sync(0xffffffffu, v, o));
  return __shfl_sync(0xffffffffu, v, 0, HK_ROW_THREADS);
#else
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = hk_max_nan(v, __shfl_xor_sync(0xffffffffu, v, o));
  if ((threadIdx.x & 31) == 0) buf[threadIdx.x >> 5] = v;
  __syncthreads();
  float m = hk_neg_inf();
#pragma unroll
  for (int w = 0; w < HK_ROW_WARPS; ++w) m = hk_max_nan(m, buf[w]);
  return m;
#endif
}
)";

// Element accesses of one type: @TAG@ its suffix, @T@ its storage type, @TO@ / @FROM@ its conversions.
constexpr const char* kAccess = R"(
__device__ __forceinline__ float hk_ld_@TAG@(const @T@* p) { return @TO@(*p); }
__device__ __forceinline__ void hk_st_@TAG@(@T@* p, float f) { *p = @FROM@(f); }
// HK_VEC elements at p (aligned to HK_VEC elements) as floats, in pieces of at most 16 bytes.
__device__ __forceinline__ void hk_load_@TAG@(const @T@* p, float (&f)[HK_VEC]) {
  constexpr int kC = 16 / static_cast<int>(sizeof(@T@)) < HK_VEC ? 16 / static_cast<int>(sizeof(@T@)) : HK_VEC;
  const hk_chunk<@T@, kC>* c = reinterpret_cast<const hk_chunk<@T@, kC>*>(p);
#pragma unroll
  for (int k = 0; k < HK_VEC / kC; ++k) {
    const hk_chunk<@T@, kC> w = c[k];
#pragma unroll
    for (int j = 0; j < kC; ++j) f[k * kC + j] = @TO@(w.v[j]);
  }
}
@STORE@)";

// The store of an aligned struct, as the loads are written: LLVM's store
// vectorizer merges it into one vector store where it follows the address.
constexpr const char* kStoreStruct =
    R"(__device__ __forceinline__ void hk_store_@TAG@(@T@* p, const float (&f)[HK_VEC]) {
  constexpr int kC = 16 / static_cast<int>(sizeof(@T@)) < HK_VEC ? 16 / static_cast<int>(sizeof(@T@)) : HK_VEC;
  hk_chunk<@T@, kC>* c = reinterpret_cast<hk_chunk<@T@, kC>*>(p);
#pragma unroll
  for (int k = 0; k < HK_VEC / kC; ++k) {
    hk_chunk<@T@, kC> w;
#pragma unroll
    for (int j = 0; j < kC; ++j) w.v[j] = @FROM@(f[k * kC + j]);
    c[k] = w;
  }
}
)";

// Note [One store a vector]
// A kernel stores HK_VEC elements of an output in one vector store of up to
// 16 bytes (two for eight float32 elements). Written as a store of an
// aligned struct (kStoreStruct), LLVM's scalar replacement splits it into
// element stores and its store vectorizer merges them again where it follows
// the address; where the address comes from a layout's row offsets or a
// Cat's segment it does not, and ptxas then writes one 16-byte vector as up
// to four 4- and 8-byte stores. So a kernel of a chain with a layout or a Cat
// stores in PTX instead (chainDeviceLibrary's ptxStores): the elements
// converted to their storage type, 16-bit ones paired into 32-bit words (the
// first element in the low half, as memory holds them), stored by one
// st.global.v4 / v2. An asm without outputs is volatile: the stores keep
// their order among themselves, and the loads (plain C++) still move across
// them. Two kinds of kernel keep the struct store: a contiguous chain's (the
// vectorizer merges it; its source, and so its cached entries, stay as they
// were) and a row kernel that holds its row in registers (items > 0), where
// the ordered stores constrain the scheduler of a register-heavy kernel more
// than the split stores cost (docs/design/fusion.md has the measurements).
constexpr const char* kStore16 = R"(
__device__ __forceinline__ void hk_store_@TAG@(unsigned short* p, const float (&f)[HK_VEC]) {
#if HK_VEC == 1
  p[0] = @FROM@(f[0]);
#else
  unsigned w[HK_VEC / 2];
#pragma unroll
  for (int i = 0; i < HK_VEC / 2; ++i) {
    w[i] = static_cast<unsigned>(@FROM@(f[2 * i])) | (static_cast<unsigned>(@FROM@(f[2 * i + 1])) << 16);
  }
#if HK_VEC == 8
  asm("st.global.v4.b32 [%0], {%1, %2, %3, %4};" : : "l"(p), "r"(w[0]), "r"(w[1]), "r"(w[2]), "r"(w[3]));
#elif HK_VEC == 4
  asm("st.global.v2.b32 [%0], {%1, %2};" : : "l"(p), "r"(w[0]), "r"(w[1]));
#else
  asm("st.global.b32 [%0], %1;" : : "l"(p), "r"(w[0]));
#endif
#endif
}
)";
constexpr const char* kStore32 = R"(
__device__ __forceinline__ void hk_store_@TAG@(float* p, const float (&f)[HK_VEC]) {
#if HK_VEC == 1
  p[0] = f[0];
#elif HK_VEC == 2
  asm("st.global.v2.f32 [%0], {%1, %2};" : : "l"(p), "f"(f[0]), "f"(f[1]));
#else
#pragma unroll
  for (int k = 0; k < HK_VEC / 4; ++k) {
    asm("st.global.v4.f32 [%0], {%1, %2, %3, %4};" : : "l"(p + 4 * k), "f"(f[4 * k]), "f"(f[4 * k + 1]),
        "f"(f[4 * k + 2]), "f"(f[4 * k + 3]));
  }
#endif
}
)";

std::string replaceAll(std::string text, const std::string& from, const std::string& to) {
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size())) {
    text.replace(at, from.size(), to);
  }
  return text;
}

std::string access(DType dtype, const char* to, const char* from, bool ptxStore) {
  const char* store = !ptxStore ? kStoreStruct : dtype == DType::Float32 ? kStore32 : kStore16;
  std::string s = replaceAll(kAccess, "@STORE@", store);
  s = replaceAll(s, "@TAG@", accessTag(dtype));
  s = replaceAll(s, "@T@", storageType(dtype));
  s = replaceAll(s, "@TO@", to);
  return replaceAll(s, "@FROM@", from);
}

}  // namespace

const char* storageType(DType dtype) { return dtype == DType::Float32 ? "float" : "unsigned short"; }

const char* accessTag(DType dtype) {
  switch (dtype) {
    case DType::Float32:
      return "f32";
    case DType::Float16:
      return "f16";
    case DType::BFloat16:
      return "bf16";
  }
  HOTKERNEL_THROW("unknown dtype code ", static_cast<int>(dtype));
}

std::string chainDeviceLibrary(bool ptxStores) {
  std::string text = kCommon;
  text += access(DType::Float32, "hk_id", "hk_id", ptxStores);
  text += access(DType::Float16, "hk_f16_to_f32", "hk_f32_to_f16", ptxStores);
  text += access(DType::BFloat16, "hk_bf16_to_f32", "hk_f32_to_bf16", ptxStores);
  return text;
}

std::string chainClusterLibrary() {
  return R"HK(#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
#error "HK_CLUSTER needs sm_90 or later (thread-block clusters)"
#endif
__device__ __forceinline__ unsigned hk_cta_rank() {
  unsigned r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}
__device__ __forceinline__ void hk_cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}
// The float at `local` (this CTA's shared memory) in the CTA of cluster rank `rank`.
__device__ __forceinline__ float hk_peer_ld(const float* local, unsigned rank) {
  unsigned a;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;"
               : "=r"(a) : "r"(static_cast<unsigned>(__cvta_generic_to_shared(local))), "r"(rank));
  float v;
  asm volatile("ld.shared::cluster.f32 %0, [%1];" : "=f"(v) : "r"(a) : "memory");
  return v;
}
// The cluster's total of each CTA's `s` (the same in every thread of the CTA): published in `part`, then every
// CTA adds the ranks' in rank order, so that each holds the same bits.
__device__ __forceinline__ float hk_cluster_sum(float s, float* part) {
  if (threadIdx.x == 0) *part = s;
  hk_cluster_sync();
  float t = 0.0f;
#pragma unroll
  for (unsigned r = 0; r < HK_CLUSTER; ++r) t += hk_peer_ld(part, r);
  return t;
}
__device__ __forceinline__ float hk_cluster_max(float m, float* part) {
  if (threadIdx.x == 0) *part = m;
  hk_cluster_sync();
  float t = hk_neg_inf();
#pragma unroll
  for (unsigned r = 0; r < HK_CLUSTER; ++r) t = hk_max_nan(t, hk_peer_ld(part, r));
  return t;
}
)HK";
}

std::string floatLiteral(float value) {
  unsigned bits;
  static_assert(sizeof bits == sizeof value, "float is 32 bits");
  std::memcpy(&bits, &value, sizeof bits);
  char buf[80];
  std::snprintf(buf, sizeof buf, "__uint_as_float(0x%08xu) /* %.9g */", bits, static_cast<double>(value));
  return buf;
}

}  // namespace hotkernel::chain::detail
