#include "hotkernel/runtime/Config.h"

#include <unistd.h>

#include <cerrno>
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

// A variable of two named values: `off` (the default, also unset or empty) or `on`; anything else warns once
// and takes `off`. Whether it is `on`.
bool parseTwoWay(const char* name, const char* off, const char* on) {
  const std::string v = env(name);
  if (v.empty() || v == off) return false;
  if (v == on) return true;
  HOTKERNEL_LOG(Warn) << name << "='" << v << "' is not " << off << " or " << on << "; using " << off;
  return false;
}

// Note [Reading numeric variables]: an integer in [minimum, maximum]; unset or empty: `fallback`
// (silently); malformed or below the range: `fallback`, above it: `maximum`, each with one warning.
// `fallbackText` says what the fallback means in the warning ("50", "none (not used)").
int64_t parseInteger(const char* name, int64_t minimum, int64_t maximum, int64_t fallback,
                     const std::string& fallbackText) {
  const std::string v = env(name);
  if (v.empty()) return fallback;
  const std::string range = "[" + std::to_string(minimum) + ", " + std::to_string(maximum) + "]";
  const size_t first = v.find_first_not_of(" \t\n");
  const size_t last = v.find_last_not_of(" \t\n");
  const std::string digits = first == std::string::npos ? std::string() : v.substr(first, last - first + 1);
  errno = 0;
  char* end = nullptr;
  const long long n = std::strtoll(digits.c_str(), &end, 10);
  if (digits.empty() || end == digits.c_str() || *end != '\0') {
    HOTKERNEL_LOG(Warn) << name << "='" << v << "' is not an integer in " << range << "; using " << fallbackText;
    return fallback;
  }
  if (errno == ERANGE && n > 0) {
    HOTKERNEL_LOG(Warn) << name << "='" << v << "' is too large for an integer; using the maximum of " << range
                        << ", " << maximum;
    return maximum;
  }
  if (n < minimum) {
    HOTKERNEL_LOG(Warn) << name << "='" << v << "' is below " << range << "; using " << fallbackText;
    return fallback;
  }
  if (n > maximum) {
    HOTKERNEL_LOG(Warn) << name << "='" << v << "' is above " << range << "; using the maximum, " << maximum;
    return maximum;
  }
  return n;
}

// A probability in (0, 1]; unset or empty: the default; anything else: the default, with a warning.
double parseProbability(const char* name, double fallback) {
  const std::string v = env(name);
  if (v.empty()) return fallback;
  char* end = nullptr;
  errno = 0;
  const double p = std::strtod(v.c_str(), &end);
  if (end == v.c_str() || *end != '\0' || errno == ERANGE || !(p > 0.0 && p <= 1.0)) {
    HOTKERNEL_LOG(Warn) << name << "='" << v << "' is not a probability in (0, 1]; using " << fallback;
    return fallback;
  }
  return p;
}

}  // namespace

std::string profilePathFor(const std::string& pattern, long pid) {
  std::string out;
  out.reserve(pattern.size() + 8);
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] == '%' && i + 1 < pattern.size() && (pattern[i + 1] == 'p' || pattern[i + 1] == '%')) {
      out += pattern[i + 1] == 'p' ? std::to_string(pid) : std::string("%");
      ++i;
    } else {
      out += pattern[i];
    }
  }
  return out;
}

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
  c.cacheKeyFile = env("HOTKERNEL_CACHE_KEY_FILE");
  {
    std::stringstream dirs(env("HOTKERNEL_CACHE_PATH"));
    std::string dir;
    while (std::getline(dirs, dir, ':')) {
      if (!dir.empty()) c.cachePath.push_back(dir);
    }
  }
  c.optimize = parseBool("HOTKERNEL_OPTIMIZE", true);
  c.fusion = parseBool("HOTKERNEL_FUSION", true);
  c.fusionStartBusy = parseTwoWay("HOTKERNEL_FUSION_START", "always", "busy");
  c.fusionEagerRounding = parseTwoWay("HOTKERNEL_FUSION_ROUNDING", "fused", "eager");
  c.fusionBatchNorm = parseBool("HOTKERNEL_FUSION_BATCH_NORM", true);
  c.fusionInPlace = parseBool("HOTKERNEL_FUSION_IN_PLACE", true);
  c.fusionPassConvolutions = parseBool("HOTKERNEL_FUSION_PASS_CONVOLUTIONS", true);
  c.nvtx = parseBool("HOTKERNEL_NVTX", true);
  c.cupti = parseBool("HOTKERNEL_CUPTI", false);
  c.trustAgentEntries = parseBool("HOTKERNEL_TRUST_AGENT_ENTRIES", false);
  c.hotCalls = parseInteger("HOTKERNEL_HOT_CALLS", 1, kMaxHotCalls, 50, "50");
  c.profilePath = env("HOTKERNEL_PROFILE");
  c.idleMs = parseInteger("HOTKERNEL_IDLE_MS", 1, kMaxIdleMs, 50, "50");
  c.optimizerMemoryMb = parseInteger("HOTKERNEL_OPT_MEM_MB", 1, kMaxOptimizerMemoryMb, 0,
                                     "the default (a quarter of the device's memory)");
  c.idleMaxUtil = static_cast<int>(parseInteger("HOTKERNEL_IDLE_MAX_UTIL", 0, 100, -1, "none (not used)"));
  c.samplingProb = parseProbability("HOTKERNEL_SAMPLE", 0.05);
  c.remoteCache = env("HOTKERNEL_REMOTE_CACHE");
  c.remoteTimeoutMs = parseInteger("HOTKERNEL_REMOTE_TIMEOUT_MS", 1, kMaxRemoteTimeoutMs, 100, "100");
  c.remoteLeaseMs = parseInteger("HOTKERNEL_REMOTE_LEASE_MS", 1000, kMaxIdleMs, 30000, "30000");
  c.remoteLeaseMaxMs = parseInteger("HOTKERNEL_REMOTE_LEASE_MAX_MS", 1000, kMaxIdleMs, 600000, "600000");
  c.remotePollMs = parseInteger("HOTKERNEL_REMOTE_POLL_MS", 100, kMaxIdleMs, 5000, "5000");
  std::string ops = env("HOTKERNEL_OPS");
  // The default: every op family that runs clean end to end on the H200 (the gpu tests and bench/ops_bench.py;
  // Note [Default served ops] in docs/design/runtime.md says when each joined).
  if (ops.empty()) ops = kDefaultServedOps;
  std::stringstream ss(ops);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (!item.empty()) c.ops.push_back(item);
  }
  return c;
}

const char* lazyVariableName(LazyVariable variable) {
  switch (variable) {
    case LazyVariable::LogLevel:
      return "HOTKERNEL_LOG_LEVEL";
    case LazyVariable::AgentCommand:
      return "HOTKERNEL_AGENT_CMD";
    case LazyVariable::AgentTimeout:
      return "HOTKERNEL_AGENT_TIMEOUT";
    case LazyVariable::NvrtcPath:
      return "HOTKERNEL_NVRTC_PATH";
    case LazyVariable::SandboxCompile:
      return "HOTKERNEL_SANDBOX_COMPILE";
    case LazyVariable::SandboxRun:
      return "HOTKERNEL_SANDBOX_RUN";
    case LazyVariable::SandboxTestCrash:
      return "HOTKERNEL_SANDBOX_TEST_CRASH";
    case LazyVariable::SandboxTestHang:
      return "HOTKERNEL_SANDBOX_TEST_HANG";
    case LazyVariable::SandboxTestGarbage:
      return "HOTKERNEL_SANDBOX_TEST_GARBAGE";
  }
  return "HOTKERNEL_UNKNOWN";  // not reached: every enumerator has its name
}

std::string lazyVariable(LazyVariable variable) { return env(lazyVariableName(variable)); }

const Config& config() {
  static const Config c = Config::fromEnvironment();
  return c;
}

}  // namespace hotkernel
