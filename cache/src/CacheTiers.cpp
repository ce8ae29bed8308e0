#include "hotkernel/cache/CacheTiers.h"

#include <set>
#include <utility>

#include "hotkernel/runtime/Logging.h"

namespace hotkernel::cache {

std::vector<std::unique_ptr<CacheStore>> openReadOnlyTiers(const std::vector<std::string>& dirs) {
  std::vector<std::unique_ptr<CacheStore>> tiers;
  for (const std::string& dir : dirs) {
    try {
      std::unique_ptr<CacheStore> store = CacheStore::openReadOnly(dir);
      if (!store) {
        HOTKERNEL_LOG_ONCE(Info, "cache-tier-empty:" + dir) << "read-only cache " << dir << " holds no cache; skipped";
        continue;
      }
      tiers.push_back(std::move(store));
    } catch (const std::exception& e) {
      HOTKERNEL_LOG_ONCE(Warn, "cache-tier-refused:" + dir)
          << "read-only cache " << dir << " refused (" << e.what() << "); skipped";
    }
  }
  return tiers;
}

std::vector<Entry> entriesOverTiers(const CacheStore* own, const std::vector<std::unique_ptr<CacheStore>>& tiers,
                                    const std::string& fingerprint) {
  std::vector<Entry> out;
  std::set<std::pair<std::string, std::string>> seen;  // (op, variant)
  const auto take = [&](const CacheStore& store) {
    try {
      for (Entry& e : store.listForFingerprint(fingerprint)) {
        if (seen.emplace(e.op, e.variant).second) out.push_back(std::move(e));
      }
    } catch (const std::exception& e) {
      HOTKERNEL_LOG_ONCE(Warn, "cache-tier-read:" + store.directory())
          << "cache " << store.directory() << " could not be read (" << e.what() << "); skipped";
    }
  };
  if (own != nullptr) take(*own);
  for (const std::unique_ptr<CacheStore>& tier : tiers) take(*tier);
  return out;
}

}  // namespace hotkernel::cache
