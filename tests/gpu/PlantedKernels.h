#pragma once
// The planted-kernel suite's sources (torch-free, shared by the GPU suite
// PlantedKernelsGpuTest.cpp and the CPU test that compiles every one of them).
//
// One softmax over the last dimension, `planted(in, out, rows, cols)`, float32
// or (with -DBF16) bfloat16, one 256-thread CTA per row (two with
// -DTWO_CTAS), with hooks that plant one bug each. Without a define it is
// correct (the control).

#include <string>
#include <vector>

namespace hotkernel::planted {

inline const char* kSource = R"(
#ifdef BF16
typedef unsigned short elem;
__device__ __forceinline__ float ld(elem v) { return __uint_as_float(((unsigned)v) << 16); }
__device__ __forceinline__ elem st(float f) {  // round to nearest even, NaN kept quiet
  unsigned u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (elem)0x7fc0u;
  u += 0x7fffu + ((u >> 16) & 1u);
  return (elem)(u >> 16);
}
#else
typedef float elem;
__device__ __forceinline__ float ld(elem v) { return v; }
__device__ __forceinline__ elem st(float f) { return f; }
#endif
#ifndef LOAD
#define LOAD(v) (v)
#endif
#ifndef LIMIT
#define LIMIT cols
#endif
#ifndef VALUE
#define VALUE(v) (v)
#endif
#ifdef EARLY_RETURN_AFTER
__device__ unsigned long long hk_calls;
#endif
#ifdef STATE_ACROSS_CALLS
#define HK_CACHE 131072
__device__ float hk_cache[HK_CACHE];
__device__ unsigned long long hk_calls;
#endif
#if defined(EARLY_RETURN_AFTER) || defined(STATE_ACROSS_CALLS)
__device__ unsigned int hk_blocks_done;
// Ends a launch: the last CTA to finish counts it (every CTA read hk_calls before).
__device__ void hk_count_launch() {
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    if (atomicAdd(&hk_blocks_done, 1u) == gridDim.x - 1) {
      hk_blocks_done = 0;
      __threadfence();
      atomicAdd(&hk_calls, 1ull);
    }
  }
}
#endif
#ifdef TWO_CTAS
__device__ float hk_partial[2 * 65536];
#endif
extern "C" __global__ void __launch_bounds__(256) planted(const elem* in, elem* out, long long rows, long long cols) {
  __shared__ float red[256];
  __shared__ float total;
#ifdef TWO_CTAS
  const long long row = blockIdx.x / 2;
  const int part = blockIdx.x % 2;
#else
  const long long row = blockIdx.x;
#endif
  if (row >= rows) return;
#ifdef FAULT_ON_ONE_ROW
  if (rows == 1) ((volatile float*)16)[threadIdx.x] = 1.0f;  // an illegal address
#endif
#ifdef SKIP_LAST_ROW
  if (rows > 1 && row == rows - 1) return;
#endif
#ifdef EARLY_RETURN_AFTER
  const bool lazy = hk_calls >= EARLY_RETURN_AFTER;
#endif
#ifdef STATE_ACROSS_CALLS
  const unsigned long long calls = hk_calls;
#endif
#ifdef WRONG_STRIDE
  const long long stride = cols < 1000 ? cols : 1000;  // the tuned variant's row length, assumed
#else
  const long long stride = cols;
#endif
  const elem* x = in + row * stride;
#ifdef ALIAS
  elem* y = const_cast<elem*>(x);
#else
  elem* y = out + row * stride;
#endif
  const int t = threadIdx.x;
#ifdef EARLY_RETURN_AFTER
  if (lazy) {
    hk_count_launch();
    return;
  }
#endif
#ifdef STATE_ACROSS_CALLS
  if (calls > 0 && rows * cols <= HK_CACHE) {  // every call after the first: the first call's result
    for (long long c = t; c < cols; c += 256) y[c] = st(hk_cache[row * cols + c]);
    hk_count_launch();
    return;
  }
#endif
  float m = -__int_as_float(0x7f800000);
  for (long long c = t; c < cols; c += 256) m = fmaxf(m, LOAD(ld(x[c])));
  red[t] = m;
  __syncthreads();
  for (int o = 128; o > 0; o >>= 1) {
    if (t < o) red[t] = fmaxf(red[t], red[t + o]);
    __syncthreads();
  }
  m = red[0];
  __syncthreads();
#ifdef HANG
  const long long start = clock64();
  while (clock64() - start < 8000000000LL) {}  // ~4 s at 2 GHz: "forever" for a 1 s watchdog
#endif
#ifdef ATOMIC_SUM
  if (t == 0) total = 0.0f;
  __syncthreads();
  for (long long c = t; c < cols; c += 256) atomicAdd(&total, expf(LOAD(ld(x[c])) - m));
  __syncthreads();
  const float s = total;
#else
  float s = 0.0f;
#ifdef TWO_CTAS
  const long long c0 = part ? cols / 2 : 0, c1 = part ? cols : cols / 2;
#else
  const long long c0 = 0, c1 = cols;
#endif
  for (long long c = c0 + t; c < c1; c += 256) {
    float e = expf(LOAD(ld(x[c])) - m);
#ifdef NAN_SWALLOW
    if (isnan(e)) e = 0.0f;  // a NaN (or inf - inf) element counts as nothing
#endif
    s += e;
  }
  red[t] = s;
  __syncthreads();
  for (int o = 128; o > 0; o >>= 1) {
    if (t < o) red[t] += red[t + o];
    __syncthreads();
  }
  s = red[0];
  __syncthreads();
#ifdef TWO_CTAS
  // Each CTA publishes its half's sum and takes its partner's without waiting
  // for it (the race): the second CTA of a row publishes late.
  if (t == 0) {
    if (part) {
      const long long start = clock64();
      while (clock64() - start < 200000LL) {}
    }
    hk_partial[2 * row + part] = s;
    __threadfence();
    total = s + *(volatile float*)&hk_partial[2 * row + (1 - part)];
  }
  __syncthreads();
  s = total;
#endif
#endif
#ifdef TWO_CTAS
  for (long long c = c0 + t; c < c1; c += 256) {
#else
  for (long long c = t; c < LIMIT; c += 256) {
#endif
    float v = VALUE(expf(LOAD(ld(x[c])) - m) / s);
#ifdef NAN_SWALLOW
    if (isnan(v)) v = 0.0f;
#endif
#ifdef WRONG_ON_ONE_ROW
    if (row == 37) v *= 0.5f;
#endif
#ifdef STATE_ACROSS_CALLS
    if (rows * cols <= HK_CACHE) hk_cache[row * cols + c] = v;
#endif
#ifdef PREFILL_CHECK
    if (isnan(ld(y[c]))) y[c] = st(v);  // writes only where it finds the harness's NaN
#else
    y[c] = st(v);
#endif
  }
#ifdef WRITE_BEFORE
  if (row == 0 && t == 0) y[-1] = st(0.0f);
#endif
#if defined(EARLY_RETURN_AFTER) || defined(STATE_ACROSS_CALLS)
  hk_count_launch();
#endif
}
)";

// One planted bug: its name and the defines that plant it.
struct Planted {
  std::string name;
  std::vector<std::string> defines;
};

// Every variant of kSource the suites use (the controls first).
inline std::vector<Planted> allPlanted() {
  return {
      {"control", {}},
      {"control-bf16", {"-DBF16"}},
      {"prefill-check", {"-DPREFILL_CHECK"}},
      {"early-return-after-n", {"-DEARLY_RETURN_AFTER=16"}},
      {"state-across-calls", {"-DSTATE_ACROSS_CALLS"}},
      {"relative-error-1pct-bf16", {"-DBF16", "-DVALUE(v)=((v)*1.01f)"}},
      {"zero-below-tolerance-bf16", {"-DBF16", "-DVALUE(v)=((v)<(1.0f/256.0f)?0.0f:(v))"}},
      {"write-past-end", {"-DLIMIT=(cols+1)"}},
      {"write-before-start", {"-DWRITE_BEFORE"}},
      {"skip-last-row", {"-DSKIP_LAST_ROW"}},
      {"wrong-on-one-row", {"-DWRONG_ON_ONE_ROW"}},
      {"fault-on-one-row", {"-DFAULT_ON_ONE_ROW"}},
      {"race-two-ctas-a-row", {"-DTWO_CTAS"}},
      {"wrong-stride", {"-DWRONG_STRIDE"}},
      {"nan-swallowing", {"-DNAN_SWALLOW"}},
      {"wrong-on-negated-inputs", {"-DLOAD(v)=fmaxf((v),-3.0f)"}},
      {"atomic-sum", {"-DATOMIC_SUM"}},
      {"alias", {"-DALIAS"}},
      {"hang", {"-DHANG"}},
  };
}

// The defines of the planted variant `name` (empty when unknown).
inline std::vector<std::string> plantedDefines(const std::string& name) {
  for (const Planted& p : allPlanted()) {
    if (p.name == name) return p.defines;
  }
  return {};
}

}  // namespace hotkernel::planted
