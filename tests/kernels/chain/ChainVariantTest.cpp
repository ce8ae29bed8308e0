// Tests of a chain variant's cache identity (ChainVariant.h) and of the
// params its cache entry stores (ChainEntry.h): the variant string, the
// entry's JSON written and read back, and every refusal of the reader.

#include "hotkernel/chain/ChainVariant.h"

#include <gtest/gtest.h>

#include <string>

#include "hotkernel/chain/ChainEntry.h"
#include "hotkernel/chain/ChainJson.h"
#include "hotkernel/chain/ChainKey.h"
#include "hotkernel/chain/NamedChains.h"
#include "hotkernel/runtime/Check.h"
#include "hotkernel/runtime/Hash.h"

namespace hotkernel::chain {
namespace {

ChainVariant rmsVariant() { return ChainVariant{rmsNormChain(DType::BFloat16, 1e-6), 4096, 4096, 0}; }

void expectRefused(const std::string& text, const ChainVariant& v, const std::string& needle) {
  try {
    readChainEntry(text, v);
    ADD_FAILURE() << "accepted: " << text << "; expected an error holding '" << needle << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(ChainVariantTest, GivenAVariantWhenItsStringIsMadeThenItNamesTheChainKeyExtentsAndDevice) {
  ChainVariant v = rmsVariant();
  const std::string s = chainVariantString(v);
  EXPECT_EQ(s, "chain=" + chainKey(v.ir).sha256 + ";rows=4096;cols=4096;dev=0");
  EXPECT_EQ(std::string(kChainOp), "hotkernel::chain");
  // Every part of the variant moves the string.
  ChainVariant other = v;
  other.rows = 4095;
  EXPECT_NE(chainVariantString(other), s);
  other = v;
  other.cols = 2048;
  EXPECT_NE(chainVariantString(other), s);
  other = v;
  other.device = 1;
  EXPECT_NE(chainVariantString(other), s);
  other = v;
  other.ir = rmsNormChain(DType::BFloat16, 1e-5);  // another eps: another chain
  EXPECT_NE(chainVariantString(other), s);
  other.ir = rmsNormChain(DType::Float16, 1e-6);
  EXPECT_NE(chainVariantString(other), s);
  other = v;
  other.rows = 0;
  EXPECT_THROW(chainVariantString(other), Error);
}

TEST(ChainVariantTest, GivenAKernelEntryWhenWrittenAndReadForItsVariantThenItsParametersComeBack) {
  const ChainVariant v = rmsVariant();
  const ChainKernelParams p{256, 8, 1, 2};
  const nlohmann::json j = chainEntryParams(v, p);
  EXPECT_EQ(j.at("format"), kChainEntryFormat);
  EXPECT_EQ(j.at("version"), 2);
  EXPECT_EQ(j.at("chain"), chainToJson(v.ir));
  EXPECT_EQ(j.at("chainSha256"), chainKey(v.ir).sha256);
  EXPECT_EQ(j.at("rows"), 4096);
  EXPECT_EQ(j.at("kernel").at("items"), 2);
  EXPECT_EQ(j.at("sourceSha256"), sha256Hex(generateChainSource(v.ir, p)));
  const std::optional<ChainKernelParams> back = readChainEntry(j.dump(), v);
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(*back, p);
}

TEST(ChainVariantTest, GivenAKernelRoundingAsAtenWhenWrittenAndReadThenTheRoundingComesBackBoundToItsSource) {
  const ChainVariant v = rmsVariant();
  ChainKernelParams p{256, 8, 1, 2};
  p.atenRounding = true;
  const nlohmann::json j = chainEntryParams(v, p);
  EXPECT_EQ(j.at("kernel").at("rounding"), "aten");
  EXPECT_EQ(j.at("sourceSha256"), sha256Hex(generateChainSource(v.ir, p)));
  const std::optional<ChainKernelParams> back = readChainEntry(j.dump(), v);
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(*back, p);
  EXPECT_FALSE(chainEntryParams(v, ChainKernelParams{256, 8, 1, 2}).at("kernel").contains("rounding"));  // fused
  // The rounding flipped without the source: the source hash no longer matches.
  nlohmann::json flipped = j;
  flipped["kernel"].erase("rounding");
  expectRefused(flipped.dump(), v, "sourceSha256 is not the source this build generates");
  flipped["kernel"]["rounding"] = "fused";
  expectRefused(flipped.dump(), v, "sourceSha256 is not the source this build generates");
  nlohmann::json bad = j;
  bad["kernel"]["rounding"] = "nearest";
  expectRefused(bad.dump(), v, "rounding is \"nearest\", not \"aten\" or \"fused\"");
}

// Note [Folded segments]: "fold" is written only when set and bound to the source like the rest.
TEST(ChainVariantTest, GivenAFoldedKernelWhenWrittenAndReadThenFoldComesBackBoundToItsSource) {
  ChainVariant v;
  v.ir = rotaryChain(DType::BFloat16, 128);
  v.rows = 32 * 4096;
  v.cols = 128;
  v.layout = rotaryLayout({1, 32, 4096, 128});
  const ChainKernelParams p{128, 8, 1, 0, false, true};
  const nlohmann::json j = chainEntryParams(v, p);
  EXPECT_EQ(j.at("kernel").at("fold"), true);
  const std::optional<ChainKernelParams> back = readChainEntry(j.dump(), v);
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(*back, p);
  EXPECT_FALSE(chainEntryParams(v, ChainKernelParams{128, 8}).at("kernel").contains("fold"));
  nlohmann::json flipped = j;
  flipped["kernel"].erase("fold");
  expectRefused(flipped.dump(), v, "sourceSha256 is not the source this build generates");
  nlohmann::json bad = j;
  bad["kernel"]["fold"] = "yes";
  expectRefused(bad.dump(), v, "fold");
}

// Note [Rows split over a cluster]: "cluster" is written only when above 1 and bound to the source like the rest;
// a value outside 2..8, or a cluster of a point that does not serve the variant, is refused.
TEST(ChainVariantTest, GivenAClusterKernelWhenWrittenAndReadThenTheClusterComesBackBoundToItsSource) {
  const GroupNormShape vae{1, 512, 128 * 128, 32};
  const ChainVariant v{groupNormActChain(DType::Float16, 1e-5, OpKind::Silu), groupNormRows(vae), groupNormCols(vae), 0,
                       groupNormActLayout(vae)};
  const ChainKernelParams p{1024, 8, 1, 0, false, false, 8};
  const nlohmann::json j = chainEntryParams(v, p);
  EXPECT_EQ(j.at("kernel").at("cluster"), 8);
  const std::optional<ChainKernelParams> back = readChainEntry(j.dump(), v);
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(*back, p);
  EXPECT_FALSE(chainEntryParams(v, ChainKernelParams{1024, 8}).at("kernel").contains("cluster"));
  nlohmann::json dropped = j;
  dropped["kernel"].erase("cluster");
  expectRefused(dropped.dump(), v, "sourceSha256 is not the source this build generates");
  nlohmann::json bad = j;
  bad["kernel"]["cluster"] = 16;
  expectRefused(bad.dump(), v, "cluster");
}

TEST(ChainVariantTest, GivenAKeepAtenEntryWhenReadThenItNamesTheChainAndHoldsNoKernel) {
  const ChainVariant v{swigluChain(DType::Float32), 64, 1024, 0};
  const nlohmann::json j = chainEntryParams(v, std::nullopt);
  EXPECT_FALSE(j.contains("kernel"));
  EXPECT_FALSE(j.contains("sourceSha256"));
  EXPECT_EQ(chainFromJson(j.at("chain")), v.ir);
  EXPECT_FALSE(readChainEntry(j.dump(), v).has_value());
}

TEST(ChainVariantTest, GivenParametersThatDoNotServeTheVariantWhenWrittenThenRefused) {
  const ChainVariant v{swigluChain(DType::BFloat16), 16, 100, 0};
  EXPECT_THROW(chainEntryParams(v, ChainKernelParams{256, 8, 1, 0}), Error);  // 100 % 8 != 0
  EXPECT_NO_THROW(chainEntryParams(v, ChainKernelParams{256, 4, 1, 0}));
}

TEST(ChainVariantTest, GivenTamperedOrForeignEntriesWhenReadThenEachIsRefusedWithItsReason) {
  const ChainVariant v = rmsVariant();
  const nlohmann::json good = chainEntryParams(v, ChainKernelParams{256, 8, 1, 0});
  auto with = [&](auto edit) {
    nlohmann::json j = good;
    edit(j);
    return j.dump();
  };
  // Another chain's JSON under this variant's key: the stored chain's own key differs.
  expectRefused(with([](nlohmann::json& j) { j["chain"] = chainToJson(swigluChain(DType::BFloat16)); }), v,
                "chainSha256 is not the key of the stored chain");
  // Another chain stored consistently (its own sha), read for this variant: not the requested chain.
  const ChainVariant swiglu{swigluChain(DType::BFloat16), 4096, 4096, 0};
  expectRefused(chainEntryParams(swiglu, ChainKernelParams{256, 8, 1, 0}).dump(), v,
                "the stored chain is not the requested one");
  // A scalar's bits edited: rms_norm with another eps.
  expectRefused(with([](nlohmann::json& j) { j["chain"] = chainToJson(rmsNormChain(DType::BFloat16, 1e-5)); }), v,
                "chainSha256 is not the key");
  expectRefused(with([](nlohmann::json& j) { j["rows"] = 4095; }), v, "stored for [4095, 4096]");
  expectRefused(with([](nlohmann::json& j) { j["cols"] = 2048; }), v, "stored for [4096, 2048]");
  expectRefused(with([](nlohmann::json& j) { j["format"] = "hotkernel-chain"; }), v, "format must be");
  expectRefused(with([](nlohmann::json& j) { j["version"] = 3; }), v, "version 3 is not 1 to 2");
  expectRefused(with([](nlohmann::json& j) { j["extra"] = 1; }), v, "unknown key \"extra\"");
  expectRefused(with([](nlohmann::json& j) { j.erase("sourceSha256"); }), v, "misses \"sourceSha256\"");
  expectRefused(with([](nlohmann::json& j) { j["kernel"]["vec"] = 3; }), v, "vec 3 is not 1, 2, 4 or 8");
  expectRefused(with([](nlohmann::json& j) { j["kernel"]["threads"] = 2048; }), v, "kernel.threads must be");
  expectRefused(with([](nlohmann::json& j) { j["kernel"]["items"] = 1; }), v, "does not serve the variant");
  expectRefused(with([](nlohmann::json& j) { j["kernel"]["bogus"] = 1; }), v, "unknown key \"bogus\"");
  // The source of other parameters (or of another generator) under these parameters.
  expectRefused(with([&](nlohmann::json& j) {
                  j["sourceSha256"] = sha256Hex(generateChainSource(v.ir, ChainKernelParams{512, 8, 1, 0}));
                }),
                v, "sourceSha256 is not the source this build generates");
  expectRefused("{\"format\": ", v, "not JSON");
  expectRefused("[]", v, "must be a JSON object");
}

}  // namespace
}  // namespace hotkernel::chain
