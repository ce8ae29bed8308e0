/*
 * The fake CUDA libraries of the shim's command tests (CommandHookTest.cpp,
 * bench/CommandHookBench.cpp): libcuda.so.1 and libcudart.so.12 built from
 * the shim's own command tables, each function recording its name and
 * arguments (as words, below) and returning the result set for the
 * calling thread. C and C++.
 */
#ifndef HOTKERNEL_TESTS_FAKE_CUDA_H
#define HOTKERNEL_TESTS_FAKE_CUDA_H

#include <stdint.h>

#include "CommandSignature.h"

#ifdef __cplusplus
extern "C" {
#endif

#define FAKE_MAX_ARGS 12

/* The last call a fake library received on this thread. */
typedef struct FakeCall {
  char name[64];
  int argc;
  unsigned long long args[FAKE_MAX_ARGS];
} FakeCall;

/* An argument as the fakes record it. */
static inline unsigned long long fakeWord_HkPtr(HkPtr p) { return (unsigned long long)(uintptr_t)p; }
static inline unsigned long long fakeWord_HkU32(HkU32 v) { return v; }
static inline unsigned long long fakeWord_HkInt(HkInt v) { return (unsigned long long)(long long)v; }
static inline unsigned long long fakeWord_HkSize(HkSize v) { return v; }
static inline unsigned long long fakeWord_HkU64(HkU64 v) { return v; }
static inline unsigned long long fakeWord_HkDim3(HkDim3 d) {
  return (unsigned long long)d.x | ((unsigned long long)d.y << 21) | ((unsigned long long)d.z << 42);
}
static inline unsigned long long fakeWord_HkPitchedPtr(HkPitchedPtr p) {
  return (unsigned long long)(uintptr_t)p.ptr ^ (p.pitch << 8) ^ (p.xsize << 24) ^ (p.ysize << 40);
}
static inline unsigned long long fakeWord_HkExtent(HkExtent e) {
  return e.width ^ (e.height << 20) ^ (e.depth << 40);
}

/* A distinct argument value for parameter `i` of a call numbered `seed`. */
static inline HkPtr fakeValue_HkPtr(unsigned seed, int i) {
  return (HkPtr)(uintptr_t)(0x10000ull * (seed + 1) + 0x100ull * (unsigned)i + 8);
}
static inline HkU32 fakeValue_HkU32(unsigned seed, int i) { return 1000u * seed + 7u * (unsigned)i + 1u; }
static inline HkInt fakeValue_HkInt(unsigned seed, int i) { return -(int)(100 * seed) - i; }
static inline HkSize fakeValue_HkSize(unsigned seed, int i) { return ((HkSize)seed << 33) + 3u * (unsigned)i + 5u; }
static inline HkU64 fakeValue_HkU64(unsigned seed, int i) { return 0xfeed000000000000ull + ((HkU64)seed << 16) + (HkU64)i; }
static inline HkDim3 fakeValue_HkDim3(unsigned seed, int i) {
  HkDim3 d = {seed + (unsigned)i + 1u, 2u * seed + 3u, (unsigned)i + 5u};
  return d;
}
static inline HkPitchedPtr fakeValue_HkPitchedPtr(unsigned seed, int i) {
  HkPitchedPtr p = {fakeValue_HkPtr(seed, i), 512u + seed, 256u + (unsigned)i, 64u};
  return p;
}
static inline HkExtent fakeValue_HkExtent(unsigned seed, int i) {
  HkExtent e = {128u + seed, 32u + (unsigned)i, 4u};
  return e;
}

/* libcudart.so.12 (the test programs link it). */
void fakecudart_last(FakeCall* out);
long fakecudart_thread_calls(void);
void fakecudart_set_result(int result);

/* libcuda.so.1 (dlopen'ed by path, FAKE_LIBCUDA_PATH; reach these with dlsym on its handle). */
typedef void (*FakeLastFn)(FakeCall* out);
typedef long (*FakeThreadCallsFn)(void);
typedef void (*FakeSetResultFn)(int result);
typedef void* (*FakeOwnFn)(const char* name);                             /* fakecuda_own */
typedef void* (*FakeResolveFn)(const char* symbol, int version, HkU64 flags); /* fakecuda_resolve */
typedef const char* (*FakeNameFn)(const void* fn);                         /* fakecuda_name */

/* cuGetProcAddress's per-thread default stream flag (CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM). */
#define FAKE_PER_THREAD_STREAM 2

#ifdef __cplusplus
}
#endif
#endif
