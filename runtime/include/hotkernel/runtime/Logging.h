#pragma once
// A small logger: "[hotkernel W 1234] message" on stderr, level from the
// environment (HOTKERNEL_LOG_LEVEL = error|warn|info|debug, default warn).
//
//   HOTKERNEL_LOG(Info) << "loaded " << n << " kernels";
//   HOTKERNEL_LOG_ONCE(Warn, "cache-refused") << "...";   // once per key per process

#include <sstream>
#include <string>

namespace hotkernel {

enum class LogLevel { Error = 0, Warn = 1, Info = 2, Debug = 3 };

LogLevel logLevel();
void setLogLevel(LogLevel level);
LogLevel parseLogLevel(const std::string& text, LogLevel fallback);

// The level HOTKERNEL_LOG_LEVEL's `value` names (nullptr: unset): what the first
// logLevel() of the process reads. Unset or empty: Warn.
// Note [An unknown log level]
// Any other value than error, warn, warning, info, debug (exact, lower case, as the
// preload shim reads it) gives Warn and one warning line that names the accepted
// values; the first logLevel() calls this once per process, so that line is
// written once.
LogLevel logLevelFromEnvironmentValue(const char* value);

// Returns true the first time it is called with `key` in this process.
bool firstTimeFor(const std::string& key);

namespace detail {
class LogLine {
 public:
  explicit LogLine(LogLevel level) : level_(level) {}
  ~LogLine();
  template <typename T>
  LogLine& operator<<(const T& v) {
    os_ << v;
    return *this;
  }

 private:
  LogLevel level_;
  std::ostringstream os_;
};
}  // namespace detail
}  // namespace hotkernel

#define HOTKERNEL_LOG(level)                                                          \
  if (::hotkernel::LogLevel::level > ::hotkernel::logLevel()) {                       \
  } else                                                                              \
    ::hotkernel::detail::LogLine(::hotkernel::LogLevel::level)

#define HOTKERNEL_LOG_ONCE(level, key)                                                              \
  if (::hotkernel::LogLevel::level > ::hotkernel::logLevel() || !::hotkernel::firstTimeFor(key)) { \
  } else                                                                                            \
    ::hotkernel::detail::LogLine(::hotkernel::LogLevel::level)
