/*
 * The CUDA driver API commands, interposed (Note [Flush before foreign
 * commands] in CommandHook.h): each exported name of DriverCommands.h
 * forwards to libcuda's function of that name after the hook; the wrappers
 * of Note [Driver entry points handed out by pointer]; cuGetProcAddress,
 * whose answers are wrapped.
 */
#define _GNU_SOURCE
#include <stddef.h>
#include <string.h>

#include "CommandHook.h"
#include "DriverCommands.h"
#include "DriverEntryPoints.h"
#include "RealSymbol.h"

#define HK_LIBCUDA "libcuda.so"
#define HK_CUDA_SUCCESS 0

/* Defined here, not in CommandHook.c: a program that links the hook without the
 * command wrappers (yield_gpu_tests carries only the capture wrappers) reports
 * no protocol, so nothing is deferred there (Note [The command hook protocol]). */
__attribute__((visibility("default"))) int hotkernel_shim_command_hook_version(void) {
  return HOTKERNEL_SHIM_COMMAND_HOOK_VERSION;
}

/* ---- Exported names: bound by symbol (libraries linked to libcuda, Triton's utilities). */

#define HK_EXPORT(name, family) HK_CALL(HK_EXPORT_, name, HK_SIG_##family)
#define HK_EXPORT_(name, kind, n, types)                                                              \
  static void* g_real_##name; /* atomic: libcuda's function, once resolved */                       \
  __attribute__((visibility("default"))) int name HK_PARAMS(n, types) {                              \
    hkBeforeCommand(kind);                                                                            \
    int(*real) HK_PARAMS(n, types) = (int(*) HK_PARAMS(n, types))hkResolveCached(&g_real_##name,     \
                                                                                 HK_LIBCUDA, #name); \
    if (!real) return HK_ERROR_NO_REAL_FUNCTION;                                                      \
    return real HK_ARGS(n, types);                                                                    \
  }
HK_DRIVER_EXPORTS(HK_EXPORT)

/* ---- Slot wrappers: handed out by pointer (Note [Driver entry points handed out by pointer]). */

typedef struct HkDriverFamily {
  const char* name;
  void** reals;               /* HK_DRIVER_SLOTS entries, atomic; NULL: free */
  void* const* wrappers;      /* HK_DRIVER_SLOTS entries */
} HkDriverFamily;

#define HK_SLOT(family, kind, n, types, i)                                                  \
  static int family##_slot##i HK_PARAMS(n, types) {                                          \
    hkBeforeCommand(kind);                                                                   \
    int(*real) HK_PARAMS(n, types) =                                                         \
        (int(*) HK_PARAMS(n, types))__atomic_load_n(&g_slots_##family[i], __ATOMIC_ACQUIRE); \
    return real HK_ARGS(n, types);                                                           \
  }
#define HK_FAMILY(family) HK_CALL(HK_FAMILY_, family, HK_SIG_##family)
#define HK_FAMILY_(family, kind, n, types)                                                              \
  static void* g_slots_##family[HK_DRIVER_SLOTS];                                                       \
  HK_SLOT(family, kind, n, types, 0)                                                                    \
  HK_SLOT(family, kind, n, types, 1)                                                                    \
  HK_SLOT(family, kind, n, types, 2)                                                                    \
  HK_SLOT(family, kind, n, types, 3)                                                                    \
  HK_SLOT(family, kind, n, types, 4)                                                                    \
  HK_SLOT(family, kind, n, types, 5)                                                                    \
  static void* const g_wrappers_##family[HK_DRIVER_SLOTS] = {(void*)family##_slot0, (void*)family##_slot1, \
                                                             (void*)family##_slot2, (void*)family##_slot3, \
                                                             (void*)family##_slot4, (void*)family##_slot5};
_Static_assert(HK_DRIVER_SLOTS == 6, "HK_FAMILY_ defines one wrapper per slot");
HK_DRIVER_FAMILIES(HK_FAMILY)

#define HK_FAMILY_ROW(family) {#family, g_slots_##family, g_wrappers_##family},
static const HkDriverFamily g_families[] = {HK_DRIVER_FAMILIES(HK_FAMILY_ROW)};

/* ---- cuGetProcAddress: the driver's answer for a command, wrapped. */

/* cuGetProcAddress_v2's parameters; the v1 function takes the first four. */
typedef int (*HkGetProcAddressFn)(const char* symbol, void** pfn, int cudaVersion, HkU64 flags, void* symbolStatus);

static int wrapAnswer(int rc, const char* symbol, void** pfn) {
  if (rc == HK_CUDA_SUCCESS && symbol && pfn && *pfn) *pfn = hkWrapDriverEntryPoint(symbol, *pfn);
  return rc;
}

static int getProcAddressThrough(HkGetProcAddressFn real, const char* symbol, void** pfn, int cudaVersion,
                                 HkU64 flags, void* symbolStatus) {
  if (!real) return HK_ERROR_NO_REAL_FUNCTION;
  return wrapAnswer(real(symbol, pfn, cudaVersion, flags, symbolStatus), symbol, pfn);
}

static void* g_realGetProcAddress;   /* atomic */
static void* g_realGetProcAddressV2; /* atomic */

__attribute__((visibility("default"))) int cuGetProcAddress(const char* symbol, void** pfn, int cudaVersion,
                                                            HkU64 flags, void* symbolStatus) {
  return getProcAddressThrough(
      (HkGetProcAddressFn)hkResolveCached(&g_realGetProcAddress, HK_LIBCUDA, "cuGetProcAddress"), symbol, pfn,
      cudaVersion, flags, symbolStatus);
}

__attribute__((visibility("default"))) int cuGetProcAddress_v2(const char* symbol, void** pfn, int cudaVersion,
                                                               HkU64 flags, void* symbolStatus) {
  return getProcAddressThrough(
      (HkGetProcAddressFn)hkResolveCached(&g_realGetProcAddressV2, HK_LIBCUDA, "cuGetProcAddress_v2"), symbol,
      pfn, cudaVersion, flags, symbolStatus);
}

/* cuGetProcAddress handed out by pointer (dlsym on libcuda's handle, or itself asked for). */
static void* g_slots_cuGetProcAddress[HK_DRIVER_SLOTS];
#define HK_GET_PROC_SLOT(i)                                                                                    \
  static int cuGetProcAddress_slot##i(const char* symbol, void** pfn, int cudaVersion, HkU64 flags,          \
                                      void* symbolStatus) {                                                   \
    return getProcAddressThrough(                                                                             \
        (HkGetProcAddressFn)__atomic_load_n(&g_slots_cuGetProcAddress[i], __ATOMIC_ACQUIRE), symbol, pfn,     \
        cudaVersion, flags, symbolStatus);                                                                    \
  }
HK_GET_PROC_SLOT(0)
HK_GET_PROC_SLOT(1)
HK_GET_PROC_SLOT(2)
HK_GET_PROC_SLOT(3)
HK_GET_PROC_SLOT(4)
HK_GET_PROC_SLOT(5)
static void* const g_wrappers_cuGetProcAddress[HK_DRIVER_SLOTS] = {
    (void*)cuGetProcAddress_slot0, (void*)cuGetProcAddress_slot1, (void*)cuGetProcAddress_slot2,
    (void*)cuGetProcAddress_slot3, (void*)cuGetProcAddress_slot4, (void*)cuGetProcAddress_slot5};
static const HkDriverFamily g_getProcAddressFamily = {"cuGetProcAddress", g_slots_cuGetProcAddress,
                                                      g_wrappers_cuGetProcAddress};

/* ---- Lookup. */

/* The entry point of an exported name: the name without its _ptsz / _ptds and then _v2 / _v3 suffix. */
static size_t entryPointLength(const char* symbol) {
  size_t n = strlen(symbol);
  if (n > 5 && (strcmp(symbol + n - 5, "_ptsz") == 0 || strcmp(symbol + n - 5, "_ptds") == 0)) n -= 5;
  if (n > 3 && symbol[n - 3] == '_' && symbol[n - 2] == 'v' && symbol[n - 1] >= '2' && symbol[n - 1] <= '9') n -= 3;
  return n;
}

static const HkDriverFamily* familyOf(const char* symbol) {
  if (!symbol || symbol[0] != 'c' || symbol[1] != 'u') return NULL;
  const size_t n = entryPointLength(symbol);
  if (n == strlen("cuGetProcAddress") && strncmp(symbol, "cuGetProcAddress", n) == 0) return &g_getProcAddressFamily;
  for (size_t i = 0; i < sizeof g_families / sizeof g_families[0]; ++i) {
    if (strlen(g_families[i].name) == n && strncmp(g_families[i].name, symbol, n) == 0) return &g_families[i];
  }
  return NULL;
}

/* The family's wrapper bound to `real`, binding a free slot; NULL when all are bound to others. */
static void* wrapperFor(const HkDriverFamily* family, void* real) {
  for (int i = 0; i < HK_DRIVER_SLOTS; ++i) {
    void* bound = __atomic_load_n(&family->reals[i], __ATOMIC_ACQUIRE);
    if (!bound) {
      void* expected = NULL;
      if (__atomic_compare_exchange_n(&family->reals[i], &expected, real, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
        return family->wrappers[i];
      }
      bound = expected;
    }
    if (bound == real) return family->wrappers[i];
  }
  return NULL;
}

int hkIsWrappedDriverSymbol(const char* symbol) { return familyOf(symbol) != NULL; }

void* hkWrapDriverEntryPoint(const char* symbol, void* real) {
  if (!real) return real;
  const HkDriverFamily* family = familyOf(symbol);
  if (!family || hkIsShimAddress(real)) return real;
  void* wrapper = wrapperFor(family, real);
  if (wrapper) return wrapper;
  hkNoteUnwrappedEntryPoint();
  return real;
}
