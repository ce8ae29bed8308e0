// Note [Softmax groups]: the softmax subgraphs a chain's ATen reference runs as one call.
#include <gtest/gtest.h>

#include "hotkernel/chain/ChainBuilder.h"
#include "hotkernel/chain/ChainSoftmax.h"
#include "hotkernel/chain/NamedChains.h"

using namespace hotkernel;
using namespace hotkernel::chain;

TEST(ChainSoftmaxTest, GivenSoftmaxChainsOfEveryDtypeWhenSearchedThenOneGroupReadsXAndWritesTheResult) {
  for (DType d : {DType::Float32, DType::Float16, DType::BFloat16}) {
    for (bool log : {false, true}) {
      const ChainIR ir = softmaxChain(d, log);
      const std::vector<SoftmaxGroup> groups = findSoftmaxGroups(ir);
      ASSERT_EQ(groups.size(), 1u) << dtypeName(d) << " log " << log;
      EXPECT_EQ(groups[0].input, ir.inputs()[0]);
      EXPECT_EQ(groups[0].result, ir.outputs()[0]);
      EXPECT_EQ(groups[0].log, log);
      EXPECT_FALSE(groups[0].halfToFloat);
      // Every node but the input and the result is the group's.
      EXPECT_EQ(groups[0].internal.size(), ir.size() - 2) << dtypeName(d) << " log " << log;
    }
  }
}

TEST(ChainSoftmaxTest, GivenTheAttentionScoresChainWhenSearchedThenTheGroupReadsTheMaskedSum) {
  const ChainIR ir = attentionSoftmaxChain(DType::Float16, 0.125);
  const std::vector<SoftmaxGroup> groups = findSoftmaxGroups(ir);
  ASSERT_EQ(groups.size(), 1u);
  EXPECT_EQ(ir.node(groups[0].input).op, OpKind::Add);
  EXPECT_EQ(groups[0].result, ir.outputs()[0]);
}

TEST(ChainSoftmaxTest, GivenHalfToFloatWhenSearchedThenTheGroupSaysSoAndEndsAtTheFloat32Result) {
  using A = RecordedArg;
  const TensorMetas m = {{1, TensorMeta{"float16", {4, 64}, {64, 1}}}, {2, TensorMeta{"float32", {4, 64}, {64, 1}}}};
  const ChainBuild b = buildChain({{"aten::_softmax", {A::tensor(1), A::number(-1), A::boolean(true)}, {2}}}, m);
  ASSERT_TRUE(b.ok()) << b.reason;
  const std::vector<SoftmaxGroup> groups = findSoftmaxGroups(b.chain);
  ASSERT_EQ(groups.size(), 1u);
  EXPECT_TRUE(groups[0].halfToFloat);
  EXPECT_EQ(b.chain.node(groups[0].input).dtype, DType::Float16);
  EXPECT_EQ(b.chain.node(groups[0].result).dtype, DType::Float32);
}

TEST(ChainSoftmaxTest, GivenAGroupNodeReadOutsideOrWrittenWhenSearchedThenThereIsNoGroup) {
  // softmax(x) with exp(x - max) also an output: eager computed it on its own, so no single call did.
  ChainIR ir;
  const int x = ir.addInput(DType::Float32, ShapeClass::Full);
  const int m = ir.addReduce(OpKind::Amax, x, true);
  const int d = ir.addBinary(OpKind::Sub, x, m);
  const int e = ir.addUnary(OpKind::Exp, d);
  const int s = ir.addReduce(OpKind::Sum, e, true);
  ir.markOutput(ir.addBinary(OpKind::Div, e, s));
  ASSERT_EQ(findSoftmaxGroups(ir).size(), 1u);
  ChainIR written = ir;
  written.markOutput(e);
  EXPECT_TRUE(findSoftmaxGroups(written).empty());
  // The sum read by another node.
  ChainIR read = ir;
  read.markOutput(read.addUnary(OpKind::Neg, s));
  EXPECT_TRUE(findSoftmaxGroups(read).empty());
  // A max without keepdim or of another value is no softmax.
  ChainIR other;
  const int y = other.addInput(DType::Float32, ShapeClass::Full);
  const int z = other.addInput(DType::Float32, ShapeClass::Full);
  const int mz = other.addReduce(OpKind::Amax, z, true);
  const int dy = other.addBinary(OpKind::Sub, y, mz);
  const int ey = other.addUnary(OpKind::Exp, dy);
  other.markOutput(other.addBinary(OpKind::Div, ey, other.addReduce(OpKind::Sum, ey, true)));
  EXPECT_TRUE(findSoftmaxGroups(other).empty());
}
