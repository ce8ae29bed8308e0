#pragma once
// The leases a process holds, kept alive while it tunes (Note [Leases: one
// tuner per variant] in RemoteTier.h).
//
//   LeaseKeeper keeper(tier, ttl, maxLifetime);
//   keeper.keep(attempt.lease);        // after acquireLease answered Acquired
//   keeper.renewDue();                 // every tick() on a background thread
//   if (keeper.ours(lease)) tier.publish(entry);     // still ours: publish for the fleet
//   keeper.finish(lease);                            // then release it
//
// Note [A lease's lifetime is bounded]
// A holder renews its lease every third of the TTL for as long as it tunes.
// A tuner that never ends (a hang in a compile, a wait for idle GPU time that
// never comes) would then hold the variant for the whole fleet forever: every
// other process keeps ATen for it and waits. So a lease has a maximum
// lifetime (HOTKERNEL_REMOTE_LEASE_MAX_MS): once it is older, the keeper
// stops renewing it, releases it (compare-and-delete, so another process may
// take it at once instead of after the TTL) and logs that once. The holder
// has then given the variant up: finish() answers false, and the holder does
// not publish its result for the fleet (the process that took the lease over
// publishes; the late result may still serve the holder itself and go into
// its own cache). A lease whose renewal finds it gone (it expired while the
// holder was cut off, Redis restarted empty) is lost the same way: it is not
// renewed again, and finish() answers false. So between two tunings of one
// variant in a fleet there is always the end of the first one's lease: its
// release, its expiry, its give-up, or a Redis restart.
//
// Thread-safety: every method may be called from any thread (one internal
// mutex, never held across a Redis call).

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include "hotkernel/cache/RemoteTier.h"

namespace hotkernel::cache {

class LeaseKeeper {
 public:
  // `maxLifetime` may be shorter than `ttl`: the lease is then released at that age all the same.
  LeaseKeeper(RemoteTier& tier, std::chrono::milliseconds ttl, std::chrono::milliseconds maxLifetime);
  LeaseKeeper(const LeaseKeeper&) = delete;
  LeaseKeeper& operator=(const LeaseKeeper&) = delete;

  // Keeps `lease` (just acquired) alive from now on.
  void keep(const RemoteLease& lease);
  // Renews every kept lease; gives up each one past the maximum lifetime and
  // drops each one found lost. Returns how many were given up by this call.
  // Never throws.
  size_t renewDue();
  // Whether `lease` is kept and still ours as far as this keeper knows (neither given up nor found lost).
  bool ours(const RemoteLease& lease) const;
  // Stops keeping `lease` and releases it. True when it was still ours up to
  // now (kept, neither given up nor lost): the holder may publish its result.
  bool finish(const RemoteLease& lease);

  // How often renewDue() should run: a third of the TTL.
  std::chrono::milliseconds tick() const;
  size_t kept() const;
  // Leases given up for their age / found lost since construction.
  uint64_t givenUp() const;
  uint64_t lost() const;

  std::chrono::milliseconds ttl() const { return ttl_; }
  std::chrono::milliseconds maxLifetime() const { return maxLifetime_; }

 private:
  enum class State { Kept, GivenUp, Lost };
  struct Held {
    RemoteLease lease;
    std::chrono::steady_clock::time_point acquired;
    State state = State::Kept;
  };

  RemoteTier& tier_;
  const std::chrono::milliseconds ttl_;
  const std::chrono::milliseconds maxLifetime_;
  mutable std::mutex mu_;
  // Guarded by mu_. By token; an entry stays (GivenUp / Lost) until finish() so that it can answer false.
  std::map<std::string, Held> held_;
  uint64_t givenUp_ = 0;
  uint64_t lost_ = 0;
};

}  // namespace hotkernel::cache
