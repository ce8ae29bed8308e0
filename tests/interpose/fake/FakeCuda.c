/*
 * libcuda.so.1 for the shim's tests: every exported name of the shim's
 * driver table records its call (FakeRecord.h); cuGetProcAddress hands out
 * the fake's own functions as the driver does (the _v2 function from
 * version 12000 on, the _ptsz / _ptds one with the per-thread flag). Linked
 * with -Bsymbolic: its own references never reach the shim.
 */
#include <stdio.h>
#include <string.h>

#include "DriverCommands.h"
#include "FakeRecord.h"

HK_DRIVER_EXPORTS(FAKE_FUNCTION)

/* Not a command: handed out unwrapped. */
__attribute__((visibility("default"))) int cuMemAlloc_v2(HkPtr out, HkSize bytes) {
  const unsigned long long words[] = {fakeWord_HkPtr(out), bytes};
  return fakeRecord("cuMemAlloc_v2", 2, words);
}

typedef struct Own {
  const char* name;
  void* fn;
} Own;

int cuGetProcAddress(const char* symbol, void** pfn, int cudaVersion, HkU64 flags, void* status);
int cuGetProcAddress_v2(const char* symbol, void** pfn, int cudaVersion, HkU64 flags, void* status);

#define FAKE_OWN_ROW(name, family) {#name, (void*)name},
static const Own g_own[] = {HK_DRIVER_EXPORTS(FAKE_OWN_ROW){"cuMemAlloc_v2", (void*)cuMemAlloc_v2},
                            {"cuGetProcAddress", (void*)cuGetProcAddress},
                            {"cuGetProcAddress_v2", (void*)cuGetProcAddress_v2}};

__attribute__((visibility("default"))) void* fakecuda_own(const char* name) {
  for (size_t i = 0; i < sizeof g_own / sizeof g_own[0]; ++i) {
    if (strcmp(g_own[i].name, name) == 0) return g_own[i].fn;
  }
  return NULL;
}

__attribute__((visibility("default"))) const char* fakecuda_name(const void* fn) {
  for (size_t i = 0; i < sizeof g_own / sizeof g_own[0]; ++i) {
    if (g_own[i].fn == fn) return g_own[i].name;
  }
  return NULL;
}

__attribute__((visibility("default"))) void* fakecuda_resolve(const char* symbol, int version, HkU64 flags) {
  static const char* const kPerThread[] = {"_v2_ptsz", "_v2_ptds", "_ptsz", "_ptds"};
  char name[128];
  void* fn = NULL;
  if (flags & FAKE_PER_THREAD_STREAM) {
    for (size_t i = 0; i < 4 && !fn; ++i) {
      if (version < 12000 && strncmp(kPerThread[i], "_v2", 3) == 0) continue;
      snprintf(name, sizeof name, "%s%s", symbol, kPerThread[i]);
      fn = fakecuda_own(name);
    }
  }
  if (!fn && version >= 12000) {
    snprintf(name, sizeof name, "%s_v2", symbol);
    fn = fakecuda_own(name);
  }
  return fn ? fn : fakecuda_own(symbol);
}

static int getProcAddress(const char* symbol, void** pfn, int cudaVersion, HkU64 flags) {
  *pfn = fakecuda_resolve(symbol, cudaVersion, flags);
  return *pfn ? 0 : 500; /* CUDA_ERROR_NOT_FOUND */
}

__attribute__((visibility("default"))) int cuGetProcAddress(const char* symbol, void** pfn, int cudaVersion,
                                                            HkU64 flags, void* status) {
  (void)status;
  return getProcAddress(symbol, pfn, cudaVersion, flags);
}

__attribute__((visibility("default"))) int cuGetProcAddress_v2(const char* symbol, void** pfn, int cudaVersion,
                                                               HkU64 flags, void* status) {
  (void)status;
  return getProcAddress(symbol, pfn, cudaVersion, flags);
}

__attribute__((visibility("default"))) void fakecuda_last(FakeCall* out) { *out = t_last; }
__attribute__((visibility("default"))) long fakecuda_thread_calls(void) { return t_calls; }
__attribute__((visibility("default"))) void fakecuda_set_result(int result) { t_result = result; }
