// One serving process's use of the caches, torch-free, for
// CacheTiersUnprivilegedTest.cpp, which runs it under an unprivileged uid:
// what Engine::loadDevice does with them (CacheStore::open(config().cacheDir),
// openReadOnlyTiers(config().cachePath), entriesOverTiers for the
// fingerprint), then the put that follows a tuning, into the own cache, and
// the same listing again. The configuration comes from the environment, as in
// a serving process (HOTKERNEL_CACHE_DIR, HOTKERNEL_CACHE_PATH,
// HOTKERNEL_CACHE_KEY_FILE); log lines go to stderr.
//
//   hotkernel_cache_tier_probe PUT_VARIANT
//
// Note [Tier probe output, version 1]
// stdout, one record a line, fields separated by one space:
//   v1 uid <effective uid>
//   v1 own ok | v1 own refused            (the own cache's open)
//   v1 tiers <number of read-only tiers opened>
//   v1 entry before|after <variant> <decision> <params>   (entriesOverTiers, before and after the put)
//   v1 put ok | v1 put failed
// Variants and params hold no space (those of CacheTestEntries.h). Exit 0
// after the last line, 2 for bad usage.

#include <unistd.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "CacheTestEntries.h"
#include "hotkernel/cache/CacheStore.h"
#include "hotkernel/cache/CacheTiers.h"
#include "hotkernel/runtime/Config.h"

namespace hotkernel::cache::test {
namespace {

void printEntries(const char* when, const CacheStore* own, const std::vector<std::unique_ptr<CacheStore>>& tiers) {
  for (const Entry& e : entriesOverTiers(own, tiers, testFingerprint().key())) {
    std::printf("v1 entry %s %s %s %s\n", when, e.variant.c_str(), e.decision.c_str(), e.params.c_str());
  }
}

int probe(const std::string& putVariant) {
  std::printf("v1 uid %u\n", static_cast<unsigned>(::geteuid()));
  std::unique_ptr<CacheStore> own;
  try {
    own = CacheStore::open(config().cacheDir);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "own cache refused: %s\n", e.what());
  }
  std::printf("v1 own %s\n", own ? "ok" : "refused");
  const std::vector<std::unique_ptr<CacheStore>> tiers = openReadOnlyTiers(config().cachePath);
  std::printf("v1 tiers %zu\n", tiers.size());
  printEntries("before", own.get(), tiers);
  bool stored = false;
  if (own) {
    try {
      own->put(kernelEntry("aten::_softmax", putVariant));
      stored = true;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "put failed: %s\n", e.what());
    }
  }
  std::printf("v1 put %s\n", stored ? "ok" : "failed");
  printEntries("after", own.get(), tiers);
  return 0;
}

}  // namespace
}  // namespace hotkernel::cache::test

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s PUT_VARIANT\n", argv[0]);
    return 2;
  }
  return hotkernel::cache::test::probe(argv[1]);
}
