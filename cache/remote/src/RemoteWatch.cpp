#include "hotkernel/cache/RemoteWatch.h"

namespace hotkernel::cache {

std::optional<std::vector<RemoteIndexItem>> RemoteWatch::changes(RemoteTier& tier, const std::string& fingerprint) {
  const std::optional<int64_t> generation = tier.generation(fingerprint);
  if (!generation) return std::nullopt;
  Seen& seen = seen_[fingerprint];
  if (*generation == seen.generation) return std::vector<RemoteIndexItem>{};
  // Note [Learning of new remote entries: polling]: a counter that went back is a Redis emptied or replaced.
  if (*generation < seen.generation) seen.digests.clear();
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
  return out;
}

}  // namespace hotkernel::cache
