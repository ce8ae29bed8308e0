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

 private:
  struct Seen {
    int64_t generation = -1;
    std::map<std::string, std::string> digests;  // "op|variant" -> record_sha256
  };
  std::map<std::string, Seen> seen_;  // by fingerprint
};

}  // namespace hotkernel::cache
