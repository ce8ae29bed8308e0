// Tests of the chain key (ChainKey.h): independent of the order in which
// intermediate nodes were recorded, sensitive to everything that changes the
// computation or the kernel's arguments.

#include "hotkernel/chain/ChainKey.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "hotkernel/chain/NamedChains.h"

namespace hotkernel::chain {
namespace {

// RMSNorm with the eps constant made first and the weight's input declared
// after the norm's nodes: the same dataflow, recorded in another order.
ChainIR rmsNormRecordedOtherwise(DType dtype, double eps) {
  ChainIR ir;
  const int c = ir.addConstant(eps);
  const int x = ir.addInput(dtype, ShapeClass::Full);
  const int xf = ir.addCast(x, DType::Float32);
  const int sq = ir.addUnary(OpKind::PowScalar, xf, 2.0);
  const int var = ir.addReduce(OpKind::Mean, sq, true, 1);  // dim 1 of [rows, cols]: the last
  const int rstd = ir.addUnary(OpKind::Rsqrt, ir.addBinary(OpKind::Add, var, c));
  const int back = ir.addCast(ir.addBinary(OpKind::Mul, xf, rstd), dtype);
  const int w = ir.addInput(dtype, ShapeClass::Column);
  ir.markOutput(ir.addBinary(OpKind::Mul, w, back));
  return ir;
}

TEST(ChainKeyTest, GivenTheSameDataflowRecordedInAnotherOrderWhenKeyedThenTheKeysAreEqual) {
  const ChainIR a = rmsNormChain(DType::BFloat16, 1e-6);
  const ChainIR b = rmsNormRecordedOtherwise(DType::BFloat16, 1e-6);
  ASSERT_NE(a, b);
  EXPECT_EQ(chainKey(a).text, chainKey(b).text);
  EXPECT_EQ(chainKey(a).sha256, chainKey(b).sha256);
  EXPECT_EQ(canonicalChain(a), canonicalChain(b));
  EXPECT_EQ(chainKey(canonicalChain(a)).text, chainKey(a).text);
  EXPECT_EQ(chainKey(a).sha256.size(), 64u);
  // The text shows what the key covers.
  const std::string text = chainKey(a).text;
  EXPECT_EQ(text.rfind("hotkernel-chain 1\n%0 = input 0 bf16 full\n%1 = input 1 bf16 column\n", 0), 0u) << text;
  EXPECT_NE(text.find("= pow f32 full %2 exponent=0x1p+1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("= mean f32 row %3 keepdim\n"), std::string::npos) << text;
  EXPECT_NE(text.find("value=" + std::string("0x1.0c6f7a0b5ed8dp-20")), std::string::npos) << text;
  EXPECT_NE(text.find("\nout %"), std::string::npos) << text;
}

TEST(ChainKeyTest, GivenChainsThatComputeDifferentlyWhenKeyedThenTheKeysDiffer) {
  const std::string base = chainKey(rmsNormChain(DType::BFloat16, 1e-6)).sha256;
  EXPECT_NE(chainKey(rmsNormChain(DType::BFloat16, 1e-5)).sha256, base);   // a scalar
  EXPECT_NE(chainKey(rmsNormChain(DType::Float16, 1e-6)).sha256, base);    // a dtype
  EXPECT_NE(chainKey(rmsNormChain(DType::BFloat16, 1e-6, false)).sha256, base);
  EXPECT_NE(chainKey(rmsNormChain(DType::BFloat16, std::nextafter(1e-6, 1.0))).sha256, base);  // one ulp
  // Input order is argument order.
  ChainIR ab, ba;
  {
    const int a = ab.addInput(DType::Float32, ShapeClass::Full);
    const int b = ab.addInput(DType::Float16, ShapeClass::Full);
    ab.markOutput(ab.addBinary(OpKind::Sub, a, b));
  }
  {
    const int b = ba.addInput(DType::Float16, ShapeClass::Full);
    const int a = ba.addInput(DType::Float32, ShapeClass::Full);
    ba.markOutput(ba.addBinary(OpKind::Sub, a, b));
  }
  EXPECT_NE(chainKey(ab).sha256, chainKey(ba).sha256);
  // Output order, alpha, keepdim.
  ChainIR two = residualAddCastChain(DType::BFloat16, DType::Float32);
  ChainIR swapped;
  for (const Node& n : two.nodes()) swapped.appendUnchecked(n);
  swapped.appendOutputUnchecked(two.outputs()[1]);
  swapped.appendOutputUnchecked(two.outputs()[0]);
  EXPECT_NE(chainKey(two).sha256, chainKey(swapped).sha256);
  ChainIR alpha;
  const int x = alpha.addInput(DType::Float32, ShapeClass::Full);
  alpha.markOutput(alpha.addBinary(OpKind::Add, x, alpha.addInput(DType::Float32, ShapeClass::Full), 2.0));
  EXPECT_NE(chainKey(alpha).text.find("alpha=0x1p+1"), std::string::npos);
  ChainIR keep, flat;
  keep.markOutput(keep.addReduce(OpKind::Sum, keep.addInput(DType::Float32, ShapeClass::Full), true));
  flat.markOutput(flat.addReduce(OpKind::Sum, flat.addInput(DType::Float32, ShapeClass::Full), false));
  EXPECT_NE(chainKey(keep).sha256, chainKey(flat).sha256);
}

TEST(ChainKeyTest, GivenASharedValueWhenKeyedThenItAppearsOnceAndIsReadTwice) {
  const std::string text = chainKey(rmsNormChain(DType::BFloat16, 1e-6)).text;
  size_t casts = 0;
  for (size_t at = text.find("= cast f32"); at != std::string::npos; at = text.find("= cast f32", at + 1)) ++casts;
  EXPECT_EQ(casts, 1u) << text;  // x.to(f32) feeds pow and mul: one node
  EXPECT_NE(text.find("%2 = cast f32 full %0\n"), std::string::npos) << text;
  EXPECT_NE(text.find(" %2 %"), std::string::npos) << text;  // the mul reads it
}

TEST(ChainKeyTest, GivenAWidthFreeChainWhenKeyedThenItsTextIsTheFormatBeforeExtents) {
  // The canonical text of SwiGLU as Note [Chain key] writes it: no extents, so keys cached before
  // column extents existed still name their chains.
  EXPECT_EQ(chainKey(swigluChain(DType::BFloat16)).text,
            "hotkernel-chain 1\n%0 = input 0 bf16 full\n%1 = input 1 bf16 full\n%2 = silu bf16 full %0\n"
            "%3 = mul bf16 full %2 %1\nout %3\n");
}

TEST(ChainKeyTest, GivenWidthFixedChainsWhenKeyedThenExtentsAndPartOrderAreNamed) {
  const ChainKey q = chainKey(rotaryChain(DType::BFloat16, 128));
  EXPECT_NE(q.text.find("input 0 bf16 full cols=128"), std::string::npos) << q.text;
  EXPECT_NE(q.text.find("cat bf16 full cols=128 %"), std::string::npos) << q.text;
  EXPECT_NE(chainKey(rotaryChain(DType::BFloat16, 64)).sha256, q.sha256);
  EXPECT_NE(chainKey(rotaryChain(DType::Float16, 128)).sha256, q.sha256);
  // The parts in the other order are another chain.
  ChainIR swapped;
  const int a = swapped.addInput(DType::BFloat16, ShapeClass::Full, 64);
  const int b = swapped.addInput(DType::BFloat16, ShapeClass::Full, 64);
  ChainIR straight = swapped;
  swapped.markOutput(swapped.addCat({b, a}));
  straight.markOutput(straight.addCat({a, b}));
  EXPECT_NE(chainKey(swapped).sha256, chainKey(straight).sha256);
}

}  // namespace
}  // namespace hotkernel::chain
