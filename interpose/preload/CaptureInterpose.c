/*
 * cudaStreamBeginCapture / cudaStreamEndCapture, interposed (Note [Pausing
 * during graph capture] in CaptureTracker.h). Part of the libc-only preload
 * shim; also linked into the GPU test that checks the pause (it exports the
 * two functions from the executable, which comes first in the lookup scope).
 *
 * The real functions: dlsym(RTLD_NEXT) (libcudart is in the global scope
 * when torch loaded it: libtorch_global_deps.so with RTLD_GLOBAL, or a
 * binary's DT_NEEDED); else the loaded libcudart found among the process's
 * objects (dl_iterate_phdr) and opened with RTLD_NOLOAD. These wrappers only
 * run once a library that imports the functions called them, so libcudart is
 * loaded by then.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <string.h>

#include "CaptureTracker.h"
#include "CommandHook.h"

typedef void* (*HkDlopenFn)(const char*, int);

static int findCudart(struct dl_phdr_info* info, size_t size, void* data) {
  (void)size;
  const char* name = info->dlpi_name;
  if (!name || !*name) return 0;
  const char* base = strrchr(name, '/');
  base = base ? base + 1 : name;
  if (strncmp(base, "libcudart.so", 12) != 0) return 0;
  strncpy((char*)data, name, 4095);
  ((char*)data)[4095] = '\0';
  return 1;
}

static void* resolve(const char* symbol) {
  void* fn = dlsym(RTLD_NEXT, symbol);
  if (fn) return fn;
  char path[4096] = {0};
  if (!dl_iterate_phdr(findCudart, path)) return NULL;
  /* The real dlopen (the shim interposes dlopen; RTLD_NOLOAD never loads). */
  HkDlopenFn realDlopen = (HkDlopenFn)dlsym(RTLD_NEXT, "dlopen");
  if (!realDlopen) return NULL;
  void* h = realDlopen(path, RTLD_LAZY | RTLD_NOLOAD);
  return h ? dlsym(h, symbol) : NULL;
}

static const HkCaptureApi* realApi(void) {
  static HkCaptureApi api;
  static int ready = 0; /* atomic: 0 unresolved, 1 resolved */
  if (__atomic_load_n(&ready, __ATOMIC_ACQUIRE)) return &api;
  /* Racing threads resolve the same pointers; the stores are idempotent. */
  HkCaptureApi a;
  a.begin = (int (*)(void*, int))resolve("cudaStreamBeginCapture");
  a.end = (int (*)(void*, void**))resolve("cudaStreamEndCapture");
  a.isCapturing = (int (*)(void*, int*))resolve("cudaStreamIsCapturing");
  if (!a.begin || !a.end) return NULL;
  __atomic_store_n(&api.begin, a.begin, __ATOMIC_RELAXED);
  __atomic_store_n(&api.end, a.end, __ATOMIC_RELAXED);
  __atomic_store_n(&api.isCapturing, a.isCapturing, __ATOMIC_RELAXED);
  __atomic_store_n(&ready, 1, __ATOMIC_RELEASE);
  return &api;
}

__attribute__((visibility("default"))) int cudaStreamBeginCapture(void* stream, int mode) {
  hkBeforeCommand(HOTKERNEL_COMMAND_CAPTURE); /* Note [Flush before foreign commands] */
  return hk_capture_begin(realApi(), stream, mode);
}

__attribute__((visibility("default"))) int cudaStreamEndCapture(void* stream, void** graph) {
  hkBeforeCommand(HOTKERNEL_COMMAND_CAPTURE);
  return hk_capture_end(realApi(), stream, graph);
}
