/*
 * libcudart.so.12 for the shim's tests: every exported name of the shim's
 * runtime table, and the capture calls, record their call (FakeRecord.h);
 * cudaGetDriverEntryPoint* answer with the fake libcuda's own functions,
 * reached by a path the shim does not see (as the runtime's private one).
 * Linked with -Bsymbolic.
 */
#define _GNU_SOURCE
#include <dlfcn.h>

#include "FakeRecord.h"
#include "RuntimeCommands.h"

HK_RUNTIME_EXPORTS(FAKE_FUNCTION)

#define HK_SIG_fakeBeginCapture HOTKERNEL_COMMAND_CAPTURE, 2, (HkPtr, HkInt)
#define HK_SIG_fakeEndCapture HOTKERNEL_COMMAND_CAPTURE, 2, (HkPtr, HkPtr)
FAKE_FUNCTION(cudaStreamBeginCapture, fakeBeginCapture)
FAKE_FUNCTION(cudaStreamEndCapture, fakeEndCapture)

static void* rawDriverFunction(const char* symbol, unsigned version, HkU64 flags) {
  void* libcuda = dlopen(FAKE_LIBCUDA_PATH, RTLD_NOW | RTLD_LOCAL);
  if (!libcuda) return NULL;
  FakeResolveFn resolve = (FakeResolveFn)dlsym(libcuda, "fakecuda_resolve");
  return resolve ? resolve(symbol, (int)version, flags) : NULL;
}

static int entryPoint(const char* symbol, void** funcPtr, unsigned version, HkU64 flags) {
  const unsigned long long words[] = {fakeWord_HkPtr((HkPtr)symbol), version, flags};
  fakeRecord("cudaGetDriverEntryPoint", 3, words);
  *funcPtr = rawDriverFunction(symbol, version, flags);
  return *funcPtr ? 0 : 500; /* cudaErrorSymbolNotFound */
}

__attribute__((visibility("default"))) int cudaGetDriverEntryPoint(const char* symbol, void** funcPtr, HkU64 flags,
                                                                   void* status) {
  (void)status;
  return entryPoint(symbol, funcPtr, 13000, flags);
}

__attribute__((visibility("default"))) int cudaGetDriverEntryPointByVersion(const char* symbol, void** funcPtr,
                                                                            HkU32 version, HkU64 flags,
                                                                            void* status) {
  (void)status;
  return entryPoint(symbol, funcPtr, version, flags);
}

__attribute__((visibility("default"))) void fakecudart_last(FakeCall* out) { *out = t_last; }
__attribute__((visibility("default"))) long fakecudart_thread_calls(void) { return t_calls; }
__attribute__((visibility("default"))) void fakecudart_set_result(int result) { t_result = result; }
