// Note [LayerNorm groups]: the layer_norm subgraphs a chain's ATen reference runs as one call.
#include <gtest/gtest.h>

#include "hotkernel/chain/ChainLayerNorm.h"
#include "hotkernel/chain/NamedChains.h"

using namespace hotkernel;
using namespace hotkernel::chain;

TEST(ChainLayerNormTest, GivenResidualLayerNormChainsWhenSearchedThenOneGroupReadsTheSumAndItsColumns) {
  for (DType d : {DType::Float32, DType::Float16, DType::BFloat16}) {
    for (int affine = 0; affine < 4; ++affine) {
      const bool weight = (affine & 1) != 0, bias = (affine & 2) != 0;
      const ChainIR ir = residualLayerNormChain(d, 1e-6, weight, bias);
      const std::vector<LayerNormGroup> groups = findLayerNormGroups(ir);
      ASSERT_EQ(groups.size(), 1u) << dtypeName(d) << " weight " << weight << " bias " << bias;
      const LayerNormGroup& g = groups[0];
      EXPECT_EQ(g.input, ir.outputs()[0]) << "the residual sum";
      EXPECT_EQ(g.result, ir.outputs()[1]);
      EXPECT_EQ(g.eps, 1e-6);
      EXPECT_EQ(g.weight >= 0, weight);
      EXPECT_EQ(g.bias >= 0, bias);
      if (weight) EXPECT_EQ(ir.node(g.weight).op, OpKind::Input) << "the column as the call read it";
      if (bias) EXPECT_EQ(ir.node(g.bias).dtype, d);
      // Every node but the inputs, the sum and the result is the group's.
      const size_t inputs = 2 + (weight ? 1 : 0) + (bias ? 1 : 0);
      EXPECT_EQ(g.internal.size(), ir.size() - inputs - 2) << dtypeName(d) << " weight " << weight << " bias " << bias;
    }
  }
}

TEST(ChainLayerNormTest, GivenAGroupNodeWrittenOrTheNormCastByTheCallerWhenSearchedThenTheGroupIsWhatOneCallComputed) {
  // The mean kept as an output (a caller that holds native_layer_norm's mean): no single call wrote the chain's.
  ChainIR ir = residualLayerNormChain(DType::Float32, 1e-5, true, true);
  ASSERT_EQ(findLayerNormGroups(ir).size(), 1u);
  int mean = -1;
  for (size_t i = 0; i < ir.size() && mean < 0; ++i) mean = ir.node(static_cast<int>(i)).op == OpKind::Mean ? static_cast<int>(i) : -1;
  ChainIR written = ir;
  written.markOutput(mean);
  EXPECT_TRUE(findLayerNormGroups(written).empty());
  // A float32 norm the caller casts to bfloat16: the group ends at the float32 norm.
  ChainIR cast = ir;
  const int norm = cast.outputs()[1];
  cast.markOutput(cast.addCast(norm, DType::BFloat16));
  const std::vector<LayerNormGroup> groups = findLayerNormGroups(cast);
  ASSERT_EQ(groups.size(), 1u);
  EXPECT_EQ(groups[0].result, norm);
  // A mean of another value is no norm.
  ChainIR other;
  const int x = other.addInput(DType::Float32, ShapeClass::Full);
  const int z = other.addInput(DType::Float32, ShapeClass::Full);
  const int d = other.addBinary(OpKind::Sub, x, other.addReduce(OpKind::Mean, z, true));
  const int var = other.addReduce(OpKind::Mean, other.addBinary(OpKind::Mul, d, d), true);
  other.markOutput(other.addBinary(
      OpKind::Mul, d, other.addUnary(OpKind::Rsqrt, other.addBinary(OpKind::Add, var, other.addConstant(1e-5)))));
  EXPECT_TRUE(findLayerNormGroups(other).empty());
}
