/*
 * libhotkernel_preload.so — the libc-only shim put in LD_PRELOAD.
 *
 * Note [Why a libc-only shim]
 * A library linked to libtorch and put in LD_PRELOAD would load libtorch into
 * every child process (bash, nvidia-smi, compilers). This shim depends on libc
 * alone. It loads the real library, libhotkernel.so, only once libtorch_cpu.so
 * is already in the process, from one of two places:
 *   - dlopen(): interposed; after each real dlopen it probes
 *     dlopen("libtorch_cpu.so", RTLD_NOLOAD). This is how Python's
 *     `import torch` is seen, before the first op runs.
 *   - __libc_start_main(): interposed; C++ binaries linked to libtorch have it
 *     loaded (and its static registrations run) before main.
 * HOTKERNEL=0 turns it off. HOTKERNEL_LIBRARY overrides the real library's
 * path (default: libhotkernel.so next to this shim).
 *
 * Note [Re-entrancy]
 * Loading libhotkernel.so runs its start function, which itself calls dlopen
 * (libcuda, NVRTC). Those calls come back through this shim while the load is
 * in progress on the same thread, so the state is an atomic flag claimed with
 * compare-and-swap (pthread_once would deadlock on re-entry). State after
 * fork(): the child inherits the loaded library and the flag; nothing to redo.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "SignalInterpose.h"

typedef void* (*DlopenFn)(const char*, int);
typedef int (*MainFn)(int, char**, char**);
typedef int (*LibcStartMainFn)(MainFn, int, char**, void (*)(void), void (*)(void), void (*)(void), void*);

/* 0: not loaded, 1: loading or loaded, 2: disabled. */
static int g_state = 0;

static int disabled(void) {
  const char* v = getenv("HOTKERNEL");
  return v && (strcmp(v, "0") == 0 || strcmp(v, "off") == 0 || strcmp(v, "false") == 0);
}

static void shimLog(const char* msg, const char* detail) {
  const char* level = getenv("HOTKERNEL_LOG_LEVEL");
  if (level && strcmp(level, "error") == 0) return;
  char line[1024];
  int n = snprintf(line, sizeof line, "[hotkernel W %d] preload: %s%s%s\n", (int)getpid(), msg,
                   detail ? ": " : "", detail ? detail : "");
  if (n > 0) {
    ssize_t ignored = write(STDERR_FILENO, line, (size_t)(n < (int)sizeof line ? n : (int)sizeof line - 1));
    (void)ignored;
  }
}

static DlopenFn realDlopen(void) {
  static DlopenFn fn = NULL;
  if (!fn) fn = (DlopenFn)dlsym(RTLD_NEXT, "dlopen");
  return fn;
}

static void libraryPath(char* out, size_t n) {
  const char* env = getenv("HOTKERNEL_LIBRARY");
  if (env && *env) {
    snprintf(out, n, "%s", env);
    return;
  }
  Dl_info info;
  if (dladdr((void*)&libraryPath, &info) && info.dli_fname) {
    snprintf(out, n, "%s", info.dli_fname);
    char* slash = strrchr(out, '/');
    if (slash) {
      snprintf(slash + 1, n - (size_t)(slash + 1 - out), "libhotkernel.so");
      return;
    }
  }
  snprintf(out, n, "libhotkernel.so");
}

static void loadRealLibrary(void) {
  DlopenFn dl = realDlopen();
  if (!dl) return;
  char path[PATH_MAX];
  libraryPath(path, sizeof path);
  /* Never dlclose'd: dispatcher registrations point into it. */
  void* h = dl(path, RTLD_NOW | RTLD_GLOBAL);
  if (!h) {
    shimLog("cannot load the hotkernel library; running without it", dlerror());
    return;
  }
  int (*start)(void) = (int (*)(void))dlsym(h, "hotkernel_start");
  if (!start) {
    shimLog("hotkernel library has no hotkernel_start; running without it", path);
    return;
  }
  start();
}

static void maybeLoad(void) {
  if (__atomic_load_n(&g_state, __ATOMIC_ACQUIRE) != 0) return;
  DlopenFn dl = realDlopen();
  if (!dl) return;
  /* Probe only: RTLD_NOLOAD never loads anything. */
  void* torch = dl("libtorch_cpu.so", RTLD_NOW | RTLD_NOLOAD);
  if (!torch) return;
  int expected = 0;
  int desired = disabled() ? 2 : 1;
  if (!__atomic_compare_exchange_n(&g_state, &expected, desired, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) return;
  if (desired == 1) loadRealLibrary();
}

__attribute__((visibility("default"))) void* dlopen(const char* file, int mode) {
  DlopenFn dl = realDlopen();
  if (!dl) return NULL;
  void* h = dl(file, mode);
  if (h) hkNoteLoaded(file); /* Note [NVRTC and the host's signals] */
  if (h && !(mode & RTLD_NOLOAD)) maybeLoad();
  return h;
}

__attribute__((visibility("default"))) int __libc_start_main(MainFn main, int argc, char** argv,
                                                             void (*init)(void), void (*fini)(void),
                                                             void (*rtldFini)(void), void* stackEnd) {
  LibcStartMainFn real = (LibcStartMainFn)dlsym(RTLD_NEXT, "__libc_start_main");
  if (!real) _exit(127);
  maybeLoad();
  return real(main, argc, argv, init, fini, rtldFini, stackEnd);
}
