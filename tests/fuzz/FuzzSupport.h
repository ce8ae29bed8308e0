#pragma once
// What every fuzz target shares: the input as text, the one documented way a
// parser may refuse it, and an invariant check that aborts (a crash to libFuzzer).
//
// Note [What a fuzz target asserts]
// A parser either accepts its input or refuses it with hotkernel::Error (or
// nullopt where its signature says so). Any other exception escapes the target
// and terminates the process, which libFuzzer reports as a crash, as it does
// for every ASan or UBSan finding. What a parser accepts it also writes back
// and reads again to the same value, so an accepted input never holds more
// (or less) than the parsed value says.

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "hotkernel/runtime/Check.h"
#include "hotkernel/runtime/Logging.h"

#define HK_FUZZ_ASSERT(cond)                                                                 \
  do {                                                                                       \
    if (!(cond)) {                                                                           \
      std::fprintf(stderr, "fuzz invariant failed: %s (%s:%d)\n", #cond, __FILE__, __LINE__); \
      std::abort();                                                                          \
    }                                                                                        \
  } while (0)

namespace hotkernel::fuzz {

inline std::string text(const uint8_t* data, size_t size) { return std::string(reinterpret_cast<const char*>(data), size); }

// Runs `parse`: true when it returned, false when it refused with hotkernel::Error.
template <class Parse>
bool accepts(Parse&& parse) {
  try {
    parse();
    return true;
  } catch (const Error&) {
    return false;
  }
}

// Parsers log warnings for bad input; a fuzzer run would print millions of them.
inline int quiet() {
  setLogLevel(LogLevel::Error);
  return 0;
}

}  // namespace hotkernel::fuzz
