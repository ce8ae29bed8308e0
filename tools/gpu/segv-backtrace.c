/* A preload for hunting a crash on the GPU machine (tools/gpu/segv-preload.sh builds it with the machine's
 * cc): on SIGSEGV, SIGBUS, SIGABRT or SIGFPE it writes to stderr the faulting address, the instruction and
 * stack pointers, the general registers, the word at the top of the stack (the return address when a call
 * jumped to a bad address: glibc's backtrace cannot unwind from there) with the objects they fall in, the
 * handlers in force for SIGCHLD, SIGINT, SIGTERM and SIGPIPE, and the faulting thread's backtrace; then the
 * process dies of the signal as it would have. Every thread gets an alternate signal stack (pthread_create
 * is wrapped), so a thread that overflows its stack is reported too. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <execinfo.h>
#include <signal.h>
#include <stdint.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

static void say(const char* text) {
  size_t n = strlen(text);
  while (n > 0) {
    const ssize_t w = write(2, text, n);
    if (w <= 0) return;
    text += w;
    n -= (size_t)w;
  }
}

static void where(const char* what, const void* p) {
  char line[512];
  Dl_info info;
  memset(&info, 0, sizeof info);
  if (p && dladdr(p, &info) && info.dli_fname) {
    snprintf(line, sizeof line, "  %s %p: %s(%s+%#lx)\n", what, p, info.dli_fname, info.dli_sname ? info.dli_sname : "",
             (unsigned long)((const char*)p - (const char*)(info.dli_sname ? info.dli_saddr : info.dli_fbase)));
  } else {
    snprintf(line, sizeof line, "  %s %p: in no loaded object\n", what, p);
  }
  say(line);
}

static void onFatal(int sig, siginfo_t* si, void* ctx) {
  char head[160];
  snprintf(head, sizeof head, "\n== signal %d (code %d) in thread %ld\n", sig, si ? si->si_code : 0,
           (long)syscall(SYS_gettid));
  say(head);
  if (si) where("fault address", si->si_addr);
#if defined(__x86_64__)
  if (ctx) {
    const ucontext_t* uc = (const ucontext_t*)ctx;
    const void* rip = (const void*)uc->uc_mcontext.gregs[REG_RIP];
    const uintptr_t rsp = (uintptr_t)uc->uc_mcontext.gregs[REG_RSP];
    where("instruction", rip);
    where("stack pointer", (const void*)rsp);
    static const struct {
      const char* name;
      int reg;
    } regs[] = {{"rax", REG_RAX}, {"rbx", REG_RBX}, {"rcx", REG_RCX}, {"rdx", REG_RDX}, {"rsi", REG_RSI},
                {"rdi", REG_RDI}, {"rbp", REG_RBP}, {"r8", REG_R8},   {"r9", REG_R9},   {"r10", REG_R10},
                {"r11", REG_R11}, {"r12", REG_R12}, {"r13", REG_R13}, {"r14", REG_R14}, {"r15", REG_R15}};
    char line[96];
    say("  registers:");
    for (size_t i = 0; i < sizeof regs / sizeof regs[0]; ++i) {
      snprintf(line, sizeof line, " %s=%#llx", regs[i].name, (unsigned long long)uc->uc_mcontext.gregs[regs[i].reg]);
      say(line);
    }
    say("\n");
    const uintptr_t fault = si ? (uintptr_t)si->si_addr : 0;
    if (sig == SIGSEGV && fault != 0 && fault <= rsp + 64 && fault + 65536 >= rsp) {
      say("  the fault is at the stack pointer: a stack overflow (the word there is not read)\n");
    } else if (rsp) {
      where("word at the stack pointer", *(void* const*)rsp);
    }
  }
#endif
  const int sigs[] = {SIGCHLD, SIGINT, SIGTERM, SIGPIPE};
  for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; ++i) {
    struct sigaction now;
    if (sigaction(sigs[i], NULL, &now) != 0) continue;
    char what[64];
    snprintf(what, sizeof what, "handler of signal %d", sigs[i]);
    if (now.sa_handler == SIG_DFL) {
      snprintf(head, sizeof head, "  %s: default\n", what);
      say(head);
    } else if (now.sa_handler == SIG_IGN) {
      snprintf(head, sizeof head, "  %s: ignored\n", what);
      say(head);
    } else {
      where(what, (now.sa_flags & SA_SIGINFO) ? (const void*)now.sa_sigaction : (const void*)now.sa_handler);
    }
  }
  void* frames[64];
  const int n = backtrace(frames, 64);
  say("  backtrace:\n");
  backtrace_symbols_fd(frames, n, 2);
  signal(sig, SIG_DFL);
  raise(sig);
}

/* An alternate stack for this thread's signal handlers (leaked with the thread: a debugging aid). */
static void altStack(void) {
  stack_t ss;
  memset(&ss, 0, sizeof ss);
  ss.ss_size = 256 * 1024;
  ss.ss_sp = malloc(ss.ss_size);
  if (ss.ss_sp) sigaltstack(&ss, NULL);
}

struct Start {
  void* (*fn)(void*);
  void* arg;
};

static void* startWithAltStack(void* p) {
  struct Start s = *(struct Start*)p;
  free(p);
  altStack();
  return s.fn(s.arg);
}

int pthread_create(pthread_t* t, const pthread_attr_t* attr, void* (*fn)(void*), void* arg) {
  static int (*real)(pthread_t*, const pthread_attr_t*, void* (*)(void*), void*) = NULL;
  if (!real) real = (int (*)(pthread_t*, const pthread_attr_t*, void* (*)(void*), void*))dlsym(RTLD_NEXT, "pthread_create");
  struct Start* s = (struct Start*)malloc(sizeof *s);
  if (!s) return real(t, attr, fn, arg);
  s->fn = fn;
  s->arg = arg;
  const int rc = real(t, attr, startWithAltStack, s);
  if (rc != 0) free(s);
  return rc;
}

__attribute__((constructor)) static void install(void) {
  altStack();
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = onFatal;
  sa.sa_flags = SA_SIGINFO | SA_RESETHAND | SA_ONSTACK;
  sigaction(SIGSEGV, &sa, 0);
  sigaction(SIGBUS, &sa, 0);
  sigaction(SIGABRT, &sa, 0);
  sigaction(SIGFPE, &sa, 0);
}
