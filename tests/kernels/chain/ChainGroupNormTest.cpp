// Note [GroupNorm groups]: the group_norm subgraphs a chain's ATen reference runs as one call.
#include <gtest/gtest.h>

#include "hotkernel/chain/ChainBuilder.h"
#include "hotkernel/chain/ChainGroupNorm.h"
#include "hotkernel/chain/ChainLayerNorm.h"
#include "hotkernel/chain/NamedChains.h"
#include "hotkernel/chain/Rounding.h"

using namespace hotkernel;
using namespace hotkernel::chain;

namespace {

// The group norm + SiLU chain as the builder makes it, with or without the weight and the bias.
ChainIR builtGroupNorm(DType d, bool weight, bool bias) {
  RecordedChain r = groupNormActRecording(d, {2, 8, 6, 4}, 1e-5, OpKind::Silu);
  if (!weight) r.calls[0].args[1] = RecordedArg::none();
  if (!bias) r.calls[0].args[2] = RecordedArg::none();
  const ChainBuild b = buildChain(r.calls, r.metas, {7}, ChainBuildOptions{true});
  EXPECT_TRUE(b.ok()) << b.reason;
  return b.chain;
}

}  // namespace

TEST(ChainGroupNormTest, GivenGroupNormChainsWhenSearchedThenOneGroupReadsXAndItsPerChannelValues) {
  for (DType d : {DType::Float32, DType::Float16, DType::BFloat16}) {
    for (int affine = 0; affine < 4; ++affine) {
      const bool weight = (affine & 1) != 0, bias = (affine & 2) != 0;
      const ChainIR ir = builtGroupNorm(d, weight, bias);
      const std::vector<GroupNormGroup> groups = findGroupNormGroups(ir);
      ASSERT_EQ(groups.size(), 1u) << dtypeName(d) << " weight " << weight << " bias " << bias;
      const GroupNormGroup& g = groups[0];
      EXPECT_EQ(g.input, 0) << "x as the call read it";
      EXPECT_EQ(ir.node(g.input).op, OpKind::Input);
      EXPECT_EQ(g.weight >= 0, weight);
      EXPECT_EQ(g.bias >= 0, bias);
      if (weight) EXPECT_EQ(ir.node(g.weight).op, OpKind::Input) << "the weight as the call read it";
      if (bias) EXPECT_EQ(ir.node(g.bias).op, OpKind::Input);
      EXPECT_EQ(g.eps, static_cast<double>(roundTo(d, 1e-5f)));
      EXPECT_EQ(ir.node(g.result).dtype, d);
      EXPECT_EQ(ir.node(ir.outputs()[0]).operands, std::vector<int>{g.result}) << "the SiLU reads the norm";
      // Every node but the inputs, the result and the SiLU is the group's.
      const size_t inputs = 1 + (weight ? 1 : 0) + (bias ? 1 : 0);
      EXPECT_EQ(g.internal.size(), ir.size() - inputs - 2) << dtypeName(d) << " weight " << weight << " bias " << bias;
      EXPECT_TRUE(findLayerNormGroups(ir).empty()) << "a group norm is no layer norm";
    }
  }
  // Nor is a layer norm a group norm, though float32 without affine computes the same row normalization.
  for (DType d : {DType::Float32, DType::BFloat16}) {
    EXPECT_TRUE(findGroupNormGroups(residualLayerNormChain(d, 1e-5, false, false)).empty()) << dtypeName(d);
    EXPECT_TRUE(findGroupNormGroups(residualLayerNormChain(d, 1e-5)).empty()) << dtypeName(d);
  }
}

TEST(ChainGroupNormTest, GivenAGroupNodeKeptAsAnOutputWhenSearchedThenNoSingleCallComputedTheGroup) {
  RecordedChain r = groupNormActRecording(DType::Float16, {2, 8, 6, 4}, 1e-5, OpKind::Silu);
  const ChainBuild kept = buildChain(r.calls, r.metas, {7, 5}, ChainBuildOptions{true});  // the mean kept
  ASSERT_TRUE(kept.ok()) << kept.reason;
  EXPECT_TRUE(findGroupNormGroups(kept.chain).empty());
  const ChainBuild norm = buildChain(r.calls, r.metas, {4, 7}, ChainBuildOptions{true});  // the norm's result too
  ASSERT_TRUE(norm.ok()) << norm.reason;
  EXPECT_EQ(findGroupNormGroups(norm.chain).size(), 1u) << "the result may be read outside";
}
