// Tests of the chain IR (ChainIR.h): inference of dtypes and shape classes,
// and the errors of the adders and of validate().

#include "hotkernel/chain/ChainIR.h"

#include <gtest/gtest.h>

#include <string>

#include "hotkernel/chain/NamedChains.h"
#include "hotkernel/runtime/Check.h"

namespace hotkernel::chain {
namespace {

// Runs `f`, expects an Error whose message holds `needle`.
template <typename F>
void expectError(F f, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one holding '" << needle << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    EXPECT_FALSE(e.internal()) << e.what();
  }
}

TEST(ChainIRTest, GivenTheRmsNormChainWhenBuiltThenDtypesFollowAtenPromotionAndClassesTheBroadcasts) {
  const ChainIR ir = rmsNormChain(DType::BFloat16, 1e-6);
  ASSERT_NO_THROW(ir.validate());
  ASSERT_EQ(ir.size(), 11u);
  const std::vector<Node>& n = ir.nodes();
  EXPECT_EQ(n[0].dtype, DType::BFloat16);  // x
  EXPECT_EQ(n[1].shape, ShapeClass::Column);  // weight
  EXPECT_EQ(n[2].dtype, DType::Float32);  // x.to(f32)
  EXPECT_EQ(n[4].op, OpKind::Mean);
  EXPECT_EQ(n[4].shape, ShapeClass::Row);  // keepdim
  EXPECT_EQ(n[4].dtype, DType::Float32);
  EXPECT_EQ(n[6].dtype, DType::Float32);  // var + eps: the scalar does not promote
  EXPECT_EQ(n[8].shape, ShapeClass::Full);  // x * rstd: Full with Row
  EXPECT_EQ(n[9].dtype, DType::BFloat16);   // .to(bf16)
  EXPECT_EQ(n[10].dtype, DType::BFloat16);  // weight * x: bf16 with bf16
  EXPECT_EQ(n[10].shape, ShapeClass::Full);
  EXPECT_EQ(ir.outputs(), std::vector<int>{10});
  EXPECT_EQ(ir.inputs(), (std::vector<int>{0, 1}));
  EXPECT_TRUE(ir.hasReductions());
  EXPECT_FALSE(swigluChain(DType::Float16).hasReductions());
}

TEST(ChainIRTest, GivenMixedDtypesWhenCombinedThenThePromotionIsAtens) {
  EXPECT_EQ(promoteTypes(DType::BFloat16, DType::BFloat16), DType::BFloat16);
  EXPECT_EQ(promoteTypes(DType::Float16, DType::BFloat16), DType::Float32);
  EXPECT_EQ(promoteTypes(DType::BFloat16, DType::Float32), DType::Float32);
  ChainIR ir;
  const int h = ir.addInput(DType::Float16, ShapeClass::Full);
  const int w = ir.addInput(DType::Float32, ShapeClass::Column);  // a dimensioned tensor: it promotes
  const int r = ir.addInput(DType::Float16, ShapeClass::Row);
  EXPECT_EQ(ir.node(ir.addBinary(OpKind::Mul, h, w)).dtype, DType::Float32);
  EXPECT_EQ(ir.node(ir.addBinary(OpKind::Mul, h, r)).dtype, DType::Float16);
  const int s = ir.addInput(DType::Float32, ShapeClass::Scalar);  // a wrapped number: it does not
  EXPECT_EQ(ir.node(ir.addBinary(OpKind::Sub, s, h)).dtype, DType::Float16);
  const int outer = ir.addBinary(OpKind::Add, r, ir.addUnary(OpKind::Exp, w));
  EXPECT_EQ(ir.node(outer).shape, ShapeClass::Full);  // [rows, 1] with [cols]
  EXPECT_EQ(ir.node(outer).dtype, DType::Float32);
}

TEST(ChainIRTest, GivenUnsupportedBroadcastsWhenAddedThenTheErrorSaysWhy) {
  ChainIR ir;
  const int x = ir.addInput(DType::Float32, ShapeClass::Full);
  const int flat = ir.addReduce(OpKind::Sum, x, /*keepdim=*/false);
  EXPECT_EQ(ir.node(flat).shape, ShapeClass::RowFlat);
  expectError([&] { ir.addBinary(OpKind::Mul, x, flat); }, "not a chain broadcast");
  EXPECT_EQ(ir.node(ir.addBinary(OpKind::Mul, flat, flat)).shape, ShapeClass::RowFlat);
  const int keep = ir.addReduce(OpKind::Amax, x, /*keepdim=*/true);
  expectError([&] { ir.addReduce(OpKind::Sum, keep, true); }, "reduces a row value");
  expectError([&] { ir.addReduce(OpKind::Sum, x, true, 0); }, "reduces the last dim only");
  expectError([&] { ir.addInput(DType::Float32, ShapeClass::RowFlat); }, "is a [rows] tensor");
  const int c = ir.addConstant(2.0);
  expectError([&] { ir.addBinary(OpKind::Mul, c, c); }, "combines two scalars");
  expectError([&] { ir.addUnary(OpKind::Exp, c); }, "applies to a scalar");
  expectError([&] { ir.addBinary(OpKind::Mul, x, c, 2.0); }, "only add and sub take alpha");
  expectError([&] { ir.addUnary(OpKind::Add, x); }, "is not a unary op");
  expectError([&] { ir.addBinary(OpKind::Add, x, 99); }, "not an earlier node");
  expectError([&] { ir.markOutput(c); }, "is a scalar");
  ir.markOutput(flat);
  expectError([&] { ir.markOutput(flat); }, "marked twice");
}

TEST(ChainIRTest, GivenHandWrittenNodesWhenValidatedThenTypeErrorsCyclesAndDeadNodesAreRefused) {
  const ChainIR good = swigluChain(DType::BFloat16);
  {
    std::vector<Node> nodes = good.nodes();
    ChainIR typed;
    for (Node n : nodes) {
      if (n.op == OpKind::Mul) n.dtype = DType::Float32;  // ATen gives bf16
      typed.appendUnchecked(n);
    }
    typed.appendOutputUnchecked(good.outputs()[0]);
    expectError([&] { typed.validate(); }, "chain type error: node 3 (mul f32 full)");
  }
  {
    ChainIR cyclic;
    for (Node n : good.nodes()) {
      if (n.op == OpKind::Silu) n.operands = {3};  // silu reads the mul that reads it
      cyclic.appendUnchecked(n);
    }
    cyclic.appendOutputUnchecked(3);
    expectError([&] { cyclic.validate(); }, "not an earlier node (a cycle");
  }
  {
    ChainIR dead = good;
    dead.addUnary(OpKind::Exp, 0);  // computed, never stored nor read
    expectError([&] { dead.validate(); }, "node 4 (exp bf16 full) reaches no output");
  }
  {
    ChainIR noOutput;
    noOutput.addInput(DType::Float32, ShapeClass::Full);
    expectError([&] { noOutput.validate(); }, "at least one output");
  }
  {
    ChainIR shaped;
    for (Node n : good.nodes()) {
      if (n.op == OpKind::Input && shaped.size() == 1) n.shape = ShapeClass::Column;
      shaped.appendUnchecked(n);
    }
    shaped.appendOutputUnchecked(3);
    EXPECT_NO_THROW(shaped.validate());  // silu(gate) * up[cols] is a chain too
    ChainIR misShaped;
    for (Node n : good.nodes()) {
      if (n.op == OpKind::Mul) n.shape = ShapeClass::Row;
      misShaped.appendUnchecked(n);
    }
    misShaped.appendOutputUnchecked(3);
    expectError([&] { misShaped.validate(); }, "chain shape error");
  }
}

TEST(ChainIRTest, GivenTwoChainsWhenComparedThenEqualityIsNodeByNodeWithTheScalarsBits) {
  EXPECT_EQ(rmsNormChain(DType::BFloat16, 1e-6), rmsNormChain(DType::BFloat16, 1e-6));
  EXPECT_NE(rmsNormChain(DType::BFloat16, 1e-6), rmsNormChain(DType::BFloat16, 1e-5));
  EXPECT_NE(rmsNormChain(DType::BFloat16, 1e-6), rmsNormChain(DType::Float16, 1e-6));
  ChainIR a, b;
  a.markOutput(a.addBinary(OpKind::Add, a.addInput(DType::Float32, ShapeClass::Full), a.addConstant(0.0)));
  b.markOutput(b.addBinary(OpKind::Add, b.addInput(DType::Float32, ShapeClass::Full), b.addConstant(-0.0)));
  EXPECT_NE(a, b);  // x + (-0.0) keeps the sign of a -0 x; x + 0.0 does not
}

}  // namespace
}  // namespace hotkernel::chain
