/*
 * The CUDA runtime API commands, interposed (Note [Flush before foreign
 * commands] in CommandHook.h): each exported name of RuntimeCommands.h
 * forwards to libcudart's function of that name after the hook; the driver
 * entry points the runtime hands out are wrapped (Note [Driver entry points
 * handed out by pointer]). cudaStreamBeginCapture / cudaStreamEndCapture
 * themselves are CaptureInterpose.c's.
 */
#define _GNU_SOURCE
#include <stddef.h>

#include "CommandHook.h"
#include "DriverEntryPoints.h"
#include "RealSymbol.h"
#include "RuntimeCommands.h"

#define HK_LIBCUDART "libcudart.so"
#define HK_CUDA_SUCCESS 0

#define HK_EXPORT(name, family) HK_CALL(HK_EXPORT_, name, HK_SIG_##family)
#define HK_EXPORT_(name, kind, n, types)                                                                \
  static void* g_real_##name; /* atomic: libcudart's function, once resolved */                       \
  __attribute__((visibility("default"))) int name HK_PARAMS(n, types) {                                \
    hkBeforeCommand(kind);                                                                              \
    int(*real) HK_PARAMS(n, types) = (int(*) HK_PARAMS(n, types))hkResolveCached(&g_real_##name,       \
                                                                                 HK_LIBCUDART, #name); \
    if (!real) return HK_ERROR_NO_REAL_FUNCTION;                                                        \
    return real HK_ARGS(n, types);                                                                      \
  }
HK_RUNTIME_EXPORTS(HK_EXPORT)

/* ---- The driver entry points the runtime hands out. */

typedef int (*HkEntryPointFn)(const char* symbol, void** funcPtr, HkU64 flags, void* driverStatus);
typedef int (*HkEntryPointByVersionFn)(const char* symbol, void** funcPtr, HkU32 cudaVersion, HkU64 flags,
                                       void* driverStatus);

static int wrapEntryPoint(int rc, const char* symbol, void** funcPtr) {
  if (rc == HK_CUDA_SUCCESS && symbol && funcPtr && *funcPtr) *funcPtr = hkWrapDriverEntryPoint(symbol, *funcPtr);
  return rc;
}

#define HK_ENTRY_POINT(name)                                                                                \
  static void* g_real_##name;                                                                               \
  __attribute__((visibility("default"))) int name(const char* symbol, void** funcPtr, HkU64 flags,         \
                                                  void* driverStatus) {                                     \
    HkEntryPointFn real = (HkEntryPointFn)hkResolveCached(&g_real_##name, HK_LIBCUDART, #name);             \
    if (!real) return HK_ERROR_NO_REAL_FUNCTION;                                                            \
    return wrapEntryPoint(real(symbol, funcPtr, flags, driverStatus), symbol, funcPtr);                     \
  }
#define HK_ENTRY_POINT_BY_VERSION(name)                                                                     \
  static void* g_real_##name;                                                                               \
  __attribute__((visibility("default"))) int name(const char* symbol, void** funcPtr, HkU32 cudaVersion,   \
                                                  HkU64 flags, void* driverStatus) {                        \
    HkEntryPointByVersionFn real = (HkEntryPointByVersionFn)hkResolveCached(&g_real_##name, HK_LIBCUDART,   \
                                                                            #name);                         \
    if (!real) return HK_ERROR_NO_REAL_FUNCTION;                                                            \
    return wrapEntryPoint(real(symbol, funcPtr, cudaVersion, flags, driverStatus), symbol, funcPtr);        \
  }
HK_ENTRY_POINT(cudaGetDriverEntryPoint)
HK_ENTRY_POINT(cudaGetDriverEntryPoint_ptsz)
HK_ENTRY_POINT_BY_VERSION(cudaGetDriverEntryPointByVersion)
HK_ENTRY_POINT_BY_VERSION(cudaGetDriverEntryPointByVersion_ptsz)
