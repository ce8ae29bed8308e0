#pragma once
// Process-wide configuration read once from the environment.
//
// | variable                      | default                      | accepted values (Note [Reading numeric variables]) | meaning |
// |-------------------------------|------------------------------|-----------------------------------------------------|---------|
// | HOTKERNEL                     | 1                            | 0, 1, false, true, off, on, no, yes | 0 turns hotkernel off entirely (shim loads nothing) |
// | HOTKERNEL_CACHE_DIR           | $XDG_CACHE_HOME/hotkernel or ~/.cache/hotkernel | a directory | the kernel cache |
// | HOTKERNEL_CACHE_PATH          | (unset)                      | directories separated by ':' | read-only caches read after HOTKERNEL_CACHE_DIR, first match wins; may be root's (Note [Cache tiers] in hotkernel/cache/CacheTiers.h) |
// | HOTKERNEL_CACHE_KEY_FILE      | (unset)                      | a file path | HMAC key of the cache entries: set, only entries signed with it load (Note [Cache key file] in hotkernel/cache/EntryKey.h) |
// | HOTKERNEL_OPTIMIZE            | 1                            | as HOTKERNEL | 0: only use cached kernels, never optimize in-process |
// | HOTKERNEL_FUSION              | 1                            | as HOTKERNEL | 1: learn hot chains of small ops and run them as fused kernels (hotkernel/interpose/FusionEngine.h); 0: off |
// | HOTKERNEL_FUSION_START        | always                       | always, busy | busy: a chain starts only when its stream has work queued, else its first call runs eagerly (Note [Idle streams] in hotkernel/interpose/FusionEngine.h) |
// | HOTKERNEL_FUSION_ROUNDING     | fused                        | fused, eager | eager: a fused chain rounds every 16-bit value it computes as eager ATen stores it (Note [Eager rounding on request] in hotkernel/chain/ChainParameterSpace.h) |
// | HOTKERNEL_FUSION_BATCH_NORM   | 1                            | as HOTKERNEL | 1: eval batch norms (nn.BatchNorm2d in eval mode) join chains with the ops after them (Note [Eval BatchNorm in a chain]); 0: they run as eager runs them |
// | HOTKERNEL_FUSION_IN_PLACE     | 1                            | as HOTKERNEL | 1: in-place pointwise ops (ReLU(inplace=True), a residual +=) on a chain's values join the chain (Note [In-place steps] in kernels/chain/src/CallWrites.h); 0: an in-place op ends a chain |
// | HOTKERNEL_FUSION_PASS_CONVOLUTIONS | 1                       | as HOTKERNEL | 1: a convolution that reads no pending value runs while the chain stays pending (a ResNet shortcut's, between bn3 and the residual add: Note [Ops a chain lets pass] in interpose/fusion/DeferrableOps.h); 0: a convolution flushes the chain first |
// | HOTKERNEL_NVTX                | 1                            | as HOTKERNEL | 0: no NVTX range around plan launches (Note [NVTX ranges around plan launches] in hotkernel/runtime/NvtxRange.h) |
// | HOTKERNEL_CUPTI               | 0                            | as HOTKERNEL | 1: the recorder attributes GPU time to the sampled ops with CUPTI's activity API (Note [GPU time from CUPTI] in hotkernel/runtime/CuptiActivitySource.h) |
// | HOTKERNEL_TRUST_AGENT_ENTRIES | 0                            | as HOTKERNEL | 1: cached agent kernels load too (Note [Entries a process loads] in interpose/engine/EntryAdmission.h) |
// | HOTKERNEL_HOT_CALLS           | 50                           | 1 .. kMaxHotCalls (10^12) | calls of one variant before it is queued for optimization |
// | HOTKERNEL_PROFILE             | (unset)                      | a file path; %p: the process id, %%: a % | file the recorded variants are written to at exit and on SIGTERM (JSON; profilePathFor) |
// | HOTKERNEL_OPS                 | _softmax,_log_softmax,_fused_rms_norm,native_layer_norm,cross_entropy_loss,mm,addmm,
// |                               | sum.dim_IntList,mean.dim,amax,argmax,amin,argmin,max.dim,min.dim | comma list | ops to override |
// | HOTKERNEL_IDLE_MS             | 50                           | 1 .. kMaxIdleMs (86400000, a day) | the optimizer works only after this long without serving GPU ops |
// | HOTKERNEL_OPT_MEM_MB          | 25% of the device's memory   | 1 .. kMaxOptimizerMemoryMb (2^30 MiB = 1 PiB) | GPU memory the background optimizer may use |
// | HOTKERNEL_IDLE_MAX_UTIL       | (unset)                      | 0 .. 100 | the device's NVML utilization must also be at most this before the optimizer starts or resumes |
// | HOTKERNEL_SAMPLE              | 0.05                         | a probability in (0, 1] | the recorder's sampling probability; anything else (not a number, <= 0, > 1, NaN) takes 0.05 with a warning |
// | HOTKERNEL_REMOTE_CACHE        | (unset)                      | redis://HOST[:PORT][/DB], unix:///PATH[?db=N] | the shared tier on Redis (Note [Remote cache URL] in hotkernel/cache/RemoteUrl.h); a malformed value is reported once and the tier is not used |
// | HOTKERNEL_REMOTE_TIMEOUT_MS   | 100                          | 1 .. kMaxRemoteTimeoutMs (60000) | the shared tier's connect and per-command deadline |
// | HOTKERNEL_REMOTE_LEASE_MS     | 30000                        | 1000 .. kMaxIdleMs | a tuning lease's TTL; the holder renews it every third of it |
// | HOTKERNEL_REMOTE_LEASE_MAX_MS | 600000                       | 1000 .. kMaxIdleMs | the longest a holder keeps a tuning lease; past it the lease is released and the variant given up (Note [A lease's lifetime is bounded] in hotkernel/cache/LeaseKeeper.h) |
// | HOTKERNEL_REMOTE_POLL_MS      | 5000                         | 100 .. kMaxIdleMs | how often a process polls the shared tier for entries others published |
//
// Read by NVTX itself at its first call, not by Config: NVTX_INJECTION64_PATH (the profiler's tool, which nsys sets).
//
// Read on first need (lazyVariable), parsed by their users with the same rules for malformed values (a warning, then the default):
// | HOTKERNEL_LOG_LEVEL           | warn                         | error, warn (or warning), info, debug | Logging.h; anything else is warned about once |
// | HOTKERNEL_AGENT_CMD, HOTKERNEL_AGENT_TIMEOUT | unset, 60       | optimizer/ExternalAgent.h | the external agent; a malformed one is reported and not used |
// | HOTKERNEL_NVRTC_PATH          | (unset)                      | a library path | Nvrtc.h: the libnvrtc to dlopen instead of the search |
// | HOTKERNEL_SANDBOX_COMPILE, HOTKERNEL_SANDBOX_RUN | (unset)   | an executable | SandboxCompile.h / SandboxRun.h: the helper programs instead of the ones beside the library |
// | HOTKERNEL_LIBRARY             | (unset)                      | a library path | the shim (interpose/preload/Preload.c, libc only): the libhotkernel.so to load |
// | HOTKERNEL_SANDBOX_TEST_*      | (unset)                      | 1 | read only inside the sandbox-compile helper process: faults for its tests |
//
// Note [Variables read on first need]
// The library reads its environment in this file only (runtime/src/Config.cpp):
// Config::fromEnvironment reads the first table once; lazyVariable reads the
// others when their user first needs them: the logger's level before a
// Config exists (Config's own warnings go through the logger); the agent,
// NVRTC and sandbox variables when the optimizer first needs them, so that a
// process that never optimizes never reads them. Their users parse the values
// (ExternalAgent.h, Nvrtc.h, SandboxCompile.h, Logging.h). The shim
// (interpose/preload/Preload.c) has no C++ and reads HOTKERNEL,
// HOTKERNEL_LOG_LEVEL and HOTKERNEL_LIBRARY itself.
//
// Note [Reading numeric variables]
// An unset or empty variable takes its default, silently. Otherwise the value
// must be a decimal integer (strtoll, base 10, nothing after the digits):
//   - not a number ("lots", "10%", "5 ms"), or below the range (0, negative,
//     "-99999999999999999999"): the default, with one warning;
//   - above the range, including values strtoll cannot represent (ERANGE, e.g.
//     HOTKERNEL_OPT_MEM_MB=9223372036854775807): the range's maximum, with one
//     warning. A huge value means "as much as possible", never "off".
// Each warning names the variable, the value given and the value used. The
// maxima keep the arithmetic done on the values in range: the runtime turns
// HOTKERNEL_OPT_MEM_MB into bytes with `<< 20`, which stays below 2^50 at the
// maximum, and HOTKERNEL_IDLE_MS into a double. Config never throws and
// never turns hotkernel off because of a malformed value.

#include <cstdint>
#include <string>
#include <vector>

namespace hotkernel {

struct Config {
  // The ranges' maxima (Note [Reading numeric variables]).
  static constexpr int64_t kMaxHotCalls = 1000000000000;             // 10^12
  static constexpr int64_t kMaxIdleMs = 24 * 3600 * 1000;            // a day
  static constexpr int64_t kMaxOptimizerMemoryMb = int64_t{1} << 30;  // 1 PiB; `<< 20` stays in int64_t
  static constexpr int64_t kMaxRemoteTimeoutMs = 60000;              // a minute

  bool enabled = true;
  std::string cacheDir;
  std::string cacheKeyFile;  // HOTKERNEL_CACHE_KEY_FILE; empty: entries are not signed
  std::vector<std::string> cachePath;  // HOTKERNEL_CACHE_PATH's directories, in order
  bool optimize = true;
  bool fusion = true;  // HOTKERNEL_FUSION
  bool fusionStartBusy = false;  // HOTKERNEL_FUSION_START=busy
  bool fusionEagerRounding = false;  // HOTKERNEL_FUSION_ROUNDING=eager
  bool fusionBatchNorm = true;  // HOTKERNEL_FUSION_BATCH_NORM
  bool fusionInPlace = true;    // HOTKERNEL_FUSION_IN_PLACE
  bool fusionPassConvolutions = true;  // HOTKERNEL_FUSION_PASS_CONVOLUTIONS
  bool nvtx = true;     // HOTKERNEL_NVTX
  bool cupti = false;   // HOTKERNEL_CUPTI
  bool trustAgentEntries = false;  // HOTKERNEL_TRUST_AGENT_ENTRIES
  int64_t hotCalls = 50;  // in [1, kMaxHotCalls]
  std::string profilePath;
  std::vector<std::string> ops;
  int64_t idleMs = 50;            // in [1, kMaxIdleMs]
  int64_t optimizerMemoryMb = 0;  // 0: a quarter of the device's memory; else in [1, kMaxOptimizerMemoryMb]
  // Note [NVML utilization as an idle signal] (runtime/GpuUtilization.h): -1: not used; else in [0, 100].
  int idleMaxUtil = -1;
  double samplingProb = 0.05;  // HOTKERNEL_SAMPLE, in (0, 1]
  std::string remoteCache;        // HOTKERNEL_REMOTE_CACHE, as written; empty: no shared tier
  int64_t remoteTimeoutMs = 100;  // in [1, kMaxRemoteTimeoutMs]
  int64_t remoteLeaseMs = 30000;  // in [1000, kMaxIdleMs]
  int64_t remoteLeaseMaxMs = 600000;  // in [1000, kMaxIdleMs]
  int64_t remotePollMs = 5000;    // in [100, kMaxIdleMs]

  // Reads the environment; never throws (Note [Reading numeric variables]).
  static Config fromEnvironment();
};

// The configuration of this process, read on first use.
const Config& config();

// The variables of the second table (Note [Variables read on first need]).
enum class LazyVariable {
  LogLevel,            // HOTKERNEL_LOG_LEVEL
  AgentCommand,        // HOTKERNEL_AGENT_CMD
  AgentTimeout,        // HOTKERNEL_AGENT_TIMEOUT
  NvrtcPath,           // HOTKERNEL_NVRTC_PATH
  SandboxCompile,      // HOTKERNEL_SANDBOX_COMPILE
  SandboxRun,          // HOTKERNEL_SANDBOX_RUN
  SandboxTestCrash,    // HOTKERNEL_SANDBOX_TEST_CRASH
  SandboxTestHang,     // HOTKERNEL_SANDBOX_TEST_HANG
  SandboxTestGarbage,  // HOTKERNEL_SANDBOX_TEST_GARBAGE
};

// The variable's name, e.g. "HOTKERNEL_AGENT_CMD".
const char* lazyVariableName(LazyVariable variable);

// The variable's value now, read from the environment at each call; "" when
// unset or empty.
std::string lazyVariable(LazyVariable variable);

// Default cache dir for this user: $XDG_CACHE_HOME/hotkernel, else $HOME/.cache/hotkernel.
std::string defaultCacheDir();

// HOTKERNEL_OPS' default: the ops served without being named (Note [Default served ops] in
// docs/design/runtime.md); every other op a family serves is opt-in.
inline constexpr const char* kDefaultServedOps =
    "_softmax,_log_softmax,_fused_rms_norm,native_layer_norm,cross_entropy_loss,mm,addmm,sum.dim_IntList,mean.dim,"
    "amax,argmax,amin,argmin,max.dim,min.dim";

// The profile file of process `pid` for a HOTKERNEL_PROFILE value: each "%p"
// becomes the pid, "%%" a single "%"; any other "%" stays as it is. Several
// workers started with one environment (HOTKERNEL_PROFILE=profile-%p.json)
// then write one file each instead of overwriting one another's.
std::string profilePathFor(const std::string& pattern, long pid);

}  // namespace hotkernel
