#pragma once
// The shared tier: cache entries in a Redis that a fleet of hosts shares
// (HOTKERNEL_REMOTE_CACHE), behind each host's own store.
//
//   RemoteTier tier(options, EntryTrust::fromConfig(cacheDir));
//   RemoteLookup r = tier.lookup(fp, op, variant);        // Found: r.entry verified; the caller stores a copy
//   LeaseAttempt a = tier.acquireLease(fp, op, variant, ttl);  // Acquired: tune, publish, releaseLease
//   tier.publish(entry);                                    // after a local decision
//
// Note [Remote tier layout, v1]
// Every key starts with "hotkernel:v1:"; FIELD is "<op>|<variant>" (an op
// name holds no '|'), FP the fingerprint key (Fingerprint::key()):
//
//   hotkernel:v1:entry:FP:FIELD       string: the entry as a bundle of that one entry (Note [Cache bundle
//                                     format, version 1] in Bundle.h), signed with the cache key when one
//                                     is configured: the same bytes and checks as `hotkernel cache import`
//   hotkernel:v1:index:FP             hash: FIELD -> the entry's record_sha256 (Note [Record digest, format v1])
//   hotkernel:v1:generation:FP        integer: incremented by every publish of FP (what pollers watch)
//   hotkernel:v1:lease:FP:FIELD       string: the token of the process tuning (FP, op, variant), with a TTL
//
// A publish writes the entry, its index field and the generation in one
// MULTI/EXEC transaction, so a poller that sees a generation sees its entry.
// A lookup checks the whole bundle (digest, then in signed mode its HMAC,
// then the entry's digests and invariants: decodeBundle), and then that the
// entry is the one asked for (fingerprint, op and variant equal): a valid
// entry copied under another key is refused. A new layout takes "v2" in the
// prefix; a reader never interprets keys of another version. One Redis
// (or a primary with its replicas), not Redis Cluster: the transaction spans
// keys of several hash slots.
//
// Note [Leases: one tuner per variant]
// acquireLease is SET lease-key token NX PX ttl with a random 128-bit token:
// at most one holder at a time. The holder renews (compare-and-renew: a Lua
// script that sets the TTL only while the key still holds its token) and
// releases when done (compare-and-delete, the same way), so a holder whose
// lease expired and was taken by another never extends or deletes the new
// holder's lease. A holder that dies stops renewing; the key expires after at
// most ttl and the next process that asks takes it over. A Redis that is
// unavailable grants no lease (Unavailable): the caller then tunes on its own,
// as without a shared tier.
//
// Note [A Redis that is down is an absent tier]
// Every call returns within about the timeout (Note [Every Redis call has a
// deadline] in src/RedisConnection.h). When a call fails for lack of Redis
// (connect refused, timeout, reset), the connection is dropped, one warning
// names the URL and the reason, and for `backoff` every call answers
// Unavailable at once, without touching the network; the next call after it
// connects again, and a success after an outage is logged once (Info). A
// call whose kept connection turns out dead (Redis restarted since the last
// call) connects once more and runs again before it counts as a failure, so
// each call may run twice (publish and lease calls are safe to repeat). An
// error reply (a read-only replica, out of memory) fails that call only. A
// lookup that finds a refused entry (damaged, unsigned or badly signed under a
// key, another entry's bytes) logs it once per key and counts it; the caller
// treats it as absent and may tune the variant and publish over it.
//
// Thread-safety: every method may be called from any thread; calls are
// serialized on one connection by an internal mutex (each holds it for at
// most about the timeout per round trip). Not usable across fork().

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "hotkernel/cache/Entry.h"
#include "hotkernel/cache/EntryKey.h"
#include "hotkernel/cache/RemoteUrl.h"

namespace hotkernel::cache {

namespace detail {
class RedisConnection;
}

struct RemoteTierOptions {
  RemoteUrl url;
  std::chrono::milliseconds timeout{100};  // connect and each round trip
  std::chrono::milliseconds backoff{5000};  // after a failure, calls answer Unavailable this long
  std::string hotkernelVersion;             // written into each published bundle's header
};

enum class RemoteStatus {
  Found,        // RemoteLookup::entry holds the verified entry
  Absent,       // no entry for the key
  Refused,      // an entry is there but failed a check (logged, counted); treat as absent
  Unavailable,  // Redis could not be asked (down, slow, in back-off); treat as absent
};
const char* toString(RemoteStatus status);  // "found", "absent", "refused", "unavailable"

struct RemoteLookup {
  RemoteStatus status = RemoteStatus::Absent;
  std::optional<Entry> entry;  // Found: verified, cubin loaded, cubinBytes set
  std::string detail;          // Refused / Unavailable: why
};

struct RemoteLease {
  std::string fingerprint, op, variant;
  std::string token;  // the holder's random token
};

struct LeaseAttempt {
  enum class Kind { Acquired, Held, Unavailable } kind = Kind::Unavailable;
  RemoteLease lease;        // Acquired
  int64_t remainingMs = 0;  // Held: the lease's remaining TTL (0: it expired just now)
};

struct RemoteIndexItem {
  std::string op, variant;
  std::string recordSha256;  // of the published entry
};

class RemoteTier {
 public:
  RemoteTier(RemoteTierOptions options, EntryTrust trust);
  ~RemoteTier();
  RemoteTier(const RemoteTier&) = delete;
  RemoteTier& operator=(const RemoteTier&) = delete;

  RemoteLookup lookup(const std::string& fingerprint, const std::string& op, const std::string& variant);
  // Publishes `entry` (cubin loaded; cubinSha256 computed here) for the
  // fleet, signed in signed mode. False when not published (Unavailable, a
  // refused key, an entry that is not puttable): logged, never thrown.
  bool publish(const Entry& entry);

  LeaseAttempt acquireLease(const std::string& fingerprint, const std::string& op, const std::string& variant,
                            std::chrono::milliseconds ttl);
  // True while the lease is still ours (its TTL is reset to `ttl`); false
  // when it was lost (expired, taken) or Redis is unavailable.
  bool renewLease(const RemoteLease& lease, std::chrono::milliseconds ttl);
  // Deletes the lease if it is still ours. Never throws.
  void releaseLease(const RemoteLease& lease);
  // The remaining TTL of the variant's lease, whoever holds it: 0 when none
  // is held; nullopt: unavailable.
  std::optional<int64_t> leaseRemainingMs(const std::string& fingerprint, const std::string& op,
                                          const std::string& variant);

  // The fingerprint's publish counter (0 when nothing was published); nullopt: unavailable.
  std::optional<int64_t> generation(const std::string& fingerprint);
  // Every published (op, variant) of the fingerprint; nullopt: unavailable.
  std::optional<std::vector<RemoteIndexItem>> index(const std::string& fingerprint);

  // Connects (unless in back-off) and PINGs: "" when Redis answers, else why.
  std::string probe();
  // Whether the last call reached Redis (false before the first call and during a back-off).
  bool reachable() const { return reachable_.load(std::memory_order_relaxed); }
  // Why the last failed call could not reach Redis ("" when none failed yet).
  std::string lastError() const;
  // Entries lookup refused since construction.
  uint64_t refusals() const { return refusals_.load(std::memory_order_relaxed); }
  const RemoteTierOptions& options() const { return options_; }

  // The Redis key of (kind, fingerprint, op, variant) per Note [Remote tier layout, v1];
  // kind is "entry" or "lease" (op and variant used), "index" or "generation" (not used).
  static std::string redisKey(const std::string& kind, const std::string& fingerprint, const std::string& op = "",
                              const std::string& variant = "");

 private:
  // Runs `body` on a connection; on failure drops it, logs the outage once, starts the back-off.
  // Returns false when Redis was unavailable (or became so). Precondition: mu_ NOT held.
  template <typename Body>
  bool withConnection(const char* what, Body&& body);

  const RemoteTierOptions options_;
  const EntryTrust trust_;
  std::atomic<bool> reachable_{false};
  std::atomic<uint64_t> refusals_{0};
  mutable std::mutex mu_;
  // Guarded by mu_.
  std::unique_ptr<detail::RedisConnection> connection_;
  std::chrono::steady_clock::time_point retryAfter_{};  // no connect attempt before this
  bool outage_ = false;                                  // an outage was logged and has not ended
  std::string lastError_;                                // the last failure's reason
};

// A fresh random lease token: 32 lowercase hex digits (OpenSSL RAND_bytes).
std::string randomLeaseToken();

}  // namespace hotkernel::cache
