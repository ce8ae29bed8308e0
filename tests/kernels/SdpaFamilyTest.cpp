// The attention family (kernels/SdpaFamily.h): which calls it serves, the
// layout classes, keys and their variant strings, the choice's params, the
// descriptor's plans, and that no other family takes an attention key.

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "hotkernel/kernels/FamilyDescriptor.h"
#include "hotkernel/kernels/SdpaFamily.h"
#include "hotkernel/kernels/VariantOptions.h"
#include "hotkernel/runtime/AttentionBackend.h"
#include "hotkernel/runtime/Check.h"
#include "hotkernel/runtime/PlanTable.h"

namespace hotkernel::kernels {
namespace {

// A call of query [b, h, l, e], key / value [b, hkv, s, e / ev] in the given layouts.
SdpaCall callOf(int64_t b, int64_t h, int64_t hkv, int64_t l, int64_t s, int64_t e, int64_t ev, int32_t ql = 1,
                int32_t kl = 1, int32_t vl = 1) {
  SdpaCall c;
  c.dtypeServed = true;
  c.dtype = DType::BFloat16;
  c.sameDtypes = c.sameDevice = c.dense = true;
  c.querySizes = {b, h, l, e};
  c.queryStrides = sdpaLayoutStrides(ql, b, h, l, e);
  c.keySizes = {b, hkv, s, e};
  c.keyStrides = sdpaLayoutStrides(kl, b, hkv, s, e);
  c.valueSizes = {b, hkv, s, ev};
  c.valueStrides = sdpaLayoutStrides(vl, b, hkv, s, ev);
  c.enableGqa = hkv != h;
  return c;
}

TEST(SdpaFamilyTest, GivenHfLlamaPrefillWithGroupedHeadsWhenGuardedThenItsVariantHasEveryExtent) {
  SdpaCall c = callOf(1, 32, 8, 4096, 4096, 128, 128);
  c.isCausal = true;
  SdpaVariant v;
  ASSERT_TRUE(SdpaFamily::guardCall(c, &v));
  EXPECT_EQ(v.batch, 1);
  EXPECT_EQ(v.heads, 32);
  EXPECT_EQ(v.kvHeads, 8);
  EXPECT_EQ(v.queries, 4096);
  EXPECT_EQ(v.keys, 4096);
  EXPECT_EQ(v.headDim, 128);
  EXPECT_EQ(v.valueDim, 128);
  EXPECT_EQ(v.layouts[0], 1);
  EXPECT_EQ(v.layouts[1], 1);
  EXPECT_EQ(v.layouts[2], 1);
  EXPECT_TRUE(v.causal);
  EXPECT_TRUE(v.gqa());
}

TEST(SdpaFamilyTest, GivenCallsTheCompositeConvertsWhenGuardedThenRefused) {
  const SdpaCall ok = callOf(2, 12, 12, 512, 512, 64, 64, 2, 2, 2);
  ASSERT_TRUE(SdpaFamily::guardCall(ok, nullptr));
  auto refused = [&](const char* what, auto change) {
    SdpaCall c = ok;
    change(c);
    EXPECT_FALSE(SdpaFamily::guardCall(c, nullptr)) << what;
  };
  refused("a mask", [](SdpaCall& c) { c.hasMask = true; });
  refused("dropout", [](SdpaCall& c) { c.dropoutP = 0.1; });
  refused("another dtype", [](SdpaCall& c) { c.dtypeServed = false; });
  refused("mixed dtypes", [](SdpaCall& c) { c.sameDtypes = false; });
  refused("mixed devices", [](SdpaCall& c) { c.sameDevice = false; });
  refused("a nested tensor", [](SdpaCall& c) { c.dense = false; });
  refused("3-d query", [](SdpaCall& c) {
    c.querySizes.pop_back();
    c.queryStrides.pop_back();
  });
  refused("key batch differs", [](SdpaCall& c) { c.keySizes[0] = 3; });
  refused("value keys differ", [](SdpaCall& c) { c.valueSizes[2] = 511; });
  refused("key head dim differs", [](SdpaCall& c) { c.keySizes[3] = 32; });
  refused("heads not a multiple", [](SdpaCall& c) {
    c.keySizes[1] = c.valueSizes[1] = 5;
    c.keyStrides = sdpaLayoutStrides(2, 2, 5, 512, 64);
    c.valueStrides = sdpaLayoutStrides(2, 2, 5, 512, 64);
    c.enableGqa = true;
  });
  refused("grouped heads without enable_gqa", [](SdpaCall& c) {
    c.keySizes[1] = c.valueSizes[1] = 4;
    c.keyStrides = sdpaLayoutStrides(2, 2, 4, 512, 64);
    c.valueStrides = sdpaLayoutStrides(2, 2, 4, 512, 64);
    c.enableGqa = false;
  });
  refused("a query of other strides", [](SdpaCall& c) { c.queryStrides[2] = 4 * 12 * 64; });
  refused("a key with a strided last dim", [](SdpaCall& c) { c.keyStrides[3] = 2; });
  refused("one key (no inner extent)", [](SdpaCall& c) {
    c.keySizes[2] = c.valueSizes[2] = 1;
  });
  refused("a head dim over the bound", [](SdpaCall& c) {
    c.querySizes[3] = c.keySizes[3] = SdpaFamily::kMaxHeadDim + 1;
    c.queryStrides = sdpaLayoutStrides(2, 2, 12, 512, SdpaFamily::kMaxHeadDim + 1);
    c.keyStrides = sdpaLayoutStrides(2, 2, 12, 512, SdpaFamily::kMaxHeadDim + 1);
  });
}

TEST(SdpaFamilyTest, GivenEachLayoutClassWhenItsStridesAreClassifiedThenTheClassComesBack) {
  for (int32_t layout = 0; layout < 3; ++layout) {
    EXPECT_EQ(sdpaLayoutOf({2, 12, 512, 64}, sdpaLayoutStrides(layout, 2, 12, 512, 64)), layout);
  }
  // A decode query (one row): the strides of its size-1 dimension do not matter; the first class that fits.
  EXPECT_EQ(sdpaLayoutOf({4, 32, 1, 128}, {32 * 128, 128, 999, 1}), 0);
  EXPECT_EQ(sdpaLayoutOf({2, 12, 512, 64}, {12 * 512 * 64, 64, 2 * 12 * 64, 1}), -1);  // a row stride of 2HE
  EXPECT_EQ(sdpaLayoutOf({2, 12, 512}, {12 * 512, 512, 1}), -1);
  EXPECT_THROW(sdpaLayoutStrides(3, 1, 1, 1, 1), Error);
}

TEST(SdpaFamilyTest, GivenAVariantWhenKeyedAndSpelledThenTheStringParsesBackToTheSameKey) {
  SdpaCall c = callOf(1, 32, 8, 4096, 4096, 128, 96, 1, 1, 0);
  c.isCausal = true;
  SdpaVariant v;
  ASSERT_TRUE(SdpaFamily::guardCall(c, &v));
  const VariantKey key = sdpaKeyOf(v, 0);
  EXPECT_EQ(variantString(key),
            "dtype=bfloat16;rows=1;cols=4096;inner=4096;more=32,8,128,96;layouts=110;causal=1;gqa=1");
  const std::optional<VariantKey> parsed = parseVariantString(variantString(key), 0);
  ASSERT_TRUE(parsed.has_value());
  EXPECT_EQ(*parsed, key);
  EXPECT_EQ(VariantKeyHash{}(*parsed), VariantKeyHash{}(key));
  EXPECT_EQ(sdpaVariantOf(*parsed), v);
  EXPECT_TRUE(sdpaDescriptor().servesKey(key));
  // Keys differing only in one of the further extents differ.
  VariantKey other = key;
  other.more[3] = 128;
  EXPECT_FALSE(other == key);
}

TEST(SdpaFamilyTest, GivenMalformedFurtherExtentsOrLayoutsWhenParsedThenRefused) {
  const std::string base = "dtype=float16;rows=1;cols=8;inner=8;";
  for (const char* bad : {"more=1,2,3", "more=1,2,3,4,5", "more=1,2,3,0", "more=1,2,3,x", "more=1,2,3,4,",
                          "layouts=01", "layouts=014", "layouts=0a1", "causal=2", "gqa=yes"}) {
    EXPECT_FALSE(parseVariantString(base + bad, 0).has_value()) << bad;
  }
}

TEST(SdpaFamilyTest, GivenAKeyWhoseGqaBitDisagreesWithItsHeadsWhenAskedThenNotServed) {
  SdpaVariant v = sdpaVariantOf(sdpaKeyOf({DType::Float16, 2, 12, 12, 64, 64, 64, 64, {0, 0, 0}, false}, 0));
  VariantKey key = sdpaKeyOf(v, 0);
  ASSERT_TRUE(sdpaDescriptor().servesKey(key));
  key.options |= variant_options::kGqa;
  EXPECT_FALSE(sdpaDescriptor().servesKey(key));
  key = sdpaKeyOf(v, 0);
  key.options |= variant_options::kWeight;
  EXPECT_FALSE(sdpaDescriptor().servesKey(key));
}

TEST(SdpaFamilyTest, GivenAnAttentionKeyWhenOtherFamiliesAreAskedThenNoneServesIt) {
  const VariantKey key = sdpaKeyOf({DType::Float16, 2, 12, 12, 64, 64, 64, 64, {0, 0, 0}, false}, 0);
  for (const FamilyDescriptor* f : allFamilies()) {
    EXPECT_EQ(f->servesKey(key), f == &sdpaDescriptor()) << f->name;
  }
  // Nor would they with only the further extents set on a key of theirs.
  VariantKey plain{static_cast<int32_t>(DType::Float16), 0, 64, 4096};
  plain.more[0] = 1;
  for (const FamilyDescriptor* f : allFamilies()) EXPECT_FALSE(f->servesKey(plain)) << f->name;
}

TEST(SdpaFamilyTest, GivenAChoiceWhenWrittenAndReadThenOnlyTheExactFormatIsAccepted) {
  for (AttentionBackend b : kAllAttentionBackends) {
    const SdpaParams p{b};
    EXPECT_EQ(SdpaParams::fromJson(p.toJson()).backend, b);
  }
  EXPECT_EQ(SdpaParams{AttentionBackend::Cudnn}.toJson().dump(),
            R"({"backend":"cudnn","format":"hotkernel-attention-choice","version":1})");
  const nlohmann::json good = SdpaParams{AttentionBackend::Flash}.toJson();
  auto refused = [&](const char* what, auto change) {
    nlohmann::json j = good;
    change(j);
    EXPECT_THROW(SdpaParams::fromJson(j), Error) << what;
  };
  refused("unknown backend", [](nlohmann::json& j) { j["backend"] = "triton"; });
  refused("backend not a string", [](nlohmann::json& j) { j["backend"] = 0; });
  refused("no backend", [](nlohmann::json& j) { j.erase("backend"); });
  refused("another format", [](nlohmann::json& j) { j["format"] = "hotkernel-softmax"; });
  refused("another version", [](nlohmann::json& j) { j["version"] = 2; });
  refused("a version as text", [](nlohmann::json& j) { j["version"] = "1"; });
  refused("not an object", [](nlohmann::json& j) { j = nlohmann::json::array(); });
}

TEST(SdpaFamilyTest, GivenAChoiceWhenMadeIntoAPlanThenThePlanNamesTheBackendAndLaunchesNothing) {
  const VariantKey key = sdpaKeyOf({DType::BFloat16, 1, 32, 8, 4096, 4096, 128, 128, {1, 1, 1}, true}, 0);
  const Plan plan = sdpaDescriptor().makePlan(key, SdpaParams{AttentionBackend::Cudnn}.toJson(), "", 0);
  const auto* choice = dynamic_cast<const SdpaChoice*>(plan.launcher.get());
  ASSERT_NE(choice, nullptr);
  EXPECT_EQ(choice->backend(), AttentionBackend::Cudnn);
  EXPECT_FALSE(choice->launch(RowKernelArgs{nullptr, nullptr, 1, 1}, nullptr));
  EXPECT_FALSE(choice->launchArgs(KernelArgs(), nullptr));
  EXPECT_NE(plan.description.find("sdpa_backend[cudnn]"), std::string::npos) << plan.description;
  // A cubin, a CPU backend on a CUDA key (or the other way), a key it does not serve: refused.
  EXPECT_THROW(sdpaDescriptor().makePlan(key, SdpaParams{AttentionBackend::Cudnn}.toJson(), "\x7f" "ELF", 0), Error);
  EXPECT_THROW(sdpaDescriptor().makePlan(key, SdpaParams{AttentionBackend::FlashCpu}.toJson(), "", 0), Error);
  VariantKey cpu = key;
  cpu.device = -1;
  EXPECT_THROW(sdpaDescriptor().makePlan(cpu, SdpaParams{AttentionBackend::Flash}.toJson(), "", -1), Error);
  EXPECT_NO_THROW(sdpaDescriptor().makePlan(cpu, SdpaParams{AttentionBackend::Math}.toJson(), "", -1));
  VariantKey bad = key;
  bad.more[1] = 5;  // 32 heads are no multiple of 5
  EXPECT_THROW(sdpaDescriptor().makePlan(bad, SdpaParams{AttentionBackend::Cudnn}.toJson(), "", 0), Error);
}

TEST(SdpaFamilyTest, GivenEachDeviceWhenCandidatesAreListedThenOnlyItsBackendsAre) {
  EXPECT_EQ(SdpaFamily::candidates(true),
            (std::vector<AttentionBackend>{AttentionBackend::Flash, AttentionBackend::Efficient,
                                           AttentionBackend::Cudnn, AttentionBackend::Math}));
  EXPECT_EQ(SdpaFamily::candidates(false),
            (std::vector<AttentionBackend>{AttentionBackend::Math, AttentionBackend::FlashCpu}));
  for (AttentionBackend b : kAllAttentionBackends) {
    EXPECT_EQ(parseAttentionBackend(attentionBackendName(b)), b);
  }
  EXPECT_FALSE(parseAttentionBackend("Flash").has_value());
}

TEST(SdpaFamilyTest, GivenAVariantWhenItsBytesAreCountedThenQKVAndTheOutputCountOnce) {
  const SdpaVariant v{DType::Float16, 2, 8, 2, 16, 32, 64, 32, {0, 0, 0}, false};
  // q 2*8*16*64, k 2*2*32*64, v 2*2*32*32, out 2*8*16*32, two bytes each.
  EXPECT_DOUBLE_EQ(SdpaFamily::bytesMoved(v), 2.0 * (16384 + 8192 + 4096 + 8192));
}

}  // namespace
}  // namespace hotkernel::kernels
