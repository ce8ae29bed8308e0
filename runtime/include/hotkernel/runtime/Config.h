#pragma once
// Process-wide configuration read once from the environment.
//
// | variable                      | default                      | meaning |
// |-------------------------------|------------------------------|---------|
// | HOTKERNEL                     | 1                            | 0 turns hotkernel off entirely (shim loads nothing) |
// | HOTKERNEL_CACHE_DIR           | $XDG_CACHE_HOME/hotkernel or ~/.cache/hotkernel | the kernel cache |
// | HOTKERNEL_LOG_LEVEL           | warn                         | error, warn, info, debug |
// | HOTKERNEL_OPTIMIZE            | 1                            | 0: only use cached kernels, never optimize in-process |
// | HOTKERNEL_HOT_CALLS           | 50                           | calls of one variant before it is queued for optimization |
// | HOTKERNEL_PROFILE             | (unset)                      | file the recorded variants are written to at exit (JSON) |
// | HOTKERNEL_OPS                 | _softmax,_log_softmax,_fused_rms_norm,native_layer_norm,cross_entropy_loss | comma list of ops to override |
// | HOTKERNEL_IDLE_MS             | 50                           | the optimizer works only after this long without serving GPU ops |
// | HOTKERNEL_OPT_MEM_MB          | 25% of the device's memory   | GPU memory the background optimizer may use |
// | HOTKERNEL_IDLE_MAX_UTIL       | (unset)                      | 0-100: the device's NVML utilization must also be at most this before the optimizer starts or resumes |

#include <cstdint>
#include <string>
#include <vector>

namespace hotkernel {

struct Config {
  bool enabled = true;
  std::string cacheDir;
  bool optimize = true;
  int64_t hotCalls = 50;
  std::string profilePath;
  std::vector<std::string> ops;
  int64_t idleMs = 50;
  int64_t optimizerMemoryMb = 0;  // 0: a quarter of the device's memory
  // Note [NVML utilization as an idle signal] (optimizer/GpuUtilization.h): -1: not used.
  int idleMaxUtil = -1;

  // Reads the environment; never throws (malformed values fall back to the default and warn).
  static Config fromEnvironment();
};

// The configuration of this process, read on first use.
const Config& config();

// Default cache dir for this user: $XDG_CACHE_HOME/hotkernel, else $HOME/.cache/hotkernel.
std::string defaultCacheDir();

}  // namespace hotkernel
