#pragma once
// Generated chain kernels compiled for and run on the host CPU, for tests of
// the generator's code without a GPU (chain_host_test, the CPU fusion fuzz's
// --host-kernels).
//
// Note [Chain kernels on the host]
// An elementwise chain kernel (no row reductions) has no communication
// between threads: each thread reads its inputs, computes and stores its own
// vectors. Run one thread after the other with blockIdx / threadIdx set, the
// generated source computes on the host what it computes on a GPU, as long
// as the device library's functions mean the same there. So the harness takes
// the generated source, puts a host library in place of the device library
// (Note [Self-contained chain sources]: the text from its first line,
// `#define HK_ROW_THREADS`, to the kernel's signature; the same functions in
// plain C++ here, conversions by _Float16 and bit arithmetic, round to
// nearest even as cvt.rn), compiles
// every kernel of a batch in one translation unit with the host compiler the
// tests were built with (-ffp-contract=off: no fused multiply-add where the
// source writes none), loads it with dlopen and runs each kernel on its
// launch geometry. The transcendental functions are the host's libm, so a
// kernel that calls one agrees with the interpreter's Fused mode within a
// unit or two, not bit for bit; index arithmetic (layouts, cats, folded
// segments) is exact either way. A row kernel's threads talk (warp shuffles,
// shared memory, barriers), so each of its CTAs runs as blockDim host threads:
// __shared__ arrays are function statics (one CTA at a time), __syncthreads
// is a barrier of the CTA's threads, and a shuffle writes the lane's value to
// a slot, waits for the CTA, reads its partner's slot and waits again. That
// asks every thread of a CTA to reach each shuffle as often as the others,
// which the row kernel does (every thread runs every reduction, live row or
// not); a kernel that did not would hang here rather than pass.

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "TempDir.h"
#include "hotkernel/chain/ChainCodegen.h"
#include "hotkernel/runtime/Check.h"

namespace hotkernel::chain::testutil {

// The device library's functions for the host (Note [Chain kernels on the host]).
inline const char* hostChainLibrary() {
  return R"(#define HK_ROW_THREADS (HK_THREADS / HK_ROWS)
inline float hk_neg_inf() { return __uint_as_float(0xff800000u); }
inline float hk_id(float f) { return f; }
inline float hk_f16_to_f32(unsigned short h) { _Float16 v; std::memcpy(&v, &h, 2); return static_cast<float>(v); }
inline unsigned short hk_f32_to_f16(float f) {
  const _Float16 v = static_cast<_Float16>(f);
  unsigned short h;
  std::memcpy(&h, &v, 2);
  return h;
}
inline float hk_bf16_to_f32(unsigned short h) { return __uint_as_float(static_cast<unsigned>(h) << 16); }
inline unsigned short hk_f32_to_bf16(float f) {
  const unsigned u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<unsigned short>((u >> 16) | 0x40u);
  return static_cast<unsigned short>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
inline float hk_round_f16(float f) { return hk_f16_to_f32(hk_f32_to_f16(f)); }
inline float hk_round_bf16(float f) { return hk_bf16_to_f32(hk_f32_to_bf16(f)); }
inline float hk_sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }
inline float hk_silu(float x) { return x / (1.0f + expf(-x)); }
inline float hk_gelu_erf(float x) { return x * 0.5f * (1.0f + erff(x * 0.70710678118654752440f)); }
inline float hk_gelu_tanh(float x) {
  const float beta = 0.79788456080286535588f;
  const float kappa = 0.044715f;
  const float cube = x * x * x;
  return 0.5f * x * (1.0f + tanhf(beta * (x + kappa * cube)));
}
inline float hk_relu(float x) { return x < 0.0f ? 0.0f : x; }
inline float hk_sq(float x) { return x * x; }
inline float hk_cube(float x) { return x * x * x; }
inline float hk_max_nan(float a, float b) { return (a != a || a > b) ? a : b; }
inline float hk_hard_clip(float x) {
  const float s = x + 3.0f;
  const float lo = s < 0.0f ? 0.0f : s;
  return 6.0f < lo ? 6.0f : lo;
}
inline float hk_hardsigmoid(float x) { return hk_hard_clip(x) * (1.0f / 6.0f); }
inline float hk_hardswish(float x) { return x * hk_hard_clip(x) * (1.0f / 6.0f); }
inline float hk_leaky_relu(float x, float slope) { return x > 0.0f ? x : x * slope; }
inline float hk_softplus(float x) { return x > 20.0f ? x : log1pf(expf(x)); }
inline float hk_mish(float x) { return x * tanhf(log1pf(expf(x))); }
inline float hk_maximum(float a, float b) { return a != a ? a : b != b ? b : (a < b ? b : a); }
inline float hk_minimum(float a, float b) { return a != a ? a : b != b ? b : (b < a ? b : a); }
inline float hk_row_scale(float b) {
  const bool tiny = b != 0.0f && std::isinf(1.0f / b);
  return tiny ? 0x1p64f : 1.0f;
}
inline float hk_div_row(float a, float b) {
  const float k = hk_row_scale(b);
  return (a * (1.0f / (b * k))) * k;
}
// The device's accesses are pieces of at most 16 bytes, each aligned to its size.
constexpr std::size_t hk_piece(std::size_t element) { return element * HK_VEC < 16 ? element * HK_VEC : 16; }
inline float hk_row_sum(float v, float* buf) {
#if HK_ROW_THREADS <= 32
  for (int o = HK_ROW_THREADS / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
#else
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  if ((threadIdx.x & 31) == 0) buf[threadIdx.x >> 5] = v;
  __syncthreads();
  float s = 0.0f;
  for (int w = 0; w < HK_ROW_THREADS / 32; ++w) s += buf[w];
  return s;
#endif
}
inline float hk_row_max(float v, float* buf) {
#if HK_ROW_THREADS <= 32
  for (int o = HK_ROW_THREADS / 2; o > 0; o >>= 1) v = hk_max_nan(v, __shfl_xor_sync(0xffffffffu, v, o));
  return __shfl_sync(0xffffffffu, v, 0, HK_ROW_THREADS);
#else
  for (int o = 16; o > 0; o >>= 1) v = hk_max_nan(v, __shfl_xor_sync(0xffffffffu, v, o));
  if ((threadIdx.x & 31) == 0) buf[threadIdx.x >> 5] = v;
  __syncthreads();
  float m = hk_neg_inf();
  for (int w = 0; w < HK_ROW_THREADS / 32; ++w) m = hk_max_nan(m, buf[w]);
  return m;
#endif
}
#define HK_ACCESS(TAG, T, TO, FROM)                                                      \
  inline float hk_ld_##TAG(const T* p) { return TO(*p); }                                \
  inline void hk_st_##TAG(T* p, float f) { *p = FROM(f); }                               \
  inline void hk_load_##TAG(const T* p, float (&f)[HK_VEC]) {                            \
    if (reinterpret_cast<std::uintptr_t>(p) % hk_piece(sizeof(T)) != 0) std::abort();           \
    for (int j = 0; j < HK_VEC; ++j) f[j] = TO(p[j]);                                    \
  }                                                                                      \
  inline void hk_store_##TAG(T* p, const float (&f)[HK_VEC]) {                           \
    if (reinterpret_cast<std::uintptr_t>(p) % hk_piece(sizeof(T)) != 0) std::abort();           \
    for (int j = 0; j < HK_VEC; ++j) p[j] = FROM(f[j]);                                  \
  }
HK_ACCESS(f32, float, hk_id, hk_id)
HK_ACCESS(f16, unsigned short, hk_f16_to_f32, hk_f32_to_f16)
HK_ACCESS(bf16, unsigned short, hk_bf16_to_f32, hk_f32_to_bf16)
#undef HK_ACCESS
)";
}

// What every kernel of a batch shares: CUDA's names for the host.
inline const char* hostChainPrelude() {
  return R"(#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>
#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static
struct hk_host_dim3 { unsigned x = 0, y = 0, z = 0; };
static thread_local hk_host_dim3 blockIdx, threadIdx;
static hk_host_dim3 gridDim, blockDim;
// The CTA running now (one at a time): its barrier and the shuffles' slots.
struct hk_host_cta {
  std::mutex m;
  std::condition_variable cv;
  unsigned size = 0, count = 0, generation = 0;
  float slots[1024];
};
static hk_host_cta hk_cta;
inline void __syncthreads() {
  std::unique_lock<std::mutex> lock(hk_cta.m);
  const unsigned generation = hk_cta.generation;
  if (++hk_cta.count == hk_cta.size) {
    hk_cta.count = 0;
    ++hk_cta.generation;
    hk_cta.cv.notify_all();
  } else {
    hk_cta.cv.wait(lock, [&] { return generation != hk_cta.generation; });
  }
}
inline float hk_host_exchange(float v, unsigned from) {
  hk_cta.slots[threadIdx.x] = v;
  __syncthreads();
  const float r = hk_cta.slots[from];
  __syncthreads();
  return r;
}
inline float __shfl_xor_sync(unsigned, float v, int o) { return hk_host_exchange(v, threadIdx.x ^ static_cast<unsigned>(o)); }
inline float __shfl_sync(unsigned, float v, int src, int width) {
  return hk_host_exchange(v, (threadIdx.x & ~static_cast<unsigned>(width - 1)) + static_cast<unsigned>(src));
}
inline float __uint_as_float(unsigned u) { float f; std::memcpy(&f, &u, 4); return f; }
inline unsigned __float_as_uint(float f) { unsigned u; std::memcpy(&u, &f, 4); return u; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
)";
}

struct HostKernel {
  ChainIR ir;
  ChainKernelParams params;
  ChainLayout layout;
  int64_t rows = 0, cols = 0;
};

// Kernels compiled for the host in one translation unit (Note [Chain kernels on the host]).
class HostKernelBatch {
 public:
  // Throws Error when a kernel's source is not the device library, then the
  // kernel, or the host compiler fails (its output in the message).
  explicit HostKernelBatch(const std::vector<HostKernel>& kernels) : kernels_(kernels) {
    std::ostringstream tu;
    tu << hostChainPrelude();
    for (size_t k = 0; k < kernels.size(); ++k) {
      const HostKernel& h = kernels[k];
      std::string source = generateChainSource(h.ir, h.params, h.layout);
      const std::string entry = std::string("extern \"C\" __global__ void __launch_bounds__(HK_THREADS) ") +
                                kChainKernelName + "(";
      const size_t library = source.find("#define HK_ROW_THREADS");
      const size_t e = source.find(entry);
      HOTKERNEL_CHECK(library != std::string::npos && e != std::string::npos && library < e,
                      "the source is not the device library, then ", kChainKernelName);
      source.replace(library, e + entry.size() - library,
                     std::string(hostChainLibrary()) + "void " + kChainKernelName + "(");
      tu << "namespace hk_k" << k << " {\n" << source << "}\n#undef HK_THREADS\n#undef HK_VEC\n#undef HK_ROWS\n"
         << "#undef HK_ITEMS\n#undef HK_ROW_THREADS\n";
      // The runner: every thread of the grid in turn, the arguments in the kernel's order.
      // A row kernel's (or a transposed copy's) CTA as blockDim host threads, an elementwise kernel's threads one
      // after the other.
      // Note [Transposed copies]: a tile; a repeated chain's row kernel (Note [Repeated columns]) too.
      const bool talking = h.ir.hasReductions() || h.layout.transposed() || h.layout.repeated();
      tu << "extern \"C\" void hk_run_" << k
         << "(unsigned grid, unsigned block, const void* const* ptrs, const float* scalars, long long rows, "
            "long long cols) {\n  gridDim.x = grid;\n  blockDim.x = block;\n"
            "  for (unsigned b = 0; b < grid; ++b) {\n"
         << (talking ? "    hk_cta.size = block;\n    hk_cta.count = 0;\n    std::vector<std::thread> cta;\n" : "")
         << "    for (unsigned t = 0; t < block; ++t) {\n"
         << (talking ? "      cta.emplace_back([=] {\n" : "      {\n")
         << "      blockIdx.x = b;\n      threadIdx.x = t;\n      hk_k" << k << "::" << kChainKernelName << "(";
      const std::vector<ChainArg> args = chainKernelLayout(h.ir, h.params);
      for (size_t a = 0; a < args.size(); ++a) {
        tu << (a ? ", " : "");
        switch (args[a].kind) {
          case ChainArg::Kind::Input: tu << "ptrs[" << a << "]"; break;
          case ChainArg::Kind::ScalarInput: tu << "scalars[" << a << "]"; break;
          case ChainArg::Kind::Output: tu << "const_cast<void*>(ptrs[" << a << "])"; break;
          case ChainArg::Kind::Rows: tu << "rows"; break;
          case ChainArg::Kind::Cols: tu << "cols"; break;
        }
      }
      tu << ");\n      }" << (talking ? ");" : "") << "\n    }\n"
         << (talking ? "    for (std::thread& t : cta) t.join();\n" : "") << "  }\n}\n";
    }
    const std::string src = dir_.path() + "/kernels.cpp", lib = dir_.path() + "/kernels.so";
    std::ofstream(src) << tu.str();
    const std::string log = dir_.path() + "/compile.log";
    const auto quoted = [](const std::string& path) { return "'" + path + "'"; };  // paths without a quote
    const std::string command = quoted(HOTKERNEL_TEST_CXX) + " -std=c++17 -O1 -ffp-contract=off -pthread -shared -fPIC -o " +
                                quoted(lib) + " " + quoted(src) + " > " + quoted(log) + " 2>&1";
    if (std::system(command.c_str()) != 0) {
      std::ifstream in(log);
      std::stringstream text;
      text << in.rdbuf();
      HOTKERNEL_THROW("the host compile failed: ", command, "\n", text.str().substr(0, 4000));
    }
    handle_ = ::dlopen(lib.c_str(), RTLD_NOW | RTLD_LOCAL);
    HOTKERNEL_CHECK(handle_ != nullptr, "dlopen ", lib, ": ", ::dlerror());
  }
  ~HostKernelBatch() {
    if (handle_) ::dlclose(handle_);
  }
  HostKernelBatch(const HostKernelBatch&) = delete;
  HostKernelBatch& operator=(const HostKernelBatch&) = delete;

  // Runs kernel `k` on its launch geometry (chainLaunchGeometry) with the
  // chain's inputs (pointers to memory of their dtype's storage type, or
  // Scalar values) and outputs.
  void run(size_t k, const std::vector<ChainInputValue>& inputs, const std::vector<void*>& outputs) const {
    const HostKernel& h = kernels_.at(k);
    runArgs(k, chainKernelArgs(h.ir, inputs, outputs, h.rows, h.cols));
  }

  // The same from the launch's argument list (chainKernelArgs: what a plan's
  // launcher gets), in the kernel's parameter order.
  void runArgs(size_t k, const KernelArgs& args) const {
    const HostKernel& h = kernels_.at(k);
    const LaunchGeometry g = chainLaunchGeometry(h.ir, h.params, h.rows, h.cols, h.layout);
    HOTKERNEL_CHECK(args.valid() && args.size() >= 2, "a chain kernel's arguments end with rows and cols");
    std::vector<const void*> ptrs(args.size(), nullptr);
    std::vector<float> scalars(args.size(), 0.0f);
    for (size_t a = 0; a + 2 < args.size(); ++a) {
      if (args.kindAt(a) == KernelArgs::Kind::Pointer) ptrs[a] = args.pointerAt(a);
      if (args.kindAt(a) == KernelArgs::Kind::Float32) scalars[a] = args.float32At(a);
    }
    using Run = void (*)(unsigned, unsigned, const void* const*, const float*, long long, long long);
    auto fn = reinterpret_cast<Run>(::dlsym(handle_, ("hk_run_" + std::to_string(k)).c_str()));
    HOTKERNEL_CHECK(fn != nullptr, "no runner for kernel ", k);
    fn(g.gridX, g.blockX, ptrs.data(), scalars.data(), args.int64At(args.size() - 2), args.int64At(args.size() - 1));
  }

 private:
  std::vector<HostKernel> kernels_;
  test::TempDir dir_;
  void* handle_ = nullptr;
};

}  // namespace hotkernel::chain::testutil
