/*
 * dlsym, interposed: a driver command (or cuGetProcAddress) looked up on
 * libcuda's handle comes back wrapped.
 *
 * Note [Lookups on libcuda's handle]
 * dlsym(handle, name) searches the handle's object and its dependencies,
 * never the preload, so the shim's exports do not cover a library that
 * dlopens libcuda.so.1 and looks up its functions: libcudart and the static
 * runtime in cuBLAS, cuDNN and NCCL (for cuGetProcAddress, through which
 * they reach the rest of the driver), Triton's launcher (cuLaunchKernelEx),
 * ctypes and cuda-python. This dlsym answers a lookup of a wrapped name
 * (hkIsWrappedDriverSymbol) on a handle whose object's file name starts
 * with "libcuda.so" with hkWrapDriverEntryPoint of glibc's answer. Every
 * other lookup is glibc's, reached by a sibling call (a jump that keeps
 * the caller's return address): glibc resolves RTLD_NEXT and RTLD_DEFAULT
 * relative to the object that called dlsym, which must stay the caller's,
 * not the shim's. The file is compiled with -O2 -foptimize-sibling-calls
 * whatever the build type (interpose/CMakeLists.txt), and
 * CommandHookTest checks RTLD_NEXT from another library. dlvsym is not
 * interposed: libcuda's functions are not versioned.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <string.h>

#include "DriverEntryPoints.h"
#include "RealSymbol.h"

static int isLibcuda(void* handle) {
  struct link_map* map = NULL;
  if (dlinfo(handle, RTLD_DI_LINKMAP, &map) != 0 || !map || !map->l_name) return 0;
  const char* base = strrchr(map->l_name, '/');
  base = base ? base + 1 : map->l_name;
  return strncmp(base, "libcuda.so", 10) == 0;
}

static void* wrappedLookup(HkDlsymFn real, void* handle, const char* name) {
  if (handle == RTLD_DEFAULT || handle == RTLD_NEXT || !name || name[0] != 'c' || name[1] != 'u') return NULL;
  if (!hkIsWrappedDriverSymbol(name) || !isLibcuda(handle)) return NULL;
  void* fn = real(handle, name);
  return fn ? hkWrapDriverEntryPoint(name, fn) : NULL;
}

__attribute__((visibility("default"))) void* dlsym(void* handle, const char* name) {
  HkDlsymFn real = hkRealDlsym();
  if (!real) return NULL;
  void* wrapped = wrappedLookup(real, handle, name);
  if (wrapped) return wrapped;
  return real(handle, name); /* a sibling call: Note [Lookups on libcuda's handle] */
}
