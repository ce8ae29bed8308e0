/*
 * A host with its own SIGTERM handler that compiles with NVRTC on another
 * thread (as the background optimizer does), for PreloadShimTest (Note [NVRTC
 * and the host's signals]). It polls the SIGINT / SIGTERM dispositions while
 * compiles run and raises SIGTERM in the middle of them.
 *
 *   nvrtc_signal_probe LIBNVRTC
 * Prints "compiles N foreign M handled K": N compiles that finished, M polls
 * that found a SIGINT or SIGTERM handler other than the host's, K SIGTERMs
 * that reached the host's handler (of 20 raised). Exit 0 when the compiles
 * ran, exit 2 when NVRTC could not be used.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

typedef int (*CreateFn)(void**, const char*, const char*, int, const char**, const char**);
typedef int (*CompileFn)(void*, int, const char**);
typedef int (*DestroyFn)(void**);

static CreateFn create;
static CompileFn compile;
static DestroyFn destroy;
static volatile int g_stop = 0;
static volatile int g_compiles = 0;
static volatile sig_atomic_t g_handled = 0;

static const char* kSource =
    "extern \"C\" __global__ void k(float* x) {\n"
    "  for (int i = 0; i < 2000; ++i) x[threadIdx.x + i] = x[threadIdx.x + i] * 2.0f + __sinf(x[i]);\n"
    "}\n";

static void onTerm(int sig) {
  (void)sig;
  g_handled++;
}

static void* compileLoop(void* arg) {
  (void)arg;
  while (!g_stop) {
    void* prog = NULL;
    if (create(&prog, kSource, "k.cu", 0, NULL, NULL) != 0) break;
    const char* opts[] = {"--gpu-architecture=sm_90"};
    if (compile(prog, 1, opts) == 0) __atomic_add_fetch(&g_compiles, 1, __ATOMIC_RELAXED);
    destroy(&prog);
  }
  return NULL;
}

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  struct sigaction mine = {0};
  mine.sa_handler = onTerm;
  sigemptyset(&mine.sa_mask);
  sigaction(SIGTERM, &mine, NULL);
  void* h = dlopen(argv[1], RTLD_NOW);
  if (!h) {
    fprintf(stderr, "cannot load %s: %s\n", argv[1], dlerror());
    return 2;
  }
  create = (CreateFn)dlsym(h, "nvrtcCreateProgram");
  compile = (CompileFn)dlsym(h, "nvrtcCompileProgram");
  destroy = (DestroyFn)dlsym(h, "nvrtcDestroyProgram");
  if (!create || !compile || !destroy) return 2;
  pthread_t threads[2];
  for (int i = 0; i < 2; ++i) pthread_create(&threads[i], NULL, compileLoop, NULL);
  int foreign = 0, raised = 0;
  struct timespec t0, now;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (int poll = 0;; ++poll) {
    struct sigaction term, intr;
    sigaction(SIGTERM, NULL, &term);
    sigaction(SIGINT, NULL, &intr);
    if (term.sa_handler != onTerm || intr.sa_handler != SIG_DFL) ++foreign;
    if (poll % 200 == 100 && raised < 20) {
      raise(SIGTERM);
      ++raised;
    }
    usleep(500);
    clock_gettime(CLOCK_MONOTONIC, &now);
    if (now.tv_sec - t0.tv_sec >= 4 && raised >= 20) break;
  }
  g_stop = 1;
  for (int i = 0; i < 2; ++i) pthread_join(threads[i], NULL);
  printf("compiles %d foreign %d handled %d\n", g_compiles, foreign, (int)g_handled);
  return 0;
}
