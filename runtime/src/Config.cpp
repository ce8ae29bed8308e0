#include "hotkernel/runtime/Config.h"

#include <unistd.h>

#include <cstdlib>
#include <sstream>

#include "hotkernel/runtime/Logging.h"

namespace hotkernel {
namespace {

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

bool parseBool(const char* name, bool fallback) {
  std::string v = env(name);
  if (v.empty()) return fallback;
  if (v == "0" || v == "false" || v == "off" || v == "no") return false;
  if (v == "1" || v == "true" || v == "on" || v == "yes") return true;
  HOTKERNEL_LOG(Warn) << name << "='" << v << "' is not a boolean; using " << (fallback ? "1" : "0");
  return fallback;
}

int64_t parsePositive(const char* name, int64_t fallback) {
  std::string v = env(name);
  if (v.empty()) return fallback;
  char* end = nullptr;
  long long n = std::strtoll(v.c_str(), &end, 10);
  if (end == v.c_str() || *end != '\0' || n <= 0) {
    HOTKERNEL_LOG(Warn) << name << "='" << v << "' is not a positive integer; using " << fallback;
    return fallback;
  }
  return n;
}

// A percentage in [0, 100]; unset: -1.
int parsePercent(const char* name) {
  std::string v = env(name);
  if (v.empty()) return -1;
  char* end = nullptr;
  long long n = std::strtoll(v.c_str(), &end, 10);
  if (end == v.c_str() || *end != '\0' || n < 0 || n > 100) {
    HOTKERNEL_LOG(Warn) << name << "='" << v << "' is not a percentage in [0, 100]; not used";
    return -1;
  }
  return static_cast<int>(n);
}

}  // namespace

std::string defaultCacheDir() {
  std::string xdg = env("XDG_CACHE_HOME");
  if (!xdg.empty()) return xdg + "/hotkernel";
  std::string home = env("HOME");
  if (!home.empty()) return home + "/.cache/hotkernel";
  return "/tmp/hotkernel-" + std::to_string(::getuid());
}

Config Config::fromEnvironment() {
  Config c;
  c.enabled = parseBool("HOTKERNEL", true);
  c.cacheDir = env("HOTKERNEL_CACHE_DIR");
  if (c.cacheDir.empty()) c.cacheDir = defaultCacheDir();
  c.optimize = parseBool("HOTKERNEL_OPTIMIZE", true);
  c.hotCalls = parsePositive("HOTKERNEL_HOT_CALLS", 50);
  c.profilePath = env("HOTKERNEL_PROFILE");
  c.idleMs = parsePositive("HOTKERNEL_IDLE_MS", 50);
  c.optimizerMemoryMb = parsePositive("HOTKERNEL_OPT_MEM_MB", 0);
  c.idleMaxUtil = parsePercent("HOTKERNEL_IDLE_MAX_UTIL");
  std::string ops = env("HOTKERNEL_OPS");
  // The norm ops joined after their first end-to-end run on the H200 (bench/ops_bench.py, 2026-11-30),
  // cross_entropy_loss after its in-process tuning ran clean there (bench/results/h200-ops-cross-entropy-*).
  if (ops.empty()) ops = "_softmax,_log_softmax,_fused_rms_norm,native_layer_norm,cross_entropy_loss";
  std::stringstream ss(ops);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (!item.empty()) c.ops.push_back(item);
  }
  return c;
}

const Config& config() {
  static const Config c = Config::fromEnvironment();
  return c;
}

}  // namespace hotkernel
