// Note [Cache tiers]: the own cache first, then HOTKERNEL_CACHE_PATH's, the
// first entry of each (op, variant) only.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <map>
#include <string>
#include <vector>

#include "CacheTestUtil.h"
#include "hotkernel/cache/CacheTiers.h"

namespace hotkernel::cache {
namespace {

using test::keepAtenEntry;
using test::kernelEntry;
using test::TempDir;
using test::testFingerprint;

const char* kSoftmax = "aten::_softmax";

TEST(CacheTiersTest, GivenTheSameVariantInSeveralTiersWhenListedThenTheFirstTierWinsEvenWithKeepAten) {
  TempDir tmp;
  const std::string own = tmp.sub("own"), baked1 = tmp.sub("baked1"), baked2 = tmp.sub("baked2");
  auto ownStore = CacheStore::open(own, EntryTrust::none());
  ownStore->put(keepAtenEntry(kSoftmax, "dtype=bf16;rows=8;cols=64"));
  {
    auto s = CacheStore::open(baked1, EntryTrust::none());
    s->put(kernelEntry(kSoftmax, "dtype=bf16;rows=8;cols=64"));   // hidden by own's keep_aten
    s->put(kernelEntry(kSoftmax, "dtype=bf16;rows=16;cols=64"));  // only here and in baked2
  }
  {
    Entry later = kernelEntry(kSoftmax, "dtype=bf16;rows=16;cols=64");
    later.params = R"({"block":128,"vec":4})";
    auto s = CacheStore::open(baked2, EntryTrust::none());
    s->put(later);
    s->put(kernelEntry(kSoftmax, "dtype=bf16;rows=32;cols=64"));
    s->put(kernelEntry(kSoftmax, "dtype=bf16;rows=8;cols=64", test::testFingerprint("other GPU")));
  }
  const auto tiers = openReadOnlyTiers({baked1, baked2});
  ASSERT_EQ(tiers.size(), 2u);
  const std::vector<Entry> got = entriesOverTiers(ownStore.get(), tiers, testFingerprint().key());
  ASSERT_EQ(got.size(), 3u);
  std::map<std::string, Entry> byVariant;
  for (const Entry& e : got) byVariant[e.variant] = e;
  EXPECT_EQ(byVariant["dtype=bf16;rows=8;cols=64"].decision, kDecisionKeepAten);
  EXPECT_EQ(byVariant["dtype=bf16;rows=16;cols=64"].params, R"({"block":256,"vec":8})");  // baked1's
  EXPECT_EQ(byVariant["dtype=bf16;rows=32;cols=64"].decision, kDecisionKernel);
}

TEST(CacheTiersTest, GivenNoOwnCacheAndARefusedTierWhenListedThenTheOtherTiersStillLoad) {
  TempDir tmp;
  const std::string bad = tmp.sub("bad"), good = tmp.sub("good"), missing = tmp.sub("missing");
  { CacheStore::open(bad, EntryTrust::none())->put(kernelEntry(kSoftmax, "dtype=bf16;rows=8;cols=64")); }
  { CacheStore::open(good, EntryTrust::none())->put(kernelEntry(kSoftmax, "dtype=bf16;rows=16;cols=64")); }
  ASSERT_EQ(::chmod(bad.c_str(), 0777), 0);  // writable by others: refused
  const auto tiers = openReadOnlyTiers({bad, missing, good});
  ASSERT_EQ(tiers.size(), 1u);
  const std::vector<Entry> got = entriesOverTiers(nullptr, tiers, testFingerprint().key());
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].variant, "dtype=bf16;rows=16;cols=64");
}

}  // namespace
}  // namespace hotkernel::cache
