/*
 * libhk_command_hook_probe.so: a flush hook for CommandHookGpuTest's Python
 * program (command_hook_gpu_probe.py). It counts the hook's calls by command
 * kind and records which libraries issued them (the callers below the shim's
 * wrapper on the stack, by backtrace and dladdr). libc only.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <execinfo.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "hotkernel/hotkernel_shim.h"

#define PROBE_KINDS 16
#define PROBE_LIBRARIES 64

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static int g_counts[PROBE_KINDS];                 /* guarded by g_lock */
static char g_libraries[PROBE_LIBRARIES][96];     /* guarded by g_lock */
static int g_libraryCount = 0;                    /* guarded by g_lock */
static char g_joined[PROBE_LIBRARIES * 97];       /* guarded by g_lock */

static const char* baseName(const char* path) {
  const char* slash = strrchr(path, '/');
  return slash ? slash + 1 : path;
}

/* Precondition: g_lock held. */
static void noteLibrary(const char* name) {
  for (int i = 0; i < g_libraryCount; ++i) {
    if (strcmp(g_libraries[i], name) == 0) return;
  }
  if (g_libraryCount < PROBE_LIBRARIES) snprintf(g_libraries[g_libraryCount++], sizeof g_libraries[0], "%s", name);
}

static void probeHook(int kind) {
  void* frames[48];
  const int n = backtrace(frames, 48);
  pthread_mutex_lock(&g_lock);
  if (kind >= 0 && kind < PROBE_KINDS) ++g_counts[kind];
  int belowShim = 0;
  for (int i = 0; i < n; ++i) {
    Dl_info info;
    if (!dladdr(frames[i], &info) || !info.dli_fname) continue;
    const char* name = baseName(info.dli_fname);
    if (strstr(name, "libhotkernel_preload")) {
      belowShim = 1;
    } else if (belowShim) {
      noteLibrary(name);
    }
  }
  pthread_mutex_unlock(&g_lock);
}

__attribute__((visibility("default"))) int hk_probe_install(void) {
  HotkernelShimSetFlushHookFn set = (HotkernelShimSetFlushHookFn)dlsym(RTLD_DEFAULT, "hotkernel_shim_set_flush_hook");
  if (!set) return 0;
  set(probeHook);
  return 1;
}

__attribute__((visibility("default"))) void hk_probe_reset(void) {
  pthread_mutex_lock(&g_lock);
  memset(g_counts, 0, sizeof g_counts);
  g_libraryCount = 0;
  pthread_mutex_unlock(&g_lock);
}

__attribute__((visibility("default"))) int hk_probe_count(int kind) {
  pthread_mutex_lock(&g_lock);
  const int n = kind >= 0 && kind < PROBE_KINDS ? g_counts[kind] : 0;
  pthread_mutex_unlock(&g_lock);
  return n;
}

__attribute__((visibility("default"))) const char* hk_probe_libraries(void) {
  pthread_mutex_lock(&g_lock);
  g_joined[0] = '\0';
  for (int i = 0; i < g_libraryCount; ++i) {
    strcat(g_joined, g_libraries[i]);
    strcat(g_joined, ",");
  }
  pthread_mutex_unlock(&g_lock);
  return g_joined;
}
