// ce_decode_probe: where the time of a decode cross_entropy call goes, on the
// GPU alone. Not part of the build or of CI: tools/gpu/probe-ce-decode.sh
// compiles it with nvcc on the GPU machine, next to the production template
// (ce_prod_launcher.cu, one object per configuration), and runs it.
//
// It times, with the project's method (L2 flushed by a 256 MiB memset, the GPU
// kept busy ~100 us by a spin kernel so that every launch is queued before the
// GPU reaches it, CUDA events around the one launch, every variant
// interleaved in rotating order, medians with an order-statistic 95% CI):
//   - floors: an empty kernel, an empty 8-CTA-cluster grid, a device copy of
//     the logits' bytes, a read-only pass over the logits with no cross-CTA step;
//   - the production kernel at the points the tuner serves;
//   - "split": the same math with no cluster. CTA (row, slice) streams its
//     slice to an online (max, sum) pair, takes the target logit from its
//     own registers when the target falls in its slice (the target index is
//     loaded by every thread beside the stream: no dependent load), stores
//     both to a workspace, takes one acquire-release ticket; the last CTA merges
//     each row's pairs in slice order, forms the losses and reduces them.
// Checks every mean against a float64 host reference. JSON to argv[1].
//
// Build: nvcc -O3 -arch=sm_90a -std=c++17 -I kernels/common (see the script).
#define HK_DTYPE 2
#define HK_VEC 8
#define HK_CLUSTER 8  // the prelude's cluster helpers
#define HK_STREAM_HINTS 0     // the prelude's plain accesses
#define HK_STREAM_L1_HINTS 0
#include "hk_prelude.cuh"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <functional>
#include <random>
#include <string>
#include <vector>

#define CK(x)                                                                              \
  do {                                                                                     \
    cudaError_t e_ = (x);                                                                  \
    if (e_ != cudaSuccess) {                                                               \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                        \
    }                                                                                      \
  } while (0)

typedef cudaError_t (*ProdLauncher)(unsigned, cudaStream_t, const void*, const long long*, void*, float*, long long,
                                    long long, long long);
#define PROD(name) extern "C" cudaError_t name(unsigned, cudaStream_t, const void*, const long long*, void*, float*, \
                                              long long, long long, long long);
#include "ce_prod_list.h"
#undef PROD
typedef cudaError_t (*SoftmaxLauncher)(unsigned, cudaStream_t, const void*, void*, long long, long long);
#define SMPROD(name) extern "C" cudaError_t name(unsigned, cudaStream_t, const void*, void*, long long, long long);
#include "sm_prod_list.h"
#undef SMPROD

__device__ __forceinline__ unsigned long long globalNs() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void k_spin(unsigned long long ns) {
  const unsigned long long start = globalNs();
  while (globalNs() - start < ns) {
  }
}

__global__ void k_empty() {}

__global__ void __cluster_dims__(8, 1, 1) k_empty_cluster() {}

// Block-wide merge of (m, s) in a fixed order; thread 0 gets the result.
template <int T>
__device__ __forceinline__ void blockPair(float& m, float& s) {
  __shared__ float bm[T / 32], bs[T / 32];
  hk_warp_pair_flat(m, s, 32);
  if ((threadIdx.x & 31) == 0) {
    bm[threadIdx.x >> 5] = m;
    bs[threadIdx.x >> 5] = s;
  }
  __syncthreads();
  if (threadIdx.x < 32) {
    m = threadIdx.x < T / 32 ? bm[threadIdx.x] : hk_neg_inf();
    s = threadIdx.x < T / 32 ? bs[threadIdx.x] : 0.0f;
    hk_warp_pair_flat(m, s, 32);
  }
}

// One 16-byte load: kind 0 plain, 1 with an L2 256-byte prefetch hint, 2 the
// same through the non-coherent path without L1 allocation, 3 with an L2
// evict_first policy, 4 kind 3 through the non-coherent path without L1
// allocation.
template <int K>
__device__ __forceinline__ hk_pack loadPack(const hk_pack* a) {
  if (K == 0) return *a;
  hk_pack p;
  unsigned* r = reinterpret_cast<unsigned*>(&p);
  if (K == 1) {
    asm volatile("ld.global.L2::256B.v4.u32 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "l"(a));
  } else if (K == 3 || K == 4) {
    unsigned long long drop;
    asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(drop));
    if (K == 3) {
      asm volatile("ld.global.L2::cache_hint.v4.u32 {%0,%1,%2,%3}, [%4], %5;"
                   : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                   : "l"(a), "l"(drop));
    } else {
      asm volatile("ld.global.nc.L1::no_allocate.L2::cache_hint.v4.u32 {%0,%1,%2,%3}, [%4], %5;"
                   : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                   : "l"(a), "l"(drop));
    }
  } else {
    asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "l"(a));
  }
  return p;
}

// Streams vectors [begin, end) of `src` (vector begin + k * T + tid) to an online
// pair; with tv >= 0, picks element `te` of vector tv into xt when this thread
// loads it.
template <int T, int U, int K = 0>
__device__ __forceinline__ void streamSlice(const hk_pack* src, int begin, int end, long long tv, int te, float& m,
                                            float& s, float& xt, bool& found) {
  m = hk_neg_inf();
  s = 0.0f;
  for (int v0 = begin + static_cast<int>(threadIdx.x); v0 < end; v0 += T * U) {
    hk_pack p[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int v = v0 + u * T;
      if (v < end) {
        p[u] = loadPack<K>(src + v);
      } else {
#pragma unroll
        for (int j = 0; j < HK_VEC; ++j) p[u].v[j] = hk_neg_inf_elem();
      }
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      if (v0 + u * T == tv && v0 + u * T < end) {
#pragma unroll
        for (int j = 0; j < HK_VEC; ++j) {
          if (j == te) xt = hk_to_float(p[u].v[j]);
        }
        found = true;
      }
    }
    hk_pair_fold(m, s, p);
  }
}

// Read-only floor: each CTA streams its slice and stores its pair; no cross-CTA step.
template <int T, int U, int S, int K = 0>
__global__ void __launch_bounds__(T) k_read(const hk_elem* x, float* ws, int cols) {
  const int row = blockIdx.x / S, slice = blockIdx.x % S;
  const int nvec = cols / HK_VEC, chunk = (nvec + S - 1) / S;
  const int begin = min(nvec, slice * chunk), end = min(nvec, begin + chunk);
  float m, s, xt = 0.0f;
  bool found = false;
  streamSlice<T, U, K>(reinterpret_cast<const hk_pack*>(x + static_cast<long long>(row) * cols), begin, end, -1, 0, m,
                       s, xt, found);
  blockPair<T>(m, s);
  if (threadIdx.x == 0) {
    ws[2 * blockIdx.x] = m;
    ws[2 * blockIdx.x + 1] = s;
  }
}

// Softmax's structural floor without math: a cluster of C CTAs a row, each CTA
// its slice into registers (I vectors a thread), a cluster barrier, the slice
// written back. B == false: no barrier (a register copy in the same geometry).
template <int T, int I, int C, bool B>
__global__ void __cluster_dims__(C, 1, 1) __launch_bounds__(T) k_rw(const hk_elem* x, hk_elem* y, int cols) {
  const int row = blockIdx.x / C;
  const unsigned rank = hk_cluster_rank();
  const int nvec = cols / HK_VEC, chunk = (nvec + C - 1) / C;
  const int begin = min(nvec, static_cast<int>(rank) * chunk), end = min(nvec, begin + chunk);
  const hk_pack* src = reinterpret_cast<const hk_pack*>(x + static_cast<long long>(row) * cols);
  hk_pack* dst = reinterpret_cast<hk_pack*>(y + static_cast<long long>(row) * cols);
  hk_pack p[I];
#pragma unroll
  for (int i = 0; i < I; ++i) {
    const int v = begin + i * T + static_cast<int>(threadIdx.x);
    if (v < end) p[i] = src[v];
  }
  if (B) {
    // Every thread's data has arrived before any CTA of the cluster writes.
    unsigned acc = 0;
#pragma unroll
    for (int i = 0; i < I; ++i) acc ^= reinterpret_cast<const unsigned*>(&p[i])[0];
    if (acc == 0x12345678u) dst[0] = p[0];  // keeps the loads before the barrier
    __syncthreads();
    hk_cluster_arrive();
    hk_cluster_wait();
  }
#pragma unroll
  for (int i = 0; i < I; ++i) {
    const int v = begin + i * T + static_cast<int>(threadIdx.x);
    if (v < end) dst[v] = p[i];
  }
}

// The same floor with the pairs exchanged by pushes instead of a cluster
// barrier (the exchange a softmax needs; here a dummy pair): each CTA
// st.async-es its pair into every peer's slot, completing the peer's
// mbarrier's transaction count, and waits on its own mbarrier for all C
// pairs. Nobody reads a peer's shared memory, and a CTA exits only after
// every peer's push into it has landed: no exit barrier. The mbarriers'
// initialization is published by a relaxed cluster arrive at the start,
// waited for just before the pushes (long after).
template <int T, int I, int C>
__global__ void __cluster_dims__(C, 1, 1) __launch_bounds__(T) k_rw_push(const hk_elem* x, hk_elem* y, int cols) {
  __shared__ alignas(8) unsigned long long bar;
  __shared__ alignas(8) float slots[2 * C];
  const int row = blockIdx.x / C;
  const unsigned rank = hk_cluster_rank();
  const unsigned barAddr = static_cast<unsigned>(__cvta_generic_to_shared(&bar));
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n\tfence.mbarrier_init.release.cluster;" ::"r"(barAddr)
                 : "memory");
  }
  __syncthreads();
  asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
  const int nvec = cols / HK_VEC, chunk = (nvec + C - 1) / C;
  const int begin = min(nvec, static_cast<int>(rank) * chunk), end = min(nvec, begin + chunk);
  const hk_pack* src = reinterpret_cast<const hk_pack*>(x + static_cast<long long>(row) * cols);
  hk_pack* dst = reinterpret_cast<hk_pack*>(y + static_cast<long long>(row) * cols);
  hk_pack p[I];
#pragma unroll
  for (int i = 0; i < I; ++i) {
    const int v = begin + i * T + static_cast<int>(threadIdx.x);
    if (v < end) p[i] = src[v];
  }
  unsigned acc = 0;
#pragma unroll
  for (int i = 0; i < I; ++i) acc ^= reinterpret_cast<const unsigned*>(&p[i])[0];
  __shared__ unsigned red[T / 32];
  for (int o = 16; o > 0; o >>= 1) acc ^= __shfl_xor_sync(0xffffffffu, acc, o);
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = acc;
  __syncthreads();
  asm volatile("barrier.cluster.wait.aligned;" ::: "memory");  // peers' mbarriers initialized
  if (threadIdx.x == 0) {
    unsigned long long state;
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 %0, [%1], %2;"
                 : "=l"(state)
                 : "r"(barAddr), "r"(8 * C)
                 : "memory");
    (void)state;
  }
  if (threadIdx.x < C) {
    const float a = __uint_as_float(red[0]), b = __uint_as_float(red[T / 32 - 1]);
    const unsigned slot = static_cast<unsigned>(__cvta_generic_to_shared(&slots[2 * rank]));
    unsigned rslot, rbar;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(rslot) : "r"(slot), "r"(threadIdx.x));
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(rbar) : "r"(barAddr), "r"(threadIdx.x));
    asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v2.f32 [%0], {%1, %2}, [%3];" ::"r"(rslot),
                 "f"(a), "f"(b), "r"(rbar)
                 : "memory");
  }
  asm volatile(
      "{\n\t.reg .pred p;\n\tWAIT_%=:\n\t"
      "mbarrier.try_wait.parity.shared::cta.b64 p, [%0], 0;\n\t"
      "@!p bra WAIT_%=;\n\t}" ::"r"(barAddr)
      : "memory");
  float sum = 0.0f;
#pragma unroll
  for (int k = 0; k < 2 * C; ++k) sum += slots[k];
  if (sum == 12345.0f) dst[0] = p[0];  // keeps the exchange
#pragma unroll
  for (int i = 0; i < I; ++i) {
    const int v = begin + i * T + static_cast<int>(threadIdx.x);
    if (v < end) dst[v] = p[i];
  }
}

__global__ void k_read_flush(const uint4* a, size_t n, unsigned* sink) {
  uint4 acc = make_uint4(0, 0, 0, 0);
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const uint4 v = a[i];
    acc.x ^= v.x;
    acc.y ^= v.y;
  }
  if ((acc.x ^ acc.y) == 0x9e3779b9u) *sink = acc.x;
}

// The split design (see the file comment). ws: [2 * grid) pairs, [rows) target
// logits, then a 32-bit counter that is 0 at launch (left 0).
template <int T, int U, int S>
__global__ void __launch_bounds__(T) k_split(const hk_elem* x, const long long* target, float* ws, hk_elem* out,
                                             int rows, int cols, long long ignoreIndex) {
  const int row = blockIdx.x / S, slice = blockIdx.x % S;
  const int nvec = cols / HK_VEC, chunk = (nvec + S - 1) / S;
  const int begin = min(nvec, slice * chunk), end = min(nvec, begin + chunk);
  const long long t = __ldg(target + row);
  const bool valid = t >= 0 && t < cols;
  float m, s, xt = 0.0f;
  bool found = false;
  streamSlice<T, U>(reinterpret_cast<const hk_pack*>(x + static_cast<long long>(row) * cols), begin, end,
                    valid ? t / HK_VEC : -1, static_cast<int>(t & (HK_VEC - 1)), m, s, xt, found);
  float* xts = ws + 2 * gridDim.x;
  if (found) xts[row] = xt;
  blockPair<T>(m, s);
  if (threadIdx.x == 0) {
    ws[2 * blockIdx.x] = m;
    ws[2 * blockIdx.x + 1] = s;
  }
  __shared__ bool last;
  unsigned* counter = reinterpret_cast<unsigned*>(xts + rows);
  __syncthreads();
  if (threadIdx.x == 0) {
    unsigned ticket;
    asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], 1;" : "=r"(ticket) : "l"(counter) : "memory");
    last = ticket == gridDim.x - 1;
  }
  __syncthreads();
  if (!last) return;
  float acc = 0.0f;
  long long count = 0;
  for (int r = threadIdx.x; r < rows; r += T) {
    float pm[S], ps[S];
#pragma unroll
    for (int k = 0; k < S; ++k) {
      pm[k] = __ldcg(ws + 2 * (r * S + k));
      ps[k] = __ldcg(ws + 2 * (r * S + k) + 1);
    }
    const long long tr = __ldg(target + r);
    const float xr = __ldcg(xts + r);
    float rm = pm[0], rs = ps[0];
#pragma unroll
    for (int k = 1; k < S; ++k) hk_pair_merge(rm, rs, pm[k], ps[k]);
    float loss;
    if (tr == ignoreIndex) {
      loss = 0.0f;
    } else if (tr < 0 || tr >= cols) {
      loss = hk_nan();
    } else {
      loss = hk_to_float(hk_from_float(-((xr - rm) - logf(rs))));
    }
    acc += loss;
    count += tr != ignoreIndex ? 1 : 0;
  }
  __shared__ float redS[T / 32];
  __shared__ long long redC[T / 32];
  acc = hk_warp_sum(acc, 32);
  for (int o = 16; o > 0; o >>= 1) count += __shfl_xor_sync(0xffffffffu, count, o);
  if ((threadIdx.x & 31) == 0) {
    redS[threadIdx.x >> 5] = acc;
    redC[threadIdx.x >> 5] = count;
  }
  __syncthreads();
  if (threadIdx.x < 32) {
    acc = threadIdx.x < T / 32 ? redS[threadIdx.x] : 0.0f;
    count = threadIdx.x < T / 32 ? redC[threadIdx.x] : 0;
    acc = hk_warp_sum(acc, 32);
    for (int o = 16; o > 0; o >>= 1) count += __shfl_xor_sync(0xffffffffu, count, o);
    if (threadIdx.x == 0) {
      out[0] = hk_from_float(__fdiv_rn(acc, static_cast<float>(count)));
      *counter = 0u;
    }
  }
}

struct Variant {
  std::string name;
  int rows;
  std::function<void(cudaStream_t)> launch;
  std::function<double()> result;  // the mean loss it computed (NaN: not a loss)
  std::vector<float> us;       // the method's flush
  std::vector<float> cleanUs;  // L2 emptied by reads (diagnosis)
};

static float bf16ToFloat(unsigned short b) {
  unsigned u = static_cast<unsigned>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

int main(int argc, char** argv) {
  const char* outPath = argc > 1 ? argv[1] : "ce_decode_probe.json";
  const int reps = argc > 2 ? std::atoi(argv[2]) : 41;
  const int cols = 128256;
  const int maxRows = 32;
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  int driver = 0;
  CK(cudaDriverGetVersion(&driver));
  cudaStream_t st;
  CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));

  // Logits like ops_bench's: randn * 3 in bf16; targets spread over the row.
  std::vector<unsigned short> hx(static_cast<size_t>(maxRows) * cols);
  std::mt19937 gen(1234);
  std::normal_distribution<float> nd(0.0f, 3.0f);
  for (auto& v : hx) {
    float f = nd(gen);
    unsigned u;
    std::memcpy(&u, &f, 4);
    u += 0x7fffu + ((u >> 16) & 1u);
    v = static_cast<unsigned short>(u >> 16);
  }
  std::vector<long long> ht(maxRows);
  for (int r = 0; r < maxRows; ++r) ht[r] = (static_cast<long long>(r) * 40009 + 17) % cols;
  auto refMean = [&](int rows) {
    double acc = 0.0;
    for (int r = 0; r < rows; ++r) {
      const unsigned short* row = hx.data() + static_cast<size_t>(r) * cols;
      double mx = -INFINITY;
      for (int c = 0; c < cols; ++c) mx = std::max(mx, static_cast<double>(bf16ToFloat(row[c])));
      double s = 0.0;
      for (int c = 0; c < cols; ++c) s += std::exp(static_cast<double>(bf16ToFloat(row[c])) - mx);
      acc += -((bf16ToFloat(row[ht[r]]) - mx) - std::log(s));
    }
    return acc / rows;
  };

  unsigned short* dx;
  unsigned short* dy;
  long long* dt;
  float* ws;
  unsigned short* dout;
  unsigned char* flush;
  const size_t flushBytes = 256u << 20;
  CK(cudaMalloc(&dx, hx.size() * 2));
  CK(cudaMalloc(&dy, hx.size() * 2));
  CK(cudaMalloc(&dt, maxRows * 8));
  CK(cudaMalloc(&flush, flushBytes));
  // One workspace per variant so no variant sees another's counter.
  const int kWs = 64;
  const size_t wsFloats = 4096;
  CK(cudaMalloc(&ws, kWs * wsFloats * 4));
  CK(cudaMemset(ws, 0, kWs * wsFloats * 4));
  CK(cudaMalloc(&dout, kWs * 64 * 2));
  CK(cudaMemcpy(dx, hx.data(), hx.size() * 2, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dt, ht.data(), maxRows * 8, cudaMemcpyHostToDevice));

  std::vector<Variant> vs;
  auto wsOf = [&](size_t i) { return ws + i * wsFloats; };
  auto outOf = [&](size_t i) { return dout + i * 64; };
  auto meanOf = [&](size_t i) {
    return [=]() {
      unsigned short h;
      CK(cudaMemcpy(&h, outOf(i), 2, cudaMemcpyDeviceToHost));
      return static_cast<double>(bf16ToFloat(h));
    };
  };
  auto noMean = []() { return std::nan(""); };
  for (int rows : {1, 32}) {
    const std::string shape = "[" + std::to_string(rows) + ", 128256] ";
    vs.push_back({shape + "empty kernel", rows, [](cudaStream_t s) { k_empty<<<1, 32, 0, s>>>(); }, noMean, {}});
    vs.push_back({shape + "empty cluster-8 grid x " + std::to_string(rows), rows,
                  [rows](cudaStream_t s) { k_empty_cluster<<<8 * rows, 256, 0, s>>>(); }, noMean, {}});
    vs.push_back({shape + "copy of the logits (cudaMemcpyAsync)", rows,
                  [=](cudaStream_t s) { CK(cudaMemcpyAsync(dy, dx, static_cast<size_t>(rows) * cols * 2,
                                                          cudaMemcpyDeviceToDevice, s)); },
                  noMean, {}});
  }
#define ADD_READ(R, T, U, S)                                                                                   \
  {                                                                                                            \
    const size_t i = vs.size();                                                                                \
    vs.push_back({"[" #R ", 128256] read-only floor " #S " x " #T " x u" #U, R,                                 \
                  [=](cudaStream_t s) { k_read<T, U, S><<<R * S, T, 0, s>>>(reinterpret_cast<const hk_elem*>(dx), wsOf(i), cols); }, \
                  noMean, {}});                                                                                \
  }
#define ADD_SPLIT(R, T, U, S)                                                                                  \
  {                                                                                                            \
    const size_t i = vs.size();                                                                                \
    vs.push_back({"[" #R ", 128256] split mean " #S " x " #T " x u" #U, R,                                      \
                  [=](cudaStream_t s) {                                                                        \
                    k_split<T, U, S><<<R * S, T, 0, s>>>(reinterpret_cast<const hk_elem*>(dx), dt, wsOf(i),     \
                                                        outOf(i), R, cols, -100);                              \
                  },                                                                                           \
                  meanOf(i), {}});                                                                             \
  }
#define ADD_PROD(R, C, T, U, RED, TREE, fn)                                                                    \
  {                                                                                                            \
    const size_t i = vs.size();                                                                                \
    vs.push_back({"[" #R ", 128256] production (" TREE ") " #RED " cluster " #C " x " #T " x u" #U, R,           \
                  [=](cudaStream_t s) { CK(fn(R * C, s, dx, dt, outOf(i), wsOf(i), R, cols, -100)); },          \
                  std::string(#RED) == "mean" ? std::function<double()>(meanOf(i)) : std::function<double()>(noMean), {}}); \
  }
#define ADD_READK(R, T, U, S, K)                                                                               \
  {                                                                                                            \
    const size_t i = vs.size();                                                                                \
    vs.push_back({"[" #R ", 128256] read-only floor " #S " x " #T " x u" #U " load kind " #K, R,                \
                  [=](cudaStream_t s) {                                                                        \
                    k_read<T, U, S, K><<<R * S, T, 0, s>>>(reinterpret_cast<const hk_elem*>(dx), wsOf(i), cols); \
                  },                                                                                           \
                  noMean, {}});                                                                                \
  }
#define ADD_RW(R, T, I, C, B)                                                                                  \
  if (C > 8) CK(cudaFuncSetAttribute(k_rw<T, I, C, B>, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));     \
  vs.push_back({std::string("[" #R ", 128256] softmax floor: registers, cluster " #C " x " #T " x items " #I) + \
                    (B ? ", barrier" : ", no barrier"),                                                        \
                R,                                                                                             \
                [=](cudaStream_t s) {                                                                          \
                  k_rw<T, I, C, B><<<R * C, T, 0, s>>>(reinterpret_cast<const hk_elem*>(dx),                    \
                                                      reinterpret_cast<hk_elem*>(dy), cols);                   \
                },                                                                                             \
                noMean, {}});
#define ADD_RWP(R, T, I, C)                                                                                    \
  if (C > 8) CK(cudaFuncSetAttribute(k_rw_push<T, I, C>, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));   \
  vs.push_back({"[" #R ", 128256] softmax floor: registers, cluster " #C " x " #T " x items " #I ", pushes", R,  \
                [=](cudaStream_t s) {                                                                          \
                  k_rw_push<T, I, C><<<R * C, T, 0, s>>>(reinterpret_cast<const hk_elem*>(dx),                  \
                                                        reinterpret_cast<hk_elem*>(dy), cols);                 \
                },                                                                                             \
                noMean, {}});
#define ADD_SMPROD(R, C, T, I, TREE, fn)                                                                       \
  vs.push_back({"[" #R ", 128256] production (" TREE ") softmax cluster " #C " x " #T " x items " #I, R,         \
                [=](cudaStream_t s) { CK(fn(R * C, s, dx, dy, R, cols)); }, noMean, {}});
  ADD_READK(32, 256, 4, 8, 1)
  ADD_READK(32, 256, 4, 8, 2)
  ADD_READK(32, 256, 4, 8, 3)
  ADD_READK(32, 256, 4, 8, 4)
  ADD_READ(8, 256, 4, 8)
  ADD_READ(16, 256, 4, 8)
  ADD_READ(1, 256, 4, 8)
  ADD_RW(32, 256, 8, 8, true)
  ADD_RW(32, 256, 8, 8, false)
  ADD_RW(32, 128, 8, 16, true)
  ADD_RW(1, 256, 4, 16, true)
  ADD_RWP(32, 256, 8, 8)
  ADD_RWP(32, 128, 8, 16)
  ADD_RWP(1, 256, 4, 16)
#include "sm_prod_add.h"  // ADD_SMPROD(rows, cluster, threads, items, tree, launcher) lines
  ADD_READ(32, 256, 8, 8)
  ADD_READ(32, 256, 4, 8)
  ADD_READ(32, 128, 8, 16)
  ADD_READ(32, 512, 8, 4)
  ADD_SPLIT(32, 256, 8, 8)
  ADD_SPLIT(32, 256, 4, 8)
  ADD_SPLIT(32, 128, 8, 16)
  ADD_SPLIT(32, 128, 4, 16)
  ADD_SPLIT(32, 512, 8, 4)
  ADD_SPLIT(32, 512, 4, 4)
  ADD_SPLIT(32, 1024, 4, 4)
  ADD_SPLIT(1, 512, 2, 16)
  ADD_SPLIT(1, 256, 2, 32)
  ADD_SPLIT(1, 128, 2, 64)
  ADD_SPLIT(1, 256, 4, 16)
#include "ce_prod_add.h"  // ADD_PROD(rows, cluster, threads, unroll, reduction, tree, launcher) lines

  // Warm-up and check.
  for (auto& v : vs) {
    v.launch(st);
    const cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) {
      std::fprintf(stderr, "%s: %s\n", v.name.c_str(), cudaGetErrorString(e));
      return 1;
    }
  }
  CK(cudaStreamSynchronize(st));
  for (auto& v : vs) v.launch(st);
  CK(cudaStreamSynchronize(st));
  const double ref1 = refMean(1), ref32 = refMean(32);
  int bad = 0;
  for (auto& v : vs) {
    const double got = v.result();
    if (std::isnan(got)) continue;
    const double ref = v.rows == 1 ? ref1 : ref32;
    const bool ok = std::fabs(got - ref) <= 0.01 * std::fabs(ref) + 1e-3;
    if (!ok) ++bad;
    std::printf("check %-52s mean %.5f ref %.5f %s\n", v.name.c_str(), got, ref, ok ? "ok" : "WRONG");
  }

  // Softmax outputs against a float64 reference: every element within 2^-7
  // relative (bf16 keeps 8 bits) plus 1e-6 absolute. dy is poisoned (NaN)
  // before each variant runs, so a variant that writes nothing fails.
  {
    std::vector<double> ref(static_cast<size_t>(maxRows) * cols);
    for (int r = 0; r < maxRows; ++r) {
      const unsigned short* row = hx.data() + static_cast<size_t>(r) * cols;
      double mx = -INFINITY, sum = 0.0;
      for (int c = 0; c < cols; ++c) mx = std::max(mx, static_cast<double>(bf16ToFloat(row[c])));
      for (int c = 0; c < cols; ++c) sum += std::exp(static_cast<double>(bf16ToFloat(row[c])) - mx);
      for (int c = 0; c < cols; ++c) ref[static_cast<size_t>(r) * cols + c] = std::exp(bf16ToFloat(row[c]) - mx) / sum;
    }
    std::vector<unsigned short> hy(hx.size());
    for (auto& v : vs) {
      if (v.name.find("production (") == std::string::npos || v.name.find("softmax") == std::string::npos) continue;
      CK(cudaMemsetAsync(dy, 0xff, hx.size() * 2, st));
      v.launch(st);
      CK(cudaStreamSynchronize(st));
      CK(cudaMemcpy(hy.data(), dy, static_cast<size_t>(v.rows) * cols * 2, cudaMemcpyDeviceToHost));
      double worst = 0.0;
      size_t bads = 0;
      for (size_t k = 0; k < static_cast<size_t>(v.rows) * cols; ++k) {
        const double got = bf16ToFloat(hy[k]);
        const double err = std::fabs(got - ref[k]);
        if (!(err <= std::ldexp(ref[k], -7) + 1e-6)) ++bads;
        if (err / (ref[k] + 1e-6) > worst || std::isnan(got)) worst = std::isnan(got) ? INFINITY : err / (ref[k] + 1e-6);
      }
      if (bads) ++bad;
      std::printf("check %-60s worst relative error %.3g, %zu out of tolerance %s\n", v.name.c_str(), worst, bads,
                  bads ? "WRONG" : "ok");
    }
  }

  const unsigned long long spinNs = 100000;  // ~100 us, like ops_bench's torch.cuda._sleep
  const size_t n = vs.size();
  std::vector<cudaEvent_t> ev(2 * n * reps);
  for (auto& e : ev) CK(cudaEventCreate(&e));
  unsigned* sink = reinterpret_cast<unsigned*>(ws + (kWs - 1) * wsFloats);
  for (int pass = 0; pass < 2; ++pass) {
  // pass 0: the method's flush (a memset: L2 left full of dirty lines);
  // pass 1, a diagnosis: L2 emptied by reading 256 MiB (clean lines).
  std::vector<std::vector<float>> us(n);
  for (int r = 0; r < reps; ++r) {
    for (size_t k = 0; k < n; ++k) {
      const size_t j = (k + r) % n;
      if (pass == 0) {
        CK(cudaMemsetAsync(flush, r & 0xff, flushBytes, st));
      } else {
        k_read_flush<<<4 * prop.multiProcessorCount, 512, 0, st>>>(reinterpret_cast<const uint4*>(flush), flushBytes / 16, sink);
      }
      k_spin<<<1, 1, 0, st>>>(spinNs);
      CK(cudaEventRecord(ev[2 * (r * n + j)], st));
      vs[j].launch(st);
      CK(cudaEventRecord(ev[2 * (r * n + j) + 1], st));
    }
    CK(cudaStreamSynchronize(st));
  }
  for (int r = 0; r < reps; ++r) {
    for (size_t j = 0; j < n; ++j) {
      float ms;
      CK(cudaEventElapsedTime(&ms, ev[2 * (r * n + j)], ev[2 * (r * n + j) + 1]));
      (pass == 0 ? vs[j].us : us[j]).push_back(ms * 1e3f);
    }
  }
  if (pass == 1) {
    for (size_t j = 0; j < n; ++j) vs[j].cleanUs = us[j];
  }
  }
  // After the timing: the results still right (counters reset every launch).
  for (auto& v : vs) {
    const double got = v.result();
    if (std::isnan(got)) continue;
    const double ref = v.rows == 1 ? ref1 : ref32;
    if (!(std::fabs(got - ref) <= 0.01 * std::fabs(ref) + 1e-3)) {
      ++bad;
      std::printf("after timing: %s WRONG (%.5f vs %.5f)\n", v.name.c_str(), got, ref);
    }
  }

  FILE* f = std::fopen(outPath, "w");
  char date[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  std::fprintf(f, "{\n  \"format\": \"hotkernel-ce-decode-probe\", \"version\": 1, \"date\": \"%s\",\n", date);
  std::fprintf(f, "  \"machine\": {\"gpu\": \"%s\", \"driver\": %d, \"sms\": %d},\n", prop.name, driver,
               prop.multiProcessorCount);
  std::fprintf(f, "  \"method\": \"L2 flushed (256 MiB memset), ~100 us spin, CUDA events around one launch, "
                  "variants interleaved in rotating order; median and order-statistic 95%% CI. "
                  "readFlush*: the same with L2 emptied by reading 256 MiB instead (a diagnosis, not the method)\",\n");
  std::fprintf(f, "  \"reps\": %d, \"checksFailed\": %d,\n  \"results\": [\n", reps, bad);
  // 95% CI of the median by order statistics: ranks m/2 -+ 0.98 sqrt(m).
  auto stats = [](std::vector<float> u, float& med, float& lo, float& hi) {
    std::sort(u.begin(), u.end());
    const size_t m = u.size();
    const int half = static_cast<int>(std::ceil(0.98 * std::sqrt(static_cast<double>(m))));
    med = u[m / 2];
    lo = u[static_cast<size_t>(std::max<int>(0, static_cast<int>(m / 2) - half))];
    hi = u[std::min(m - 1, m / 2 + half)];
  };
  std::printf("%-72s %22s %22s\n", "variant", "memset flush (method)", "read flush (diagnosis)");
  for (size_t j = 0; j < n; ++j) {
    float med, lo, hi, cmed, clo, chi;
    stats(vs[j].us, med, lo, hi);
    stats(vs[j].cleanUs, cmed, clo, chi);
    std::printf("%-72s %6.2f [%6.2f, %6.2f] %6.2f [%6.2f, %6.2f]\n", vs[j].name.c_str(), med, lo, hi, cmed, clo, chi);
    std::fprintf(f,
                 "    {\"name\": \"%s\", \"medianUs\": %.3f, \"ciLowUs\": %.3f, \"ciHighUs\": %.3f, "
                 "\"readFlushMedianUs\": %.3f, \"readFlushCiLowUs\": %.3f, \"readFlushCiHighUs\": %.3f}%s\n",
                 vs[j].name.c_str(), med, lo, hi, cmed, clo, chi, j + 1 < n ? "," : "");
  }
  std::fprintf(f, "  ]\n}\n");
  std::fclose(f);
  return bad == 0 ? 0 : 2;
}
