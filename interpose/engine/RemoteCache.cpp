#include "RemoteCache.h"

#include <unistd.h>

#include <algorithm>

#include "hotkernel/Config.h"
#include "hotkernel/kernels/VariantOptions.h"
#include "hotkernel/runtime/Config.h"
#include "hotkernel/runtime/ExitGate.h"
#include "hotkernel/runtime/Logging.h"

namespace hotkernel::engine {

std::unique_ptr<RemoteCache> RemoteCache::fromConfig(const std::string& cacheDir) {
  const Config& c = config();
  if (c.remoteCache.empty()) return nullptr;
  try {
    cache::RemoteTierOptions options;
    options.url = cache::parseRemoteUrl(c.remoteCache);
    options.timeout = std::chrono::milliseconds(c.remoteTimeoutMs);
    options.hotkernelVersion = HOTKERNEL_VERSION;
    cache::EntryTrust trust = cache::EntryTrust::fromConfig(cacheDir);
    if (!trust.signedMode()) {
      HOTKERNEL_LOG(Warn) << "HOTKERNEL_REMOTE_CACHE without HOTKERNEL_CACHE_KEY_FILE: entries from "
                          << options.url.toString() << " are checked for damage only, so whoever can write to "
                          << "that Redis can make this process run its code (README: Threat model)";
    }
    HOTKERNEL_LOG(Info) << "shared tier " << options.url.toString() << " (timeout " << c.remoteTimeoutMs
                        << " ms, lease " << c.remoteLeaseMs << " ms (at most " << c.remoteLeaseMaxMs
                        << " ms), poll " << c.remotePollMs << " ms)";
    return std::make_unique<RemoteCache>(std::move(options), std::move(trust),
                                         std::chrono::milliseconds(c.remoteLeaseMs),
                                         std::chrono::milliseconds(c.remoteLeaseMaxMs),
                                         std::chrono::milliseconds(c.remotePollMs));
  } catch (const std::exception& e) {
    HOTKERNEL_LOG(Warn) << "the shared tier is not used: " << e.what();
    return nullptr;
  }
}

RemoteCache::RemoteCache(cache::RemoteTierOptions options, cache::EntryTrust trust,
                         std::chrono::milliseconds leaseTtl, std::chrono::milliseconds leaseMaxLifetime,
                         std::chrono::milliseconds pollInterval)
    : tier_(std::move(options), std::move(trust)),
      leases_(tier_, leaseTtl, leaseMaxLifetime),
      leaseTtl_(leaseTtl),
      pollInterval_(pollInterval) {}

RemoteCache::~RemoteCache() { stop(); }

void RemoteCache::stop() {
  // Note [The poller is joined at stop]
  std::thread poller;
  {
    std::lock_guard<std::mutex> guard(mu_);
    stopping_ = true;
    poller = std::move(poller_);
    cv_.notify_all();
  }
  if (!poller.joinable()) return;
  if (poller.get_id() == std::this_thread::get_id() || ::getpid() != pollerPid_) {
    poller.detach();  // called by a callback, or in a forked child, which has no poller
    return;
  }
  poller.join();
}

void RemoteCache::watch(const std::string& fingerprint, OnPublished onPublished, LocalEntries localEntries) {
  std::lock_guard<std::mutex> guard(mu_);
  fingerprints_.insert(fingerprint);
  if (started_ || stopping_) return;
  started_ = true;
  onPublished_ = std::move(onPublished);
  localEntries_ = std::move(localEntries);
  pollerPid_ = ::getpid();
  poller_ = std::thread([this] { pollLoop(); });
}

RemoteCache::Step RemoteCache::beforeTuning(const std::string& fingerprint, const OptimizerJob& job,
                                            const std::function<bool(const cache::Entry&)>& passOver) {
  Step step;
  const std::string variant = kernels::variantString(job.key);
  auto usable = [&](const cache::RemoteLookup& found) {
    return found.status == cache::RemoteStatus::Found && found.entry && !(passOver && passOver(*found.entry));
  };
  cache::RemoteLookup found = tier_.lookup(fingerprint, job.op, variant);
  if (usable(found)) {
    step.entry = std::move(found.entry);
    return step;
  }
  const cache::LeaseAttempt attempt = tier_.acquireLease(fingerprint, job.op, variant, leaseTtl_);
  if (attempt.kind == cache::LeaseAttempt::Kind::Acquired) {
    // The holder before us may have published and released between the lookup and the lease: look once more.
    found = tier_.lookup(fingerprint, job.op, variant);
    if (usable(found)) {
      tier_.releaseLease(attempt.lease);
      step.entry = std::move(found.entry);
      return step;
    }
  }
  std::lock_guard<std::mutex> guard(mu_);
  deferred_.erase(jobId(job));
  if (attempt.kind == cache::LeaseAttempt::Kind::Held) {
    step.leasedElsewhere = true;
    Deferred d;
    d.job = job;
    d.job.target.reset();
    d.fingerprint = fingerprint;
    deferred_[jobId(job)] = std::move(d);
    HOTKERNEL_LOG(Info) << "another process tunes " << job.op << " " << variant << " (lease "
                        << attempt.remainingMs << " ms left); keeping the ATen kernel until it publishes";
  } else if (attempt.kind == cache::LeaseAttempt::Kind::Acquired) {
    step.lease = attempt.lease;
    leases_.keep(attempt.lease);
  }
  return step;
}

void RemoteCache::finishTuning(const std::optional<cache::RemoteLease>& lease, const cache::Entry* decision) {
  // Note [A lease's lifetime is bounded]: publish while the lease is ours (or none was granted), then release it.
  if (!lease) {
    if (decision != nullptr) tier_.publish(*decision);
    return;
  }
  if (!leases_.ours(*lease)) {
    leases_.finish(*lease);
    if (decision != nullptr) {
      HOTKERNEL_LOG(Info) << "not publishing " << decision->op << " " << decision->variant
                          << ": its lease was given up or lost, another process tunes it for the fleet";
    }
    return;
  }
  if (decision != nullptr) tier_.publish(*decision);
  leases_.finish(*lease);
}

bool RemoteCache::hasDeferred() const {
  std::lock_guard<std::mutex> guard(mu_);
  return !deferred_.empty();
}

std::optional<OptimizerJob> RemoteCache::nextReadyDeferred(std::chrono::milliseconds wait) {
  std::unique_lock<std::mutex> lock(mu_);
  auto ready = [this]() -> std::map<std::string, Deferred>::iterator {
    return std::find_if(deferred_.begin(), deferred_.end(), [](const auto& d) { return d.second.ready; });
  };
  cv_.wait_for(lock, wait, [&] { return stopping_ || deferred_.empty() || ready() != deferred_.end(); });
  auto it = ready();
  if (stopping_ || it == deferred_.end()) return std::nullopt;
  OptimizerJob job = it->second.job;
  deferred_.erase(it);
  return job;
}

void RemoteCache::pollLoop() {
  // Renewals every third of the TTL; polls every pollInterval_ (Note [The shared tier in a serving process]).
  const auto tick = std::min(pollInterval_, leases_.tick());
  auto nextPoll = std::chrono::steady_clock::now();
  while (true) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (stopping_ || ExitGate::process().exiting()) return;
    }
    leases_.renewDue();  // Note [A lease's lifetime is bounded]
    if (std::chrono::steady_clock::now() >= nextPoll) {
      pollOnce();
      nextPoll = std::chrono::steady_clock::now() + pollInterval_;
    }
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, tick, [this] { return stopping_; });
  }
}

void RemoteCache::pollOnce() {
  std::set<std::string> fingerprints;
  OnPublished onPublished;
  LocalEntries localEntries;
  std::vector<std::pair<std::string, Deferred>> deferred;
  {
    std::lock_guard<std::mutex> guard(mu_);
    fingerprints = fingerprints_;
    onPublished = onPublished_;
    localEntries = localEntries_;
    for (const auto& [id, d] : deferred_) {
      if (!d.ready) deferred.emplace_back(id, d);
    }
  }
  for (const std::string& fp : fingerprints) {
    const std::optional<std::vector<cache::RemoteIndexItem>> items = watch_.changes(tier_, fp);
    if (!items) return;  // unavailable: the back-off answers the rest at once; try again next poll
    for (const cache::RemoteIndexItem& item : *items) {
      if (onPublished) onPublished(fp, item);
    }
    if (watch_.resetSeen(fp) && localEntries) republishMissing(fp, localEntries);
  }
  // Note [Variants leased elsewhere]: ready once the lease is gone (published and released, or expired).
  std::vector<std::string> ready;
  for (const auto& [id, d] : deferred) {
    const std::optional<int64_t> left = tier_.leaseRemainingMs(d.fingerprint, d.job.op, kernels::variantString(d.job.key));
    if (left && *left == 0) ready.push_back(id);
  }
  if (ready.empty()) return;
  std::lock_guard<std::mutex> guard(mu_);
  for (const std::string& id : ready) {
    if (auto it = deferred_.find(id); it != deferred_.end()) it->second.ready = true;
  }
  cv_.notify_all();
}

void RemoteCache::republishMissing(const std::string& fingerprint, const LocalEntries& localEntries) {
  // Note [A tier that came back empty is filled again]
  std::vector<cache::Entry> own;
  try {
    own = localEntries(fingerprint);
  } catch (const std::exception& e) {
    HOTKERNEL_LOG(Warn) << "cannot read the own cache to fill the shared tier again: " << e.what();
    return;
  }
  size_t published = 0;
  for (const cache::Entry& e : own) {
    if (watch_.inIndex(fingerprint, e.op, e.variant)) continue;
    if (tier_.publish(e)) ++published;
  }
  if (published > 0) {
    HOTKERNEL_LOG(Info) << "the shared tier came back without entries of fingerprint " << fingerprint
                        << ": published " << published << " from the own cache again";
  }
}

}  // namespace hotkernel::engine
