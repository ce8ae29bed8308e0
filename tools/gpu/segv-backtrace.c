/* A preload for hunting a crash on the GPU machine (tools/gpu/probe-remote-entry.sh builds it with the
 * machine's cc): on SIGSEGV, SIGBUS, SIGABRT or SIGFPE it writes the faulting thread's backtrace to stderr,
 * then dies of the signal as it would have. */
#define _GNU_SOURCE
#include <execinfo.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static void onFatal(int sig) {
  void* frames[64];
  char head[96];
  const int n = backtrace(frames, 64);
  const int len = snprintf(head, sizeof head, "\n== signal %d in thread %ld; backtrace:\n", sig, (long)syscall(SYS_gettid));
  if (len > 0) write(2, head, (size_t)len);
  backtrace_symbols_fd(frames, n, 2);
  signal(sig, SIG_DFL);
  raise(sig);
}

__attribute__((constructor)) static void install(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = onFatal;
  sa.sa_flags = SA_RESETHAND;
  sigaction(SIGSEGV, &sa, 0);
  sigaction(SIGBUS, &sa, 0);
  sigaction(SIGABRT, &sa, 0);
  sigaction(SIGFPE, &sa, 0);
}
