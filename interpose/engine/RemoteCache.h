#pragma once
// The shared tier (HOTKERNEL_REMOTE_CACHE) as a serving process uses it.
//
// Note [The shared tier in a serving process]
// Lookups go local first, then remote: Engine::optimizeVariant asks the own
// store and then RemoteTier::lookup; a remote entry passes the same admission
// as a local one (entryRefusal and the family's makePlan, in
// Engine::publishEntry), a kernel also its check before first use on the
// optimizer thread (Note [Cached kernels checked before first use] in
// CachedKernelCheck.h), and only then is put into the own store (re-signed
// with the local key), so later processes of the host load it locally
// without a new check. A kernel refused by its check is passed over by the
// next lookup (Note [Held entries]); the variant is tuned under a lease and
// the tuned entry replaces it in the tier. The
// engine calls the tier only from the optimizer thread and from this file's
// poller thread, never from a served call: a Redis that is down or slow costs
// the optimizer at most the timeout per call, then answers Unavailable during
// the back-off (Note [A Redis that is down is an absent tier]).
//
// Before tuning a variant the optimizer takes its lease (Note [Leases: one
// tuner per variant]). Unavailable: it tunes anyway, as without the tier.
// Held by another process: it keeps ATen for the variant and defers it
// (Note [Variants leased elsewhere]). Acquired: it tunes, publishes the
// decision (kernel or keep_aten), then releases the lease; the poller thread
// renews every held lease each third of its TTL (cache::LeaseKeeper), so a
// long tuning (or a wait for idle GPU time at a yield point) keeps it, and a
// process that dies loses it after the TTL. A tuning that outlives
// HOTKERNEL_REMOTE_LEASE_MAX_MS gives the lease up, and its result is not
// published (Note [A lease's lifetime is bounded] in LeaseKeeper.h).
//
// Note [Variants leased elsewhere]
// A deferred variant waits in this object until the poller sees its entry
// published or its lease gone (expired: the holder died); it is then ready,
// and the optimizer thread runs it again after its current job whenever no
// other job is queued (Engine::runDeferredRemoteJobs): the entry is found and
// admitted, or the lease is taken and the variant tuned here. The optimizer
// thread waits for a ready variant only while nothing else is queued, in
// slices, without its unit lock, parking at exit.
//
// The poller thread (Note [Learning of new remote entries: polling]) does no
// GPU work and writes nothing to the own store: every poll interval it asks
// RemoteWatch what other processes published for this process's fingerprints
// and hands each (fingerprint, op, variant) to the engine, which queues an
// optimizer job for a variant it has no decision for (the job finds the
// entry). When the tier came back empty it reads the own store's entries of
// the fingerprint and publishes those the tier lacks (Note [A tier that came
// back empty is filled again] in RemoteWatch.h). It stops at exit; a forked child has no poller and never uses the
// tier (the connection belongs to the parent).

#include <sys/types.h>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "hotkernel/cache/Entry.h"
#include "hotkernel/cache/LeaseKeeper.h"
#include "hotkernel/cache/RemoteTier.h"
#include "hotkernel/cache/RemoteWatch.h"
#include "hotkernel/optimizer/OptimizerWorker.h"

namespace hotkernel::engine {

class RemoteCache {
 public:
  // Called on the poller thread for each (fingerprint, op, variant) another process published.
  using OnPublished = std::function<void(const std::string& fingerprint, const cache::RemoteIndexItem& item)>;
  // Called on the poller thread after the tier came back empty: this process's own entries of a fingerprint.
  using LocalEntries = std::function<std::vector<cache::Entry>(const std::string& fingerprint)>;

  // The tier of HOTKERNEL_REMOTE_CACHE (config()), or null when it is unset or
  // malformed (reported once). Never throws.
  static std::unique_ptr<RemoteCache> fromConfig(const std::string& cacheDir);
  RemoteCache(cache::RemoteTierOptions options, cache::EntryTrust trust, std::chrono::milliseconds leaseTtl,
              std::chrono::milliseconds leaseMaxLifetime, std::chrono::milliseconds pollInterval);
  ~RemoteCache();
  RemoteCache(const RemoteCache&) = delete;
  RemoteCache& operator=(const RemoteCache&) = delete;

  cache::RemoteTier& tier() { return tier_; }

  // Starts the poller (once) and adds `fingerprint` to what it polls; the callbacks are the first call's.
  void watch(const std::string& fingerprint, OnPublished onPublished, LocalEntries localEntries = {});

  // What the optimizer does with a variant it has no local decision for.
  struct Step {
    std::optional<cache::Entry> entry;  // found remotely: admit it
    bool leasedElsewhere = false;       // another process tunes it: deferred, keep ATen
    std::optional<cache::RemoteLease> lease;  // held by us: tune, publish, finishTuning
  };
  // An entry found for which `passOver` says true (a kernel refused in this process: Note [Held entries] in
  // HeldEntries.h) counts as absent: the lease is taken and the variant tuned.
  Step beforeTuning(const std::string& fingerprint, const OptimizerJob& job,
                    const std::function<bool(const cache::Entry&)>& passOver = {});
  // Publishes `decision` (when given) and releases the lease; a decision
  // made under a lease given up or lost is not published (Note [A lease's
  // lifetime is bounded]). Never throws.
  void finishTuning(const std::optional<cache::RemoteLease>& lease, const cache::Entry* decision);
  // Whether `lease` is still held by this process (neither given up nor found lost).
  bool leaseIsOurs(const cache::RemoteLease& lease) const { return leases_.ours(lease); }

  // Note [Variants leased elsewhere]: the next ready deferred job; waits up to
  // `wait` for one; nullopt when none is ready (or none is deferred).
  std::optional<OptimizerJob> nextReadyDeferred(std::chrono::milliseconds wait);
  bool hasDeferred() const;

  // Stops the poller and waits for it to leave the tier (at most the rest of
  // its current poll, each Redis call bounded by the tier's timeout): when it
  // returns, no callback runs and the tier is not touched again, so the
  // object can be destroyed. The destructor calls it.
  //
  // Note [The poller is joined at stop]
  // The poller thread uses this object; a poller left running past stop()
  // (blocked in a Redis call during a restart, say) would use it after its
  // destruction. So stop() joins it, except when called on the poller itself
  // (a callback) or in a forked child (the thread does not exist there); the
  // engine never destroys its RemoteCache (the engine lives until the process
  // ends), and at exit the poller returns on its own (ExitGate).
  void stop();

 private:
  struct Deferred {
    OptimizerJob job;
    std::string fingerprint;
    bool ready = false;
  };
  void pollLoop();
  void pollOnce();
  // Publishes the own entries of `fingerprint` that the tier's index lacks (poller thread).
  void republishMissing(const std::string& fingerprint, const LocalEntries& localEntries);

  cache::RemoteTier tier_;
  cache::LeaseKeeper leases_;  // the leases this process holds: renewed by the poller
  const std::chrono::milliseconds leaseTtl_;
  const std::chrono::milliseconds pollInterval_;
  cache::RemoteWatch watch_;  // poller thread only

  mutable std::mutex mu_;
  std::condition_variable cv_;  // notified when a deferred job turns ready, and at stop
  // Guarded by mu_.
  std::set<std::string> fingerprints_;
  OnPublished onPublished_;
  LocalEntries localEntries_;
  std::map<std::string, Deferred> deferred_;        // by jobId
  bool stopping_ = false;
  bool started_ = false;
  std::thread poller_;  // joinable from the first watch() until stop()
  pid_t pollerPid_ = 0;  // the process that started poller_
};

}  // namespace hotkernel::engine
