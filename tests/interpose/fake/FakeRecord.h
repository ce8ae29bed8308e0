/* The recording shared by the fake libraries' generated functions (FakeCuda.h). */
#ifndef HOTKERNEL_TESTS_FAKE_RECORD_H
#define HOTKERNEL_TESTS_FAKE_RECORD_H

#include <string.h>

#include "FakeCuda.h"

static __thread FakeCall t_last;
static __thread long t_calls = 0;
static __thread int t_result = 0;

static int fakeRecord(const char* name, int argc, const unsigned long long* args) {
  strncpy(t_last.name, name, sizeof t_last.name - 1);
  t_last.name[sizeof t_last.name - 1] = '\0';
  t_last.argc = argc;
  for (int i = 0; i < argc && i < FAKE_MAX_ARGS; ++i) t_last.args[i] = args[i];
  ++t_calls;
  return t_result;
}

#define FAKE_WORD(T, a) fakeWord_##T(a),
#define FAKE_FUNCTION(name, family) HK_CALL(FAKE_FUNCTION_, name, HK_SIG_##family)
#define FAKE_FUNCTION_(name, kind, n, types)                                      \
  __attribute__((visibility("default"))) int name HK_PARAMS(n, types) {           \
    const unsigned long long words[] = {HK_EACH(n, FAKE_WORD, types) 0};          \
    return fakeRecord(#name, n, words);                                           \
  }

#endif
