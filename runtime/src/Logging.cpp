#include "hotkernel/runtime/Logging.h"

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <set>

namespace hotkernel {
namespace {

std::atomic<int>& levelStorage() {
  static std::atomic<int> level{[] {
    const char* env = std::getenv("HOTKERNEL_LOG_LEVEL");
    return static_cast<int>(parseLogLevel(env ? env : "", LogLevel::Warn));
  }()};
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
