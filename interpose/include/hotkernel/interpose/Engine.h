#pragma once
// The process engine inside libhotkernel.so: wires the served ops (the
// dispatcher overrides), the recorder, the cache and the optimizer together.
// The top layer: it uses the serving path and the optimizer; neither uses it
// (the recorder reaches it through the callback start() gives it).
//
// Note [Lazy GPU start]
// hotkernel_start() runs inside `import torch` (or before main) and must not
// initialize CUDA: a process that forks workers before using CUDA would break.
// GPU-side work (fingerprint, opening the cache, loading cached kernels) starts
// on the first CUDA call of an overridden op, or in the optimizer thread, and
// never while the calling stream is capturing a graph.

#include <nlohmann/json.hpp>

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "hotkernel/cache/CacheStore.h"
#include "hotkernel/optimizer/ExternalAgent.h"
#include "hotkernel/optimizer/OptimizerWorker.h"
#include "hotkernel/optimizer/QueueRanker.h"
#include "hotkernel/optimizer/TargetMeasurer.h"
#include "hotkernel/runtime/Config.h"
#include "hotkernel/runtime/GpuUtilization.h"
#include "hotkernel/runtime/DeviceFingerprints.h"
#include "hotkernel/runtime/Fingerprint.h"

namespace hotkernel {

namespace engine {
class HeldEntries;  // interpose/engine/HeldEntries.h
class RemoteCache;  // interpose/engine/RemoteCache.h
}
namespace fusion {
struct HotChain;  // hotkernel/interpose/ChainCatalog.h
}

class Engine {
 public:
  static Engine& instance();

  // 0 active, 1 disabled by configuration, <0 failed (logged). Idempotent.
  int start();
  // Loads cached kernels for `device` once. Returns false (try again later)
  // while the current stream is capturing a graph. Never throws.
  bool ensureDevice(int device) noexcept;
  bool waitIdle(double timeoutSeconds);
  // Optimizes one variant now, on the calling thread: the background worker's
  // job (with the idle gate as yield point) and the offline warm-up's (with its
  // budget). Returns a summary: {"variant", "decision": "kernel"|"keep_aten"|
  // "cached", "speedup"?, "metrics"?}. Throws Error when it cannot tune.
  // `target`: the ranking's budget share and roofline for it (Note [Stopping
  // a target's search] in optimizer/TargetBudget.h); nullopt: the tuner's own limits.
  nlohmann::json optimizeVariant(const std::string& op, const VariantKey& key,
                                 const std::function<bool()>& yieldPoint,
                                 const std::optional<RankedTarget>& target = std::nullopt);
  // Ranking of optimizer jobs for this process (engine/EngineRanking.cpp): jobs
  // with a decision here are skipped, targets near their roofline are recorded
  // as "keep ATen" (cache and experiment log); `calls` gives each job's
  // recorded calls (the recorder's, or a profile's). Needs ensureDevice() first.
  std::unique_ptr<QueueRanker> makeRanker(TargetMeasurer& measurer,
                                          std::function<double(const OptimizerJob&)> calls);
  // The ranking's options (one budget pass of the background optimizer, the stop rules).
  static RankingOptions rankingOptions();
  // The variant strings with a decision in this process (from the cache or tuned).
  // decisionKey(op, variant) of every target decided in the cache or this process.
  std::set<std::string> decisions() const;
  // "aten::_softmax|dtype=bfloat16;rows=4096;cols=32000": ops share variant strings.
  static std::string decisionKey(const std::string& op, const std::string& variant) { return op + "|" + variant; }
  nlohmann::json status() const;
  // At exit (Note [Ordered exit] in runtime/ExitGate.h): served ops go back
  // to ATen, the optimizer parks or stops within a short bound, the profile
  // is written. Runs once; never throws.
  void shutdown() noexcept;
  // Registers the exit hook with atexit, once: called when CUDA is known to be
  // initialized, so that the hook runs before CUDA's own teardown. Never throws.
  void armExitHook() noexcept;

 private:
  Engine();
  void onHot(const std::string& op, const VariantKey& key);
  void optimize(const OptimizerJob& job);
  // On the worker thread, before a job or a ranking starts any GPU work: the
  // idle gate (serving traffic, graph captures) and, with
  // HOTKERNEL_IDLE_MAX_UTIL, the utilization of `device` (Note [NVML
  // utilization as an idle signal]). False: the runtime is stopping.
  bool waitToStart(int device);
  // The optimizer's yield point between bounded units of GPU work: waits for
  // idle GPU time; false when the runtime is stopping. Never returns once the
  // process exits (Note [Ordered exit]).
  bool yieldToServing();
  // Held by the optimizer thread while it does GPU work (a job or a ranking),
  // released while it waits at a yield point (Note [Fork]). Constructed after
  // waitToStart() returned true.
  class UnitHold {
   public:
    explicit UnitHold(Engine& r);
    ~UnitHold();
   private:
    Engine& r_;
  };
  // engine/EngineExit.cpp: the exit hooks (atexit, Py_AtExit) and the fork handlers, once, from start().
  void installExitHandlers();
  // pthread_atfork handlers (Note [Fork]).
  static void forkPrepare();
  static void forkParent();
  static void forkChild();
  void loadDevice(int device);
  // Where an entry comes from (Note [Held entries] in engine/HeldEntries.h): a cache tier (an agent
  // kernel is held for its check), the shared tier (every kernel is held for its check), or a held entry
  // that passed its check (published).
  enum class EntryOrigin { Cache, Remote, Checked };
  bool publishEntry(const cache::Entry& entry, int device, EntryOrigin origin = EntryOrigin::Cache);
  Fingerprint fingerprintFor(int device) const;
  // engine/EngineHeldEntries.cpp (Note [Held entries]): an admitted entry that needs a check is held until the
  // optimizer thread checked it (a cached agent kernel's job queued once); whether one is held for, or was
  // refused in, this process; the held one checked (an agent kernel's check, or its family's: Note [Cached
  // kernels checked before first use]) and published on the optimizer thread, a shared tier's then stored in
  // the own cache.
  enum class HeldEntryStep { None, Published, Refused };
  void holdEntry(const cache::Entry& entry, int device, EntryOrigin origin);
  bool entryHeld(const std::string& op, const std::string& variant) const;
  bool entryRefusedHere(const std::string& op, const std::string& variant) const;
  HeldEntryStep checkHeldEntry(const std::string& op, const VariantKey& key, const std::function<bool()>& yieldPoint);
  // The GPU memory a tuning (or a check) of `device` may use: HOTKERNEL_OPTIMIZER_MEMORY_MB, else a quarter.
  static int64_t optimizerMemoryCap(int device);
  // engine/EngineRanking.cpp: the background queue's ranker; a target the ranking dropped.
  void installRanker();
  void onSkippedTarget(const OptimizerJob& job, const SkippedTarget& skipped);
  // A queued variant whose calls fused chains took: logged and rearmed in the recorder (Note [Variants fused
  // chains took] in EngineRanking.cpp); the ranker releases its job.
  void releaseTakenVariant(const OptimizerJob& job);
  // Precondition: mu_ held.
  bool hasDecisionLocked(const std::string& op, const std::string& variant) const;
  // Precondition: mu_ held.
  void addDecisionLocked(const std::string& op, const std::string& variant);
  // engine/EngineRemote.cpp: the shared tier (Note [The shared tier in a serving process] in
  // engine/RemoteCache.h). The poller learns of `fingerprint`'s entries; one it published for a variant
  // without a decision here becomes an optimizer job.
  void watchRemote(const std::string& fingerprint);
  void onRemotePublished(const std::string& fingerprint, const std::string& op, const std::string& variant);
  // Admits an entry of the shared tier like a cached one, a kernel only after its check on this (the
  // optimizer) thread, then stores a copy in the own cache. True when the variant is decided by it.
  bool admitRemoteEntry(const cache::Entry& entry, const VariantKey& key, const std::function<bool()>& yieldPoint);
  // On the optimizer thread after a job, without the unit lock: Note [Variants leased elsewhere].
  void runDeferredRemoteJobs();
  // engine/EngineFusion.cpp: chain fusion (HOTKERNEL_FUSION, Note [Fused chains in a serving process]).
  // Installs the fusion engine's trampolines after the served ops'; hot chains become optimizer jobs.
  void startFusion();
  void onHotChain(const fusion::HotChain& hot);
  // A chain job: the cached decision of its variant, or tuneChain; a kernel is published to the fusion engine.
  void optimizeChain(const OptimizerJob& job);
  // The fusion engine's counters for status() ({"on": false} without it).
  static nlohmann::json fusionStatus();

  // Note [Fork]: held by the optimizer thread during its GPU work, released
  // in yieldToServing() while it waits; fork() takes it first, so that the
  // child never inherits a lock of torch's (the caching allocator's) held by
  // the optimizer mid-unit. Taken before loadMu_, the recorder's lock and mu_.
  std::mutex unitMu_;
  // Serializes loadDevice(); taken before mu_, never while holding it.
  std::mutex loadMu_;
  mutable std::mutex mu_;
  // Guarded by mu_. cache_ is written once, in the first loadDevice() before
  // the device is marked loaded; optimize() reads it only after
  // ensureDevice() returned.
  int startResult_ = -2;  // -2: not started
  std::unique_ptr<cache::CacheStore> cache_;
  // HOTKERNEL_CACHE_PATH's caches, read after cache_ (Note [Cache tiers]); written once with cache_.
  std::vector<std::unique_ptr<cache::CacheStore>> readTiers_;
  bool cacheTried_ = false;
  // HOTKERNEL_REMOTE_CACHE's tier; written once with cache_ (null: none, or a forked child's: unused).
  std::unique_ptr<engine::RemoteCache> remote_;
  std::set<int> devicesLoaded_;
  // Each device's fingerprint (Note [A fingerprint per device]), set in
  // loadDevice() before the device is marked loaded; its own lock.
  DeviceFingerprints fingerprints_;
  std::set<std::string> decisions_;  // decisionKey(op, variant) of every decision (kernel or keep_aten)
  // Admitted entries held for their check on the optimizer thread (Note [Held entries]); set in the
  // constructor, then constant; its own lock (a leaf: taken after mu_ or without it, never around a check).
  const std::unique_ptr<engine::HeldEntries> held_;
  // Hot chains by pattern key, queued or decided (Precondition: mu_ held).
  std::map<std::string, std::shared_ptr<const fusion::HotChain>> hotChains_;
  nlohmann::json tuneLog_ = nlohmann::json::array();

  std::unique_ptr<OptimizerWorker> worker_;  // set in start(), then constant
  // HOTKERNEL_AGENT_CMD's agent, read once (in start(), or by the first tuning
  // of a process that never started, the warm-up tool): a malformed setting is
  // reported then, once, and tuning goes on without it. Constant afterwards.
  const ExternalAgent* agent();
  std::once_flag agentOnce_;
  std::optional<ExternalAgent> agent_;
  // Set in start() (installRanker), then constant; used on the worker thread only.
  std::unique_ptr<TargetMeasurer> measurer_;
  std::unique_ptr<QueueRanker> ranker_;
  std::atomic<bool> stopping_{false};        // set at exit; the optimizer stops waiting
  std::atomic<bool> exitHookArmed_{false};   // armExitHook() registered the hook
  std::atomic<bool> shutDown_{false};        // shutdown() ran (or is running)
  // Note [Fork]: set in a child forked from this process; the child never
  // touches the optimizer (its thread is not there), the inherited cache
  // connection, nor the parent's profile file.
  std::atomic<bool> forkedChild_{false};
  // Worker thread only: NVML utilization per device (null: unavailable), opened on first use.
  std::map<int, std::shared_ptr<GpuUtilization>> utilization_;
};

}  // namespace hotkernel
