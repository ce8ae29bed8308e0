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

TEST(ChainIRTest, GivenPartsOfExplicitExtentsWhenCatThenTheExtentsSumAndTheDtypeIsTheirPromotion) {
  ChainIR ir;
  const int a = ir.addInput(DType::BFloat16, ShapeClass::Full, 48);
  const int b = ir.addInput(DType::Float16, ShapeClass::Full, 16);
  const int cat = ir.addCat({a, ir.addUnary(OpKind::Neg, b)});
  EXPECT_EQ(ir.node(cat).cols, 64);
  EXPECT_EQ(ir.node(cat).dtype, DType::Float32);  // bf16 with f16
  EXPECT_EQ(ir.node(cat).shape, ShapeClass::Full);
  const int w = ir.addInput(DType::Float32, ShapeClass::Column, 64);
  const int out = ir.addBinary(OpKind::Mul, cat, w);
  EXPECT_EQ(ir.node(out).cols, 64);
  ir.markOutput(out);
  EXPECT_NO_THROW(ir.validate());
  EXPECT_EQ(ir.width(), 64);
  EXPECT_TRUE(ir.hasCat());
  EXPECT_EQ(rotaryChain(DType::BFloat16, 128).width(), 128);
  EXPECT_EQ(rmsNormChain(DType::BFloat16, 1e-6).width(), 0);
}

TEST(ChainIRTest, GivenExtentsThatDoNotFitWhenAddedOrValidatedThenTheErrorSaysWhy) {
  ChainIR ir;
  const int a = ir.addInput(DType::BFloat16, ShapeClass::Full, 64);
  const int b = ir.addInput(DType::BFloat16, ShapeClass::Full, 32);
  expectError([&] { ir.addBinary(OpKind::Add, a, b); }, "combines column extents 64 and 32");
  expectError([&] { ir.addCat({a, ir.addInput(DType::BFloat16, ShapeClass::Full)}); }, "a cat joins full values of explicit extent");
  expectError([&] { ir.addCat({a, ir.addInput(DType::BFloat16, ShapeClass::Row)}); }, "joins a row value");
  expectError([&] { ir.addInput(DType::BFloat16, ShapeClass::Row, 8); }, "only full and column inputs have one");
  expectError([&] { ir.addCat({}); }, "takes one or more operands");
  // Width-free and width-fixed values in one chain.
  ChainIR mixed;
  const int x = mixed.addInput(DType::Float32, ShapeClass::Full, 16);
  const int y = mixed.addInput(DType::Float32, ShapeClass::Full);
  mixed.markOutput(mixed.addUnary(OpKind::Exp, x));
  mixed.markOutput(mixed.addUnary(OpKind::Exp, y));
  expectError([&] { mixed.validate(); }, "mixes values of the variant's cols");
  // An output narrower than the chain's width.
  ChainIR narrow;
  const int p = narrow.addInput(DType::Float32, ShapeClass::Full, 16);
  const int q = narrow.addInput(DType::Float32, ShapeClass::Full, 16);
  narrow.markOutput(narrow.addCat({p, q}));
  narrow.markOutput(narrow.addUnary(OpKind::Exp, p));
  expectError([&] { narrow.validate(); }, "outputs have the chain's width 32");
  // A reduction over a part.
  ChainIR reduced;
  const int r = reduced.addInput(DType::Float32, ShapeClass::Full, 16);
  const int s = reduced.addInput(DType::Float32, ShapeClass::Full, 16);
  const int sum = reduced.addReduce(OpKind::Sum, r, true);
  reduced.markOutput(reduced.addCat({r, s}));
  reduced.markOutput(sum);
  expectError([&] { reduced.validate(); }, "reductions are over the chain's width 32");
  // A stated extent that is not the inferred one.
  ChainIR edited;
  Node in;
  in.op = OpKind::Input;
  in.dtype = DType::Float32;
  in.cols = 16;
  edited.appendUnchecked(in);
  edited.appendUnchecked(in);
  Node cat;
  cat.op = OpKind::Cat;
  cat.operands = {0, 1};
  cat.dtype = DType::Float32;
  cat.cols = 48;
  edited.appendUnchecked(cat);
  edited.appendOutputUnchecked(2);
  expectError([&] { edited.validate(); }, "has column extent 48 where its operands give 32");
}

}  // namespace
}  // namespace hotkernel::chain
