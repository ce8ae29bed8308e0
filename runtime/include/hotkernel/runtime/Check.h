#pragma once
// Error handling: the one throw path of hotkernel.
//
// Note [Errors never cross into user code]
// HOTKERNEL_CHECK reports a recoverable condition (bad input, missing driver,
// corrupt cache entry) by throwing hotkernel::Error through HOTKERNEL_THROW,
// the only throw macro. HOTKERNEL_REQUIRE does the same without the "Check
// failed: <expression>." prefix, for messages that state a rule to whoever
// wrote the input (an agent's reply, a helper's request, a JSON field).
// HOTKERNEL_INTERNAL_ASSERT marks a bug in hotkernel itself and throws
// through the same path with an "internal" tag. Every entry
// point that the host process reaches (dispatcher trampolines, the library
// constructor, background threads) catches hotkernel::Error and std::exception,
// logs once, and falls back to the original ATen kernel.

#include <sstream>
#include <stdexcept>
#include <string>

namespace hotkernel {

class Error : public std::runtime_error {
 public:
  Error(std::string what, bool internal) : std::runtime_error(std::move(what)), internal_(internal) {}
  bool internal() const { return internal_; }

 private:
  bool internal_;
};

namespace detail {

[[noreturn]] void throwError(const char* file, int line, const std::string& msg, bool internal);

inline void appendAll(std::ostringstream&) {}
template <typename T, typename... Rest>
void appendAll(std::ostringstream& os, const T& first, const Rest&... rest) {
  os << first;
  appendAll(os, rest...);
}
template <typename... Args>
std::string concat(const Args&... args) {
  std::ostringstream os;
  appendAll(os, args...);
  return os.str();
}

}  // namespace detail
}  // namespace hotkernel

#define HOTKERNEL_THROW_IMPL(internal, ...) \
  ::hotkernel::detail::throwError(__FILE__, __LINE__, ::hotkernel::detail::concat(__VA_ARGS__), internal)

// The one throw macro.
#define HOTKERNEL_THROW(...) HOTKERNEL_THROW_IMPL(false, __VA_ARGS__)

#define HOTKERNEL_CHECK(cond, ...)                                            \
  do {                                                                        \
    if (!(cond)) {                                                            \
      HOTKERNEL_THROW_IMPL(false, "Check failed: " #cond ". ", ##__VA_ARGS__); \
    }                                                                         \
  } while (0)

// Like HOTKERNEL_CHECK, the message alone: it must read as the rule it states.
#define HOTKERNEL_REQUIRE(cond, ...) \
  do {                               \
    if (!(cond)) {                   \
      HOTKERNEL_THROW(__VA_ARGS__);  \
    }                                \
  } while (0)

#define HOTKERNEL_INTERNAL_ASSERT(cond, ...)                                                         \
  do {                                                                                               \
    if (!(cond)) {                                                                                   \
      HOTKERNEL_THROW_IMPL(true, "Internal assert failed: " #cond ". Please report a bug. ", ##__VA_ARGS__); \
    }                                                                                                \
  } while (0)
