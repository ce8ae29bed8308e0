#include "EnvironmentVariables.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <map>

#include "ErrorText.h"
#include "hotkernel/cache/EntryKey.h"
#include "hotkernel/cache/RemoteTier.h"
#include "hotkernel/optimizer/ExternalAgent.h"
#include "hotkernel/optimizer/SandboxCompile.h"
#include "hotkernel/runtime/Config.h"
#include "hotkernel/runtime/Logging.h"
#include "hotkernel/runtime/Nvrtc.h"

extern char** environ;

namespace hotkernel::cli {
namespace {

std::string joined(const std::vector<std::string>& words, const char* separator) {
  std::string out;
  for (size_t i = 0; i < words.size(); ++i) out += (i > 0 ? separator : "") + words[i];
  return out;
}

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

std::string levelName(LogLevel level) {
  switch (level) {
    case LogLevel::Error: return "error";
    case LogLevel::Warn: return "warn";
    case LogLevel::Info: return "info";
    case LogLevel::Debug: return "debug";
  }
  return "warn";
}

std::string agentCommand() {
  std::string problem;
  std::optional<ExternalAgent> agent = ExternalAgent::fromEnvironment(&problem);
  if (!agent) return problem.empty() ? "no agent" : "not used: " + problem;
  return joined(agent->options().command, " ");
}

std::string agentTimeout() {
  std::string problem;
  std::optional<ExternalAgent> agent = ExternalAgent::fromEnvironment(&problem);
  if (!agent) return problem.empty() ? "unused (HOTKERNEL_AGENT_CMD is not set)" : "not used: " + problem;
  return number(agent->options().timeoutSeconds) + " s" + (problem.empty() ? "" : " (" + problem + ")");
}

// The shared tier as a serving process would find it: the URL, then one PING under the configured timeout.
std::string remoteCache() {
  try {
    cache::RemoteTierOptions options;
    options.url = cache::parseRemoteUrl(config().remoteCache);
    options.timeout = std::chrono::milliseconds(config().remoteTimeoutMs);
    const cache::EntryTrust trust = cache::EntryTrust::fromConfig(config().cacheDir);
    cache::RemoteTier tier(options, trust);
    const LogLevel level = logLevel();
    setLogLevel(LogLevel::Error);  // the probe's outage warning: the verdict below says it
    const std::string why = tier.probe();
    setLogLevel(level);
    const std::string keyNote = trust.signedMode() ? "" : "; no HOTKERNEL_CACHE_KEY_FILE: its entries are not authenticated";
    if (!why.empty()) {
      return options.url.toString() + ": unreachable, serving uses the local cache only (" +
             oneLine(withoutSourceLocation(why)) + ")" + keyNote;
    }
    return options.url.toString() + ": reachable" + keyNote;
  } catch (const std::exception& e) {
    return "not used: " + oneLine(withoutSourceLocation(e.what()));
  }
}

std::string helper(const char* name, LazyVariable variable) {
  std::string why;
  const std::string path = findHelperExecutable(name, variable, &why);
  return path.empty() ? "not usable: " + why : path;
}

std::string library(const char* variable) {
  const char* value = std::getenv(variable);
  struct stat st;
  if (value == nullptr || *value == '\0') return "the default";
  return std::string(value) + (::stat(value, &st) == 0 && S_ISREG(st.st_mode) ? "" : " (missing)");
}

// Name -> how its value resolves (the variables of Config.h's table).
const std::map<std::string, std::function<std::string()>>& resolvers() {
  static const std::map<std::string, std::function<std::string()>> table = {
      {"HOTKERNEL", [] { return config().enabled ? std::string("on") : std::string("off: hotkernel does nothing"); }},
      {"HOTKERNEL_CACHE_DIR", [] { return config().cacheDir; }},
      {"HOTKERNEL_CACHE_KEY_FILE",
       [] {
         // Note [Cache key file]: the verdict a serving process reaches for this cache.
         const cache::EntryTrust trust = cache::EntryTrust::fromConfig(config().cacheDir);
         if (!trust.keyRefused.empty()) return "refused, so no entry loads or is stored: " + oneLine(withoutSourceLocation(trust.keyRefused));
         if (trust.key) return "key " + trust.key->id() + ": entries are signed, unsigned ones do not load";
         return std::string("no key: entries are not signed");
       }},
      {"HOTKERNEL_CACHE_PATH",
       [] {
         return config().cachePath.empty() ? std::string("none")
                                           : joined(config().cachePath, ", ") + " (read after HOTKERNEL_CACHE_DIR)";
       }},
      {"HOTKERNEL_OPTIMIZE",
       [] { return config().optimize ? std::string("on") : std::string("off: cached kernels only"); }},
      {"HOTKERNEL_FUSION",
       [] {
         return config().fusion ? std::string("on: hot chains of small ops run as fused kernels")
                                : std::string("off");
       }},
      {"HOTKERNEL_FUSION_START",
       [] {
         return config().fusionStartBusy
                    ? std::string("busy: a chain starts only on a stream with work queued")
                    : std::string("always: a chain starts whenever its first op is called");
       }},
      {"HOTKERNEL_FUSION_ROUNDING",
       [] {
         return config().fusionEagerRounding
                    ? std::string("eager: fused chains round each 16-bit value as eager stores it")
                    : std::string("fused: fused chains keep their intermediates in float32");
       }},
      {"HOTKERNEL_FUSION_BATCH_NORM",
       [] {
         return config().fusionBatchNorm ? std::string("on: eval batch norms join chains with the ops after them")
                                         : std::string("off: batch norms run as eager runs them");
       }},
      {"HOTKERNEL_FUSION_IN_PLACE",
       [] {
         return config().fusionInPlace
                    ? std::string("on: in-place ops (relu_, +=) on a chain's values join the chain")
                    : std::string("off: an in-place op ends a chain");
       }},
      {"HOTKERNEL_FUSION_PASS_CONVOLUTIONS",
       [] {
         return config().fusionPassConvolutions
                    ? std::string("on: a convolution of other tensors runs while a chain stays pending")
                    : std::string("off: a convolution flushes a pending chain first");
       }},
      {"HOTKERNEL_NVTX",
       [] {
         return config().nvtx ? std::string("on: an NVTX range names each plan launch (seen under a profiler)")
                              : std::string("off: no NVTX ranges");
       }},
      {"HOTKERNEL_CUPTI",
       [] {
         return config().cupti ? std::string("on: GPU time attributed to the sampled ops with CUPTI (in the profile)")
                               : std::string("off");
       }},
      {"HOTKERNEL_TRUST_AGENT_ENTRIES",
       [] {
         return config().trustAgentEntries ? std::string("on: cached agent kernels load")
                                           : std::string("off: cached agent kernels are not loaded");
       }},
      {"HOTKERNEL_HOT_CALLS", [] { return std::to_string(config().hotCalls); }},
      {"HOTKERNEL_PROFILE",
       [] { return config().profilePath.empty() ? std::string("not written") : config().profilePath; }},
      {"HOTKERNEL_OPS", [] { return joined(config().ops, ","); }},
      {"HOTKERNEL_IDLE_MS", [] { return std::to_string(config().idleMs) + " ms"; }},
      {"HOTKERNEL_OPT_MEM_MB",
       [] {
         const int64_t mb = config().optimizerMemoryMb;
         return mb == 0 ? std::string("a quarter of the GPU's memory") : std::to_string(mb) + " MiB";
       }},
      {"HOTKERNEL_IDLE_MAX_UTIL",
       [] {
         const int util = config().idleMaxUtil;
         return util < 0 ? std::string("not used") : std::to_string(util) + "%";
       }},
      {"HOTKERNEL_SAMPLE", [] { return number(config().samplingProb); }},
      {"HOTKERNEL_REMOTE_CACHE", remoteCache},
      {"HOTKERNEL_REMOTE_TIMEOUT_MS", [] { return std::to_string(config().remoteTimeoutMs) + " ms"; }},
      {"HOTKERNEL_REMOTE_LEASE_MS", [] { return std::to_string(config().remoteLeaseMs) + " ms"; }},
      {"HOTKERNEL_REMOTE_LEASE_MAX_MS", [] { return std::to_string(config().remoteLeaseMaxMs) + " ms"; }},
      {"HOTKERNEL_REMOTE_POLL_MS", [] { return std::to_string(config().remotePollMs) + " ms"; }},
      {"HOTKERNEL_LOG_LEVEL", [] { return levelName(logLevel()); }},
      {"HOTKERNEL_AGENT_CMD", agentCommand},
      {"HOTKERNEL_AGENT_TIMEOUT", agentTimeout},
      {"HOTKERNEL_NVRTC_PATH",
       [] { return nvrtcAvailable() ? nvrtcLibraryPath() : "not loadable: " + oneLine(nvrtcUnavailableReason()); }},
      {"HOTKERNEL_SANDBOX_COMPILE", [] { return helper("hotkernel-sandbox-compile", LazyVariable::SandboxCompile); }},
      {"HOTKERNEL_SANDBOX_RUN", [] { return helper("hotkernel-sandbox-run", LazyVariable::SandboxRun); }},
      {"HOTKERNEL_LIBRARY", [] { return library("HOTKERNEL_LIBRARY"); }},
  };
  return table;
}

}  // namespace

std::vector<VariableReport> hotkernelVariables() {
  std::vector<VariableReport> out;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string entry = *e;
    const size_t eq = entry.find('=');
    if (eq == std::string::npos) continue;
    const std::string name = entry.substr(0, eq);
    if (name != "HOTKERNEL" && name.rfind("HOTKERNEL_", 0) != 0) continue;
    VariableReport v;
    v.name = name;
    v.value = entry.substr(eq + 1);
    out.push_back(std::move(v));
  }
  std::sort(out.begin(), out.end(), [](const VariableReport& a, const VariableReport& b) { return a.name < b.name; });
  for (VariableReport& v : out) {
    auto it = resolvers().find(v.name);
    if (it != resolvers().end()) {
      v.resolved = it->second();
    } else if (v.name.rfind("HOTKERNEL_SANDBOX_TEST_", 0) == 0) {
      v.resolved = "test only: a fault of the sandbox-compile helper";
    } else if (v.name == "HOTKERNEL_AGENT_PROTOCOL") {
      v.resolved = "set by hotkernel for the agents it starts";
    } else {
      v.known = false;
      v.resolved = "not a hotkernel variable: ignored";
    }
  }
  return out;
}

}  // namespace hotkernel::cli
