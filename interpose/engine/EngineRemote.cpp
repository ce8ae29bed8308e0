// The engine's side of the shared tier (Note [The shared tier in a serving
// process] in RemoteCache.h): what the poller learns becomes optimizer jobs,
// remote entries are admitted like cached ones (a kernel after its check:
// Note [Cached kernels checked before first use]), deferred variants run
// when ready. Kept out of Engine.cpp; no torch headers here.

#include <chrono>

#include "RemoteCache.h"
#include "hotkernel/interpose/Engine.h"
#include "hotkernel/interpose/ServedOps.h"
#include "hotkernel/kernels/VariantOptions.h"
#include "hotkernel/runtime/ExitGate.h"
#include "hotkernel/runtime/IdleGate.h"
#include "hotkernel/runtime/Logging.h"

namespace hotkernel {
namespace {

// How long the optimizer thread waits for a deferred variant before it looks for queued jobs again.
constexpr std::chrono::milliseconds kDeferredWaitSlice{50};

}  // namespace

void Engine::watchRemote(const std::string& fingerprint) {
  // cache_ is set before the first watch (loadDevice) and constant afterwards; CacheStore is thread-safe.
  remote_->watch(
      fingerprint,
      [this](const std::string& fp, const cache::RemoteIndexItem& item) { onRemotePublished(fp, item.op, item.variant); },
      [this](const std::string& fp) {
        return cache_ && !forkedChild_.load() ? cache_->listForFingerprint(fp) : std::vector<cache::Entry>{};
      });
}

void Engine::onRemotePublished(const std::string& fingerprint, const std::string& op, const std::string& variant) {
  // On the poller thread: no GPU work, no cache access; a job for each device of this fingerprint.
  if (!worker_ || forkedChild_.load() || ExitGate::process().exiting()) return;
  if (servedOpOf(op) == nullptr) return;
  {
    std::lock_guard<std::mutex> guard(mu_);
    if (hasDecisionLocked(op, variant)) return;
  }
  for (const auto& [device, key] : fingerprints_.keys()) {
    if (key != fingerprint) continue;
    const std::optional<VariantKey> parsed = kernels::parseVariantString(variant, device);
    if (!parsed) continue;
    if (worker_->enqueue(OptimizerJob{op, *parsed})) {
      HOTKERNEL_LOG(Info) << "queued " << op << " " << variant << ": another process published it";
    }
  }
}

bool Engine::admitRemoteEntry(const cache::Entry& entry, const VariantKey& key,
                              const std::function<bool()>& yieldPoint) {
  // Note [Entries a process loads] (entryRefusal, makePlan), and for a kernel Note [Cached kernels checked
  // before first use]: held, checked here once, then published and stored in the own cache (checkHeldEntry).
  publishEntry(entry, key.device, EntryOrigin::Remote);
  if (entry.decision == cache::kDecisionKernel) {
    if (checkHeldEntry(entry.op, key, yieldPoint) != HeldEntryStep::Published) return false;  // tune it here
  } else {
    {
      std::lock_guard<std::mutex> guard(mu_);
      if (!hasDecisionLocked(entry.op, entry.variant)) return false;
    }
    if (cache_ && !forkedChild_.load()) {
      try {
        cache_->put(entry);  // the local copy, signed with this host's key
      } catch (const std::exception& e) {
        HOTKERNEL_LOG(Warn) << "cannot store the shared tier's entry for " << entry.variant << " in the cache: "
                            << e.what();
      }
    }
  }
  HOTKERNEL_LOG(Info) << "loaded " << entry.op << " " << entry.variant << " (" << entry.decision
                      << ") from the shared tier";
  return true;
}

void Engine::runDeferredRemoteJobs() {
  // Note [Variants leased elsewhere]: only while nothing else is queued; without the unit lock.
  while (remote_->hasDeferred()) {
    if (stopping_.load() || !worker_ || worker_->jobsQueued() > 0) return;
    ExitGate::process().parkIfExiting();
    const std::optional<OptimizerJob> job = remote_->nextReadyDeferred(kDeferredWaitSlice);
    if (!job) continue;
    if (!waitToStart(job->key.device)) return;
    UnitHold unit(*this);  // Note [Fork]
    try {
      optimizeVariant(job->op, job->key, [this] { return yieldToServing(); });
    } catch (const std::exception& e) {
      if (!stopping_.load()) {
        HOTKERNEL_LOG(Warn) << "optimizing " << job->op << " failed; keeping the ATen kernel: " << e.what();
      }
      return;
    }
  }
}

}  // namespace hotkernel
