/*
 * signal / sigaction, interposed: NVRTC never replaces the host's signal
 * handlers. Part of the libc-only preload shim.
 *
 * Note [NVRTC and the host's signals]
 * libnvrtc installs its own SIGINT and SIGTERM handlers for the time of a
 * compile (it calls sigaction / signal through the PLT) and restores the old
 * ones afterwards. The background optimizer compiles for seconds at a time,
 * on several threads, so a SIGTERM or Ctrl-C that arrives then would reach
 * NVRTC's handler instead of the host's, which ends the process with its own
 * status, calling exit() from the compiling thread while the rest of the
 * process goes on.
 * So a call of these two functions whose caller is libnvrtc changes nothing:
 * it reports the disposition in force as the old one and succeeds. Every
 * other caller (the host, Python's signal module, torch) reaches libc as if
 * the shim were not there. The caller is looked up (dladdr) only once a
 * library whose name holds "libnvrtc" was dlopen'ed (Preload.c's dlopen
 * calls hkNoteLoaded), so a host that never tunes pays nothing.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <signal.h>
#include <stddef.h>
#include <string.h>

#include "SignalInterpose.h"

typedef int (*SigactionFn)(int, const struct sigaction*, struct sigaction*);
typedef sighandler_t (*SignalFn)(int, sighandler_t);

/* 1 once libnvrtc may be in the process. */
static int g_nvrtcLoaded = 0;

void hkNoteLoaded(const char* file) {
  if (file && strstr(file, "libnvrtc")) __atomic_store_n(&g_nvrtcLoaded, 1, __ATOMIC_RELEASE);
}

/* Whether the code at `caller` belongs to libnvrtc. */
static int fromNvrtc(const void* caller) {
  if (!__atomic_load_n(&g_nvrtcLoaded, __ATOMIC_ACQUIRE)) return 0;
  Dl_info info;
  if (!dladdr(caller, &info) || !info.dli_fname) return 0;
  const char* base = strrchr(info.dli_fname, '/');
  base = base ? base + 1 : info.dli_fname;
  return strncmp(base, "libnvrtc", 8) == 0;
}

static SigactionFn realSigaction(void) {
  static SigactionFn fn = NULL;
  if (!fn) fn = (SigactionFn)dlsym(RTLD_NEXT, "sigaction");
  return fn;
}

__attribute__((visibility("default"))) int sigaction(int sig, const struct sigaction* act, struct sigaction* old) {
  SigactionFn real = realSigaction();
  if (!real) return -1;
  if (act && fromNvrtc(__builtin_return_address(0))) return real(sig, NULL, old); /* report, change nothing */
  return real(sig, act, old);
}

__attribute__((visibility("default"))) sighandler_t signal(int sig, sighandler_t handler) {
  static SignalFn realSignal = NULL;
  if (!realSignal) realSignal = (SignalFn)dlsym(RTLD_NEXT, "signal");
  if (!realSignal) return SIG_ERR;
  if (fromNvrtc(__builtin_return_address(0))) {
    struct sigaction current;
    SigactionFn real = realSigaction();
    if (!real || real(sig, NULL, &current) != 0) return SIG_ERR;
    return current.sa_handler;
  }
  return realSignal(sig, handler);
}
