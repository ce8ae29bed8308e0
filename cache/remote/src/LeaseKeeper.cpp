#include "hotkernel/cache/LeaseKeeper.h"

#include <algorithm>
#include <vector>

#include "hotkernel/runtime/Logging.h"

namespace hotkernel::cache {

LeaseKeeper::LeaseKeeper(RemoteTier& tier, std::chrono::milliseconds ttl, std::chrono::milliseconds maxLifetime)
    : tier_(tier), ttl_(ttl), maxLifetime_(maxLifetime) {}

void LeaseKeeper::keep(const RemoteLease& lease) {
  std::lock_guard<std::mutex> guard(mu_);
  held_[lease.token] = Held{lease, std::chrono::steady_clock::now(), State::Kept};
}

size_t LeaseKeeper::renewDue() {
  std::vector<Held> due;
  {
    std::lock_guard<std::mutex> guard(mu_);
    for (const auto& [token, h] : held_) {
      if (h.state == State::Kept) due.push_back(h);
    }
  }
  size_t gaveUp = 0;
  for (const Held& h : due) {
    const auto age = std::chrono::steady_clock::now() - h.acquired;
    // Note [A lease's lifetime is bounded]
    if (age >= maxLifetime_) {
      {
        std::lock_guard<std::mutex> guard(mu_);
        auto it = held_.find(h.lease.token);
        if (it == held_.end() || it->second.state != State::Kept) continue;  // finished meanwhile
        it->second.state = State::GivenUp;
        ++givenUp_;
      }
      tier_.releaseLease(h.lease);
      ++gaveUp;
      HOTKERNEL_LOG_ONCE(Warn, "lease-given-up:" + h.lease.token)
          << "tuning " << h.lease.op << " " << h.lease.variant << " has held its lease for "
          << std::chrono::duration_cast<std::chrono::milliseconds>(age).count()
          << " ms, past HOTKERNEL_REMOTE_LEASE_MAX_MS (" << maxLifetime_.count()
          << " ms): the variant is given up for another process to tune; this result will not be published";
      continue;
    }
    if (tier_.renewLease(h.lease, ttl_) || !tier_.reachable()) continue;  // ours, or Redis away: try next tick
    {
      std::lock_guard<std::mutex> guard(mu_);
      auto it = held_.find(h.lease.token);
      if (it == held_.end() || it->second.state != State::Kept) continue;
      it->second.state = State::Lost;
      ++lost_;
    }
    HOTKERNEL_LOG_ONCE(Warn, "lease-lost:" + h.lease.token)
        << "the lease on " << h.lease.op << " " << h.lease.variant
        << " was lost (it expired, or Redis restarted empty); another process may tune it too";
  }
  return gaveUp;
}

bool LeaseKeeper::ours(const RemoteLease& lease) const {
  std::lock_guard<std::mutex> guard(mu_);
  auto it = held_.find(lease.token);
  return it != held_.end() && it->second.state == State::Kept;
}

bool LeaseKeeper::finish(const RemoteLease& lease) {
  bool ours = false;
  {
    std::lock_guard<std::mutex> guard(mu_);
    auto it = held_.find(lease.token);
    if (it != held_.end()) {
      ours = it->second.state == State::Kept;
      held_.erase(it);
    }
  }
  if (ours) tier_.releaseLease(lease);
  return ours;
}

std::chrono::milliseconds LeaseKeeper::tick() const {
  return std::max(ttl_ / 3, std::chrono::milliseconds(1));
}

size_t LeaseKeeper::kept() const {
  std::lock_guard<std::mutex> guard(mu_);
  return static_cast<size_t>(
      std::count_if(held_.begin(), held_.end(), [](const auto& h) { return h.second.state == State::Kept; }));
}

uint64_t LeaseKeeper::givenUp() const {
  std::lock_guard<std::mutex> guard(mu_);
  return givenUp_;
}

uint64_t LeaseKeeper::lost() const {
  std::lock_guard<std::mutex> guard(mu_);
  return lost_;
}

}  // namespace hotkernel::cache
