#pragma once
// Note [Learning of new remote entries: polling]
// A running process learns of entries other hosts publish by polling, not by
// pub/sub: a message published while a subscriber is disconnected (a restart
// of Redis, a partition) is lost, so a subscriber would need a poll to catch
// up anyway, and it would hold a second connection blocked in a read. A poll
// is one GET of the fingerprint's generation counter (Note [Remote tier
// layout, v1]); only when it changed is the index read (one HGETALL, a field
// per published variant) and compared with what was seen. So an entry
// published at time t is known to every reachable poller by t + the poll
// interval, and a poller that was cut off catches up at its first poll after
// it, whatever it missed; a Redis flushed or restarted empty (the counter
// going back) is read again in full.
//
// Note [A tier that came back empty is filled again]
// Redis may lose what it held (a restart without persistence, a flush, a
// failover to an empty replica). The entries are not lost: every process that
// used them keeps a copy in its own cache. So a poller that sees the counter
// go back (resetSeen) publishes again each entry of its own cache for that
// fingerprint that the new index lacks (inIndex). Several processes may do
// so for one entry: the copies are equal entries, and each publish is one
// transaction, so the last one stands.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "hotkernel/cache/RemoteTier.h"

namespace hotkernel::cache {

class RemoteWatch {
 public:
  // The index items of `fingerprint` that are new or whose record digest
  // changed since the last call for it (all of them at the first call);
  // empty when the generation did not change; nullopt when Redis is
  // unavailable (nothing is marked seen). Not thread-safe: one poller.
  std::optional<std::vector<RemoteIndexItem>> changes(RemoteTier& tier, const std::string& fingerprint);
  // Whether the last changes() for `fingerprint` found its counter gone back
  // (a Redis emptied or replaced; its index was then read in full).
  bool resetSeen(const std::string& fingerprint) const;
  // Whether the index, as last read for `fingerprint`, holds (op, variant).
  bool inIndex(const std::string& fingerprint, const std::string& op, const std::string& variant) const;

 private:
  struct Seen {
    int64_t generation = -1;
    std::map<std::string, std::string> digests;  // "op|variant" -> record_sha256
    bool reset = false;                          // the last call saw the counter go back
  };
  std::map<std::string, Seen> seen_;  // by fingerprint
};

}  // namespace hotkernel::cache
