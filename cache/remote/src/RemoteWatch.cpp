#include "hotkernel/cache/RemoteWatch.h"

namespace hotkernel::cache {

std::optional<std::vector<RemoteIndexItem>> RemoteWatch::changes(RemoteTier& tier, const std::string& fingerprint) {
  const std::optional<int64_t> generation = tier.generation(fingerprint);
  if (!generation) return std::nullopt;
  Seen& seen = seen_[fingerprint];
  seen.reset = false;
  if (*generation == seen.generation) return std::vector<RemoteIndexItem>{};
  // Note [Learning of new remote entries: polling]: a counter that went back is a Redis emptied or replaced.
  const bool reset = *generation < seen.generation;
  if (reset) seen.digests.clear();
  std::optional<std::vector<RemoteIndexItem>> items = tier.index(fingerprint);
  if (!items) return std::nullopt;
  std::vector<RemoteIndexItem> out;
  for (RemoteIndexItem& item : *items) {
    std::string& digest = seen.digests[item.op + "|" + item.variant];
    if (digest == item.recordSha256) continue;
    digest = item.recordSha256;
    out.push_back(std::move(item));
  }
  seen.generation = *generation;
  seen.reset = reset;
  return out;
}

bool RemoteWatch::resetSeen(const std::string& fingerprint) const {
  auto it = seen_.find(fingerprint);
  return it != seen_.end() && it->second.reset;
}

bool RemoteWatch::inIndex(const std::string& fingerprint, const std::string& op, const std::string& variant) const {
  auto it = seen_.find(fingerprint);
  return it != seen_.end() && it->second.digests.count(op + "|" + variant) > 0;
}

}  // namespace hotkernel::cache
