#include "hotkernel/cache/RemoteTier.h"

#include <openssl/rand.h>

#include <algorithm>
#include <ctime>
#include <exception>

#include "EntryRecord.h"
#include "RedisConnection.h"
#include "hotkernel/cache/Bundle.h"
#include "hotkernel/runtime/Check.h"
#include "hotkernel/runtime/Hash.h"
#include "hotkernel/runtime/Logging.h"

namespace hotkernel::cache {
namespace {

constexpr const char* kKeyPrefix = "hotkernel:v1:";

// Note [Leases: one tuner per variant]: compare-and-renew and compare-and-delete.
constexpr const char* kRenewScript =
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) end return 0";
constexpr const char* kReleaseScript =
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0";

std::string field(const std::string& op, const std::string& variant) { return op + "|" + variant; }

int64_t integerOf(const redisReply& r) {
  HOTKERNEL_REQUIRE(r.type == REDIS_REPLY_INTEGER, "unexpected Redis reply type ", r.type,
                    " where an integer was expected");
  return static_cast<int64_t>(r.integer);
}

}  // namespace

const char* toString(RemoteStatus status) {
  switch (status) {
    case RemoteStatus::Found: return "found";
    case RemoteStatus::Absent: return "absent";
    case RemoteStatus::Refused: return "refused";
    case RemoteStatus::Unavailable: return "unavailable";
  }
  return "unavailable";
}

std::string randomLeaseToken() {
  unsigned char bytes[16];
  HOTKERNEL_REQUIRE(RAND_bytes(bytes, sizeof bytes) == 1, "no random bytes for a lease token");
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned char b : bytes) {
    out += kHex[b >> 4];
    out += kHex[b & 15];
  }
  return out;
}

std::string RemoteTier::redisKey(const std::string& kind, const std::string& fingerprint, const std::string& op,
                                 const std::string& variant) {
  if (kind == "index" || kind == "generation") return kKeyPrefix + kind + ":" + fingerprint;
  return kKeyPrefix + kind + ":" + fingerprint + ":" + field(op, variant);
}

RemoteTier::RemoteTier(RemoteTierOptions options, EntryTrust trust)
    : options_(std::move(options)), trust_(std::move(trust)) {}

RemoteTier::~RemoteTier() = default;

template <typename Body>
bool RemoteTier::withConnection(const char* what, Body&& body) {
  std::lock_guard<std::mutex> guard(mu_);
  const auto now = std::chrono::steady_clock::now();
  if (!connection_ && now < retryAfter_) return false;  // Note [A Redis that is down is an absent tier]
  try {
    const bool reused = connection_ != nullptr;
    if (!connection_) connection_ = detail::RedisConnection::connect(options_.url, options_.timeout);
    try {
      body(*connection_);
    } catch (const std::exception&) {
      if (!reused || !connection_->broken()) throw;
      // A connection kept from an earlier call whose Redis restarted or closed it meanwhile fails at
      // its first write: one fresh connection, one more try (every body may run twice).
      connection_.reset();
      connection_ = detail::RedisConnection::connect(options_.url, options_.timeout);
      body(*connection_);
    }
    if (outage_) {
      HOTKERNEL_LOG(Info) << "remote cache " << options_.url.toString() << " is reachable again";
      outage_ = false;
    }
    reachable_.store(true, std::memory_order_relaxed);
    return true;
  } catch (const std::exception& e) {
    if (connection_ && !connection_->broken()) throw;  // an error reply: this call failed, Redis is there
    connection_.reset();
    lastError_ = e.what();
    reachable_.store(false, std::memory_order_relaxed);
    retryAfter_ = std::chrono::steady_clock::now() + options_.backoff;
    if (!outage_) {
      outage_ = true;
      HOTKERNEL_LOG(Warn) << "remote cache " << options_.url.toString() << " unavailable during " << what << " ("
                          << e.what() << "); serving continues on the local cache, retrying every "
                          << options_.backoff.count() << " ms";
    }
    return false;
  }
}

RemoteLookup RemoteTier::lookup(const std::string& fingerprint, const std::string& op, const std::string& variant) {
  RemoteLookup out;
  std::optional<std::string> bytes;
  try {
    const bool reached = withConnection("a lookup", [&](detail::RedisConnection& c) {
      detail::RedisReply r = c.command({"GET", redisKey("entry", fingerprint, op, variant)});
      if (r->type != REDIS_REPLY_NIL) bytes = detail::replyString(*r);
    });
    if (!reached) {
      out.status = RemoteStatus::Unavailable;
      out.detail = "the remote cache is unavailable";
      return out;
    }
  } catch (const std::exception& e) {
    out.status = RemoteStatus::Unavailable;
    out.detail = e.what();
    HOTKERNEL_LOG_ONCE(Warn, "remote-lookup-error:" + std::string(e.what())) << "remote cache lookup failed: "
                                                                            << e.what();
    return out;
  }
  if (!bytes) {
    out.status = RemoteStatus::Absent;
    return out;
  }
  try {
    Bundle bundle = decodeBundle(*bytes, trust_);
    HOTKERNEL_REQUIRE(bundle.entries.size() == 1, "it holds ", bundle.entries.size(), " entries, not one");
    Entry& e = bundle.entries.front();
    HOTKERNEL_REQUIRE(e.fingerprint == fingerprint && e.op == op && e.variant == variant,
                      "it is the entry of ", e.op, " ", e.variant, " (fingerprint ", e.fingerprint,
                      "), stored under another key");
    out.status = RemoteStatus::Found;
    out.entry = std::move(e);
  } catch (const std::exception& ex) {
    refusals_.fetch_add(1, std::memory_order_relaxed);
    out.status = RemoteStatus::Refused;
    out.detail = ex.what();
    HOTKERNEL_LOG_ONCE(Warn, "remote-refused:" + fingerprint + ":" + field(op, variant))
        << "remote cache entry for " << op << " " << variant << " refused: " << ex.what();
  }
  return out;
}

bool RemoteTier::publish(const Entry& entry) {
  std::string bytes;
  std::string recordSha;
  try {
    HOTKERNEL_REQUIRE(trust_.keyRefused.empty(), "the cache key is refused (", trust_.keyRefused, ")");
    Entry e = entry;
    e.cubinSha256 = sha256Hex(e.cubin);
    if (e.createdUnix == 0) e.createdUnix = static_cast<int64_t>(std::time(nullptr));
    recordSha = detail::recordDigest(e);
    BundleHeader header;
    header.hotkernelVersion = options_.hotkernelVersion;
    header.createdUnix = e.createdUnix;
    bytes = encodeBundle(header, {e}, trust_.key.get());
  } catch (const std::exception& ex) {
    HOTKERNEL_LOG_ONCE(Warn, "remote-publish-refused:" + entry.op + ":" + entry.variant)
        << "not publishing " << entry.op << " " << entry.variant << " to the remote cache: " << ex.what();
    return false;
  }
  try {
    return withConnection("a publish", [&](detail::RedisConnection& c) {
      std::vector<detail::RedisReply> replies = c.pipeline({
          {"MULTI"},
          {"SET", redisKey("entry", entry.fingerprint, entry.op, entry.variant), bytes},
          {"HSET", redisKey("index", entry.fingerprint), field(entry.op, entry.variant), recordSha},
          {"INCR", redisKey("generation", entry.fingerprint)},
          {"EXEC"},
      });
      const redisReply& exec = *replies.back();
      HOTKERNEL_REQUIRE(exec.type == REDIS_REPLY_ARRAY && exec.elements == 3, "the publish transaction was not run");
      for (size_t i = 0; i < exec.elements; ++i) {
        HOTKERNEL_REQUIRE(exec.element[i]->type != REDIS_REPLY_ERROR, "the publish transaction failed: ",
                          std::string(exec.element[i]->str, exec.element[i]->len));
      }
    });
  } catch (const std::exception& ex) {
    HOTKERNEL_LOG_ONCE(Warn, "remote-publish-error:" + std::string(ex.what()))
        << "publishing to the remote cache failed: " << ex.what();
    return false;
  }
}

LeaseAttempt RemoteTier::acquireLease(const std::string& fingerprint, const std::string& op,
                                      const std::string& variant, std::chrono::milliseconds ttl) {
  LeaseAttempt out;
  RemoteLease lease{fingerprint, op, variant, randomLeaseToken()};
  const std::string key = redisKey("lease", fingerprint, op, variant);
  try {
    const bool reached = withConnection("taking a lease", [&](detail::RedisConnection& c) {
      detail::RedisReply r = c.command({"SET", key, lease.token, "NX", "PX", std::to_string(ttl.count())});
      if (r->type != REDIS_REPLY_NIL) {
        out.kind = LeaseAttempt::Kind::Acquired;
        out.lease = lease;
        return;
      }
      out.kind = LeaseAttempt::Kind::Held;
      detail::RedisReply left = c.command({"PTTL", key});
      out.remainingMs = std::max<int64_t>(0, integerOf(*left));  // -2: expired since the SET
    });
    if (!reached) out.kind = LeaseAttempt::Kind::Unavailable;
  } catch (const std::exception& ex) {
    HOTKERNEL_LOG_ONCE(Warn, "remote-lease-error:" + std::string(ex.what())) << "taking a remote lease failed: "
                                                                             << ex.what();
    out.kind = LeaseAttempt::Kind::Unavailable;
  }
  return out;
}

bool RemoteTier::renewLease(const RemoteLease& lease, std::chrono::milliseconds ttl) {
  bool ours = false;
  try {
    withConnection("renewing a lease", [&](detail::RedisConnection& c) {
      detail::RedisReply r = c.command({"EVAL", kRenewScript, "1",
                                        redisKey("lease", lease.fingerprint, lease.op, lease.variant), lease.token,
                                        std::to_string(ttl.count())});
      ours = integerOf(*r) == 1;
    });
  } catch (const std::exception& ex) {
    HOTKERNEL_LOG_ONCE(Warn, "remote-renew-error:" + std::string(ex.what())) << "renewing a remote lease failed: "
                                                                             << ex.what();
  }
  return ours;
}

void RemoteTier::releaseLease(const RemoteLease& lease) {
  try {
    withConnection("releasing a lease", [&](detail::RedisConnection& c) {
      c.command({"EVAL", kReleaseScript, "1", redisKey("lease", lease.fingerprint, lease.op, lease.variant),
                 lease.token});
    });
  } catch (const std::exception& ex) {
    HOTKERNEL_LOG_ONCE(Warn, "remote-release-error:" + std::string(ex.what()))
        << "releasing a remote lease failed (it expires on its own): " << ex.what();
  }
}

std::optional<int64_t> RemoteTier::leaseRemainingMs(const std::string& fingerprint, const std::string& op,
                                                    const std::string& variant) {
  int64_t remaining = 0;
  try {
    const bool reached = withConnection("reading a lease", [&](detail::RedisConnection& c) {
      detail::RedisReply r = c.command({"PTTL", redisKey("lease", fingerprint, op, variant)});
      remaining = std::max<int64_t>(0, integerOf(*r));  // -2: no lease; -1 (no TTL) is never written
    });
    if (!reached) return std::nullopt;
  } catch (const std::exception& ex) {
    HOTKERNEL_LOG_ONCE(Warn, "remote-pttl-error:" + std::string(ex.what())) << "reading a remote lease failed: "
                                                                            << ex.what();
    return std::nullopt;
  }
  return remaining;
}

std::optional<int64_t> RemoteTier::generation(const std::string& fingerprint) {
  int64_t value = 0;
  try {
    const bool reached = withConnection("a poll", [&](detail::RedisConnection& c) {
      detail::RedisReply r = c.command({"GET", redisKey("generation", fingerprint)});
      if (r->type == REDIS_REPLY_NIL) return;
      const std::string text = detail::replyString(*r);
      HOTKERNEL_REQUIRE(!text.empty() && text.find_first_not_of("0123456789") == std::string::npos,
                        "the generation counter holds '", text, "'");
      value = std::stoll(text);
    });
    if (!reached) return std::nullopt;
  } catch (const std::exception& ex) {
    HOTKERNEL_LOG_ONCE(Warn, "remote-generation-error:" + std::string(ex.what()))
        << "polling the remote cache failed: " << ex.what();
    return std::nullopt;
  }
  return value;
}

std::optional<std::vector<RemoteIndexItem>> RemoteTier::index(const std::string& fingerprint) {
  std::vector<RemoteIndexItem> items;
  try {
    const bool reached = withConnection("reading the index", [&](detail::RedisConnection& c) {
      detail::RedisReply r = c.command({"HGETALL", redisKey("index", fingerprint)});
      HOTKERNEL_REQUIRE(r->type == REDIS_REPLY_ARRAY && r->elements % 2 == 0, "the index is not a hash");
      for (size_t i = 0; i + 1 < r->elements; i += 2) {
        const std::string f = detail::replyString(*r->element[i]);
        const size_t bar = f.find('|');
        if (bar == std::string::npos) continue;  // not a field this version writes
        items.push_back({f.substr(0, bar), f.substr(bar + 1), detail::replyString(*r->element[i + 1])});
      }
    });
    if (!reached) return std::nullopt;
  } catch (const std::exception& ex) {
    HOTKERNEL_LOG_ONCE(Warn, "remote-index-error:" + std::string(ex.what()))
        << "reading the remote cache's index failed: " << ex.what();
    return std::nullopt;
  }
  return items;
}

std::string RemoteTier::lastError() const {
  std::lock_guard<std::mutex> guard(mu_);
  return lastError_;
}

std::string RemoteTier::probe() {
  std::string why;
  try {
    const bool reached = withConnection("a probe", [&](detail::RedisConnection& c) { c.command({"PING"}); });
    if (!reached) why = lastError();
  } catch (const std::exception& ex) {
    why = ex.what();
  }
  if (why.empty() && !reachable()) why = "unreachable";
  return why;
}

}  // namespace hotkernel::cache
