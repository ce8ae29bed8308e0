#include "hotkernel/runtime/Logging.h"

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <set>

#include "hotkernel/runtime/Config.h"  // lazyVariable

namespace hotkernel {
namespace {

std::atomic<int>& levelStorage() {
  static std::atomic<int> level{
      static_cast<int>(logLevelFromEnvironmentValue(lazyVariable(LazyVariable::LogLevel).c_str()))};
  return level;
}

}  // namespace

LogLevel parseLogLevel(const std::string& text, LogLevel fallback) {
  if (text == "error") return LogLevel::Error;
  if (text == "warn" || text == "warning") return LogLevel::Warn;
  if (text == "info") return LogLevel::Info;
  if (text == "debug") return LogLevel::Debug;
  return fallback;
}

LogLevel logLevelFromEnvironmentValue(const char* value) {
  if (value == nullptr || *value == '\0') return LogLevel::Warn;
  const std::string text(value);
  const LogLevel level = parseLogLevel(text, static_cast<LogLevel>(-1));
  if (level != static_cast<LogLevel>(-1)) return level;
  // Note [An unknown log level]: not through HOTKERNEL_LOG, which would read the level being set.
  detail::LogLine(LogLevel::Warn) << "HOTKERNEL_LOG_LEVEL='" << text
                                  << "' is not a log level (error, warn, info, debug); using warn";
  return LogLevel::Warn;
}

LogLevel logLevel() { return static_cast<LogLevel>(levelStorage().load(std::memory_order_relaxed)); }

void setLogLevel(LogLevel level) { levelStorage().store(static_cast<int>(level)); }

bool firstTimeFor(const std::string& key) {
  static std::mutex mu;
  static std::set<std::string> seen;  // Guarded by mu.
  std::lock_guard<std::mutex> guard(mu);
  return seen.insert(key).second;
}

namespace detail {
LogLine::~LogLine() {
  static const char kTag[] = {'E', 'W', 'I', 'D'};
  std::string line = "[hotkernel ";
  line += kTag[static_cast<int>(level_)];
  line += " " + std::to_string(::getpid()) + "] " + os_.str() + "\n";
  // One write per line so lines of concurrent threads/processes do not interleave.
  ssize_t ignored = ::write(STDERR_FILENO, line.data(), line.size());
  (void)ignored;
}
}  // namespace detail
}  // namespace hotkernel
