// Tests of the chain's JSON form (ChainJson.h): round trips and the strict
// reader's errors.

#include "hotkernel/chain/ChainJson.h"

#include <gtest/gtest.h>

#include <string>

#include "hotkernel/chain/ChainKey.h"
#include "hotkernel/chain/NamedChains.h"
#include "hotkernel/runtime/Check.h"

namespace hotkernel::chain {
namespace {

void expectRefused(const nlohmann::json& j, const std::string& needle) {
  try {
    chainFromJson(j);
    ADD_FAILURE() << "accepted: " << j.dump() << "; expected an error holding '" << needle << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(ChainJsonTest, GivenTheNamedChainsWhenWrittenAndReadThenTheChainAndItsKeyComeBack) {
  for (const ChainIR& ir : {rmsNormChain(DType::BFloat16, 1e-6), swigluChain(DType::Float16),
                            newGeluChain(DType::Float32), residualAddCastChain(DType::BFloat16, DType::Float32)}) {
    const nlohmann::json j = chainToJson(ir);
    EXPECT_EQ(j.at("format"), "hotkernel-chain");
    EXPECT_EQ(j.at("version"), 2);
    const ChainIR back = chainFromJsonText(j.dump());
    EXPECT_EQ(back, ir) << j.dump();
    EXPECT_EQ(chainKey(back).sha256, chainKey(ir).sha256);
  }
  const nlohmann::json rms = chainToJson(rmsNormChain(DType::BFloat16, 1e-6));
  EXPECT_EQ(rms.at("nodes").at(4).at("op"), "mean");
  EXPECT_EQ(rms.at("nodes").at(4).at("keepdim"), true);
  EXPECT_EQ(rms.at("nodes").at(5).at("value"), 1e-6);
  EXPECT_EQ(rms.at("outputs"), nlohmann::json::array({10}));
}

// The second vocabulary's ops by name, leaky_relu with its slope; a slope on another op is an unknown key.
TEST(ChainJsonTest, GivenTheSecondVocabularyWhenWrittenAndReadThenOpsAndTheSlopeComeBack) {
  ChainIR ir;
  const int x = ir.addInput(DType::BFloat16, ShapeClass::Full);
  int v = ir.addBinary(OpKind::Maximum, ir.addUnary(OpKind::Hardswish, x), ir.addConstant(0.5));
  v = ir.addUnary(OpKind::LeakyRelu, ir.addUnary(OpKind::Sin, v), 0.125);
  ir.markOutput(ir.addBinary(OpKind::Minimum, ir.addUnary(OpKind::Erf, v), x));
  const nlohmann::json j = chainToJson(ir);
  EXPECT_EQ(j.at("nodes").at(5).at("op"), "leaky_relu");
  EXPECT_EQ(j.at("nodes").at(5).at("slope"), 0.125);
  const ChainIR back = chainFromJsonText(j.dump());
  EXPECT_EQ(back, ir) << j.dump();
  EXPECT_EQ(chainKey(back).sha256, chainKey(ir).sha256);
  nlohmann::json bad = j;
  bad["nodes"][4]["slope"] = 0.5;  // sin takes no slope
  EXPECT_THROW(chainFromJsonText(bad.dump()), Error);
}

TEST(ChainJsonTest, GivenBrokenDocumentsWhenReadThenEachErrorNamesTheField) {
  const nlohmann::json good = chainToJson(swigluChain(DType::BFloat16));
  auto with = [&](auto edit) {
    nlohmann::json j = good;
    edit(j);
    return j;
  };
  expectRefused(with([](nlohmann::json& j) { j["format"] = "chain"; }), "chain.format must be");
  expectRefused(with([](nlohmann::json& j) { j["version"] = 3; }), "chain.version 3 is not supported");
  expectRefused(with([](nlohmann::json& j) { j["version"] = 0; }), "chain.version 0 is not supported");
  expectRefused(with([](nlohmann::json& j) { j["version"] = "1"; }), "chain.version must be");
  expectRefused(with([](nlohmann::json& j) { j["extra"] = 1; }), "unknown key \"extra\"");
  expectRefused(with([](nlohmann::json& j) { j.erase("outputs"); }), "misses \"outputs\"");
  expectRefused(with([](nlohmann::json& j) { j["nodes"][2]["alpha"] = 1.0; }), "chain.nodes[2] has an unknown key");
  expectRefused(with([](nlohmann::json& j) { j["nodes"][2]["op"] = "gelu"; }), "unknown chain op 'gelu'");
  expectRefused(with([](nlohmann::json& j) { j["nodes"][0]["dtype"] = "int8"; }), "int8");
  expectRefused(with([](nlohmann::json& j) { j["nodes"][0]["shape"] = "column_pair"; }), "unknown shape class");
  expectRefused(with([](nlohmann::json& j) { j["nodes"][3]["inputs"] = {2, 7}; }), "not a node index in [0, 4)");
  expectRefused(with([](nlohmann::json& j) { j["nodes"][3]["inputs"] = {2, 1.5}; }), "must hold integers");
  expectRefused(with([](nlohmann::json& j) { j["nodes"][2]["inputs"] = {3}; }), "not an earlier node");
  expectRefused(with([](nlohmann::json& j) { j["nodes"][3]["dtype"] = "float32"; }), "chain type error");
  expectRefused(with([](nlohmann::json& j) { j["outputs"] = {2}; }), "reaches no output");
  expectRefused(with([](nlohmann::json& j) { j["outputs"] = {3, 3}; }), "marked twice");
  EXPECT_THROW(chainFromJsonText("{\"format\": "), Error);
  EXPECT_THROW(chainFromJsonText("[" + std::string(200, '[') + std::string(201, ']')), Error);
  // A reduction over another dim read from JSON.
  nlohmann::json mean = chainToJson(rmsNormChain(DType::BFloat16, 1e-6));
  mean["nodes"][4]["dim"] = 0;
  expectRefused(mean, "reduces dim 0");
}

TEST(ChainJsonTest, GivenTheRotaryChainWhenWrittenAndReadThenExtentsAndTheCatComeBack) {
  const ChainIR ir = rotaryChain(DType::BFloat16, 128);
  const nlohmann::json j = chainToJson(ir);
  EXPECT_EQ(j.at("nodes").at(0).at("cols"), 128);
  EXPECT_EQ(j.at("nodes").at(3).at("cols"), 64);
  EXPECT_EQ(j.at("nodes").at(6).at("op"), "cat");
  EXPECT_EQ(j.at("nodes").at(6).at("inputs"), nlohmann::json::array({4, 5}));
  EXPECT_FALSE(chainToJson(swigluChain(DType::BFloat16)).at("nodes").at(0).contains("cols"));
  const ChainIR back = chainFromJsonText(j.dump());
  EXPECT_EQ(back, ir);
  EXPECT_EQ(chainKey(back).sha256, chainKey(ir).sha256);
  // An extent that is not the inferred one, or not a positive integer.
  nlohmann::json edited = j;
  edited["nodes"][6]["cols"] = 96;
  expectRefused(edited, "has column extent 96 where its operands give 128");
  edited = j;
  edited["nodes"][3]["cols"] = 0;
  expectRefused(edited, "chain.nodes[3].cols");
}

TEST(ChainJsonTest, GivenAVersionOneDocumentWhenReadThenItIsTheWidthFreeChainAndV2KeysAreRefused) {
  // Version 1 as written before column extents: no "cols", no cat.
  nlohmann::json v1 = chainToJson(rmsNormChain(DType::BFloat16, 1e-6));
  v1["version"] = 1;
  EXPECT_EQ(chainFromJson(v1), rmsNormChain(DType::BFloat16, 1e-6));
  nlohmann::json rotary = chainToJson(rotaryChain(DType::BFloat16, 128));
  rotary["version"] = 1;
  expectRefused(rotary, "chain.nodes[0] has an unknown key \"cols\"");
}

}  // namespace
}  // namespace hotkernel::chain
