// Note [The chain's ATen reference]: a chain run by CPU ATen op by op against
// the chain interpreter's AtenOrder mode (Note [Two evaluation modes]), which
// states the IR's rules (Note [Chain dtypes]); the same comparison on CUDA
// ATen is in tests/gpu/ChainReferenceGpuTest.cpp.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "../ChainDifference.h"
#include "hotkernel/chain/ChainBuilder.h"
#include "hotkernel/chain/ChainInterpreter.h"
#include "hotkernel/chain/ChainLayerNorm.h"
#include "hotkernel/chain/NamedChains.h"
#include "hotkernel/chain/RandomChain.h"
#include "hotkernel/optimizer/ChainReference.h"
#include "hotkernel/runtime/Check.h"

namespace hotkernel {
namespace {

using chain::ChainIR;
using chain::DType;
using chain::ShapeClass;

std::vector<ChainReferenceInput> tensorsOf(const ChainIR& ir, int64_t rows, int64_t cols,
                                           const std::vector<std::vector<float>>& values) {
  std::vector<ChainReferenceInput> out;
  const std::vector<int> inputs = ir.inputs();
  for (size_t k = 0; k < inputs.size(); ++k) {
    const chain::Node& n = ir.nodes()[static_cast<size_t>(inputs[k])];
    ChainReferenceInput in;
    if (n.shape == ShapeClass::Scalar) {
      in.scalar = values[k].at(0);
    } else {
      in.tensor = at::tensor(values[k], at::kFloat).reshape(chainValueSizes(n.shape, rows, cols)).to(chainScalarType(n.dtype));
    }
    out.push_back(in);
  }
  return out;
}

// The outputs of ATen against the interpreter's ATen order (tests/ChainDifference.h).
ChainDifference runBoth(const ChainIR& ir, int64_t rows, int64_t cols, uint64_t seed) {
  const std::vector<std::vector<float>> values = chain::randomChainInputs(ir, rows, cols, seed);
  const std::vector<at::Tensor> aten = runChainWithAten(ir, tensorsOf(ir, rows, cols, values), rows, cols);
  const std::vector<std::vector<float>> interpreted =
      chain::interpretChain(ir, rows, cols, values, chain::EvalMode::AtenOrder);
  EXPECT_EQ(aten.size(), interpreted.size());
  ChainDifference all;
  for (size_t o = 0; o < aten.size() && o < interpreted.size(); ++o) {
    const chain::Node& out = ir.nodes()[static_cast<size_t>(ir.outputs()[o])];
    EXPECT_EQ(aten[o].scalar_type(), chainScalarType(out.dtype)) << "output " << o;
    const ChainDifference d = compareWithInterpreted(aten[o], interpreted[o], out.dtype);
    all.differing += d.differing;
    all.total += d.total;
    all.worstUnits = std::max(all.worstUnits, d.worstUnits);
  }
  return all;
}

TEST(ChainReferenceTest, GivenNormMlpAndResidualChainsWhenRunByCpuAtenThenTheInterpretersAtenOrderWithinOneUlp) {
  struct Named {
    const char* name;
    ChainIR ir;
  };
  const std::vector<Named> chains = {
      {"rms_norm bf16", chain::rmsNormChain(DType::BFloat16, 1e-6)},
      {"rms_norm fp16 no weight", chain::rmsNormChain(DType::Float16, 1e-5, false)},
      {"swiglu bf16", chain::swigluChain(DType::BFloat16)},
      {"swiglu fp16", chain::swigluChain(DType::Float16)},
      {"residual add + cast", chain::residualAddCastChain(DType::BFloat16, DType::Float32)},
      {"residual add + layer_norm bf16", chain::residualLayerNormChain(DType::BFloat16, 1e-5)},
      {"residual add + layer_norm fp16 without bias", chain::residualLayerNormChain(DType::Float16, 1e-5, true, false)},
  };
  for (const Named& c : chains) {
    const ChainDifference d = runBoth(c.ir, 64, 256, 7);
    // The row sums' order differs (ATen's tree, the interpreter's double sum): at most one unit of the
    // output's dtype apart, and on almost every element not at all.
    EXPECT_LE(d.worstUnits, 1.0) << c.name;
    EXPECT_LE(d.differing * 100, d.total) << c.name << ": " << d.differing << " of " << d.total << " differ";
  }
}

// The IR's rules are CUDA ATen's (Note [Chain dtypes]; the fused kernels are checked against CUDA). CPU ATen
// differs where GPT-2's new-GELU meets it: fp16 pow(x, 3) is the float32 cube there, and its tanh and
// vectorized arithmetic are not CUDA's; the chain stays within a few units of the output dtype.
TEST(ChainReferenceTest, GivenAFloat32NormWhenRunByCpuAtenThenWithinTheSumOrdersFewUnits) {
  // In float32 nothing rounds the row sum's order away: ATen's float tree and the interpreter's double sum
  // give results a few float32 units apart after rsqrt.
  const ChainDifference d = runBoth(chain::rmsNormChain(DType::Float32, 1e-6), 64, 256, 7);
  EXPECT_LE(d.worstUnits, 8.0);
}

TEST(ChainReferenceTest, GivenNewGeluWhenRunByCpuAtenThenWithinAFewUnitsOfTheInterpreter) {
  for (const DType dtype : {DType::BFloat16, DType::Float16}) {
    const ChainDifference d = runBoth(chain::newGeluChain(dtype), 64, 256, 7);
    EXPECT_LE(d.worstUnits, 32.0) << chain::shortDTypeName(dtype);
    EXPECT_LE(d.differing * 5, d.total) << d.differing << " of " << d.total;
  }
}

// Note [Softmax groups]: a softmax group runs as the one call eager made, so the reference is eager's
// result bit for bit (and its timing eager's kernel, not seven).
TEST(ChainReferenceTest, GivenSoftmaxChainsWhenRunByAtenThenTheyAreTheSoftmaxCallsBitForBit) {
  const int64_t rows = 24, cols = 96;
  const at::Tensor x = at::randn({rows, cols}) * 3;
  for (const DType d : {DType::Float32, DType::BFloat16, DType::Float16}) {
    const at::Tensor xd = x.to(chainScalarType(d));
    for (bool log : {false, true}) {
      const std::vector<at::Tensor> out = runChainWithAten(chain::softmaxChain(d, log), {{xd}}, rows, cols);
      ASSERT_EQ(out.size(), 1u);
      const at::Tensor want = log ? at::_log_softmax(xd, -1, false) : at::_softmax(xd, -1, false);
      EXPECT_EQ(out[0].scalar_type(), want.scalar_type());
      EXPECT_TRUE(at::equal(out[0], want)) << chain::shortDTypeName(d) << " log " << log;
    }
  }
  // GPT-2's scores: scale, mask, softmax, as modeling_gpt2 computes them.
  const at::Tensor scores = at::randn({rows, cols}).to(at::kHalf), mask = (at::randn({rows, cols}) * 4).to(at::kHalf);
  const std::vector<at::Tensor> out =
      runChainWithAten(chain::attentionSoftmaxChain(DType::Float16, 0.125), {{scores}, {mask}}, rows, cols);
  EXPECT_TRUE(at::equal(out[0], at::softmax(scores * 0.125 + mask, -1)));
}

// Note [LayerNorm groups]: the norm runs as eager's native_layer_norm call, bit for bit; the residual sum as its add.
TEST(ChainReferenceTest, GivenResidualLayerNormChainsWhenRunByAtenThenTheNormIsTheNativeLayerNormCallBitForBit) {
  const int64_t rows = 24, cols = 96;
  for (const DType d : {DType::Float32, DType::BFloat16, DType::Float16}) {
    const at::ScalarType t = chainScalarType(d);
    const at::Tensor x = at::randn({rows, cols}).to(t), r = at::randn({rows, cols}).to(t);
    const at::Tensor w = at::randn({cols}).to(t), b = at::randn({cols}).to(t);
    for (bool affine : {true, false}) {
      const ChainIR ir = chain::residualLayerNormChain(d, 1e-5, affine, affine);
      ASSERT_EQ(chain::findLayerNormGroups(ir).size(), 1u) << chain::shortDTypeName(d);
      std::vector<ChainReferenceInput> inputs = {{x}, {r}};
      if (affine) inputs.insert(inputs.end(), {{w}, {b}});
      const std::vector<at::Tensor> out = runChainWithAten(ir, inputs, rows, cols);
      ASSERT_EQ(out.size(), 2u);
      const at::Tensor sum = x + r;
      const at::Tensor want = affine ? std::get<0>(at::native_layer_norm(sum, {cols}, w, b, 1e-5))
                                     : std::get<0>(at::native_layer_norm(sum, {cols}, std::nullopt, std::nullopt, 1e-5));
      EXPECT_TRUE(at::equal(out[0], sum)) << chain::shortDTypeName(d);
      EXPECT_EQ(out[1].scalar_type(), t);
      EXPECT_TRUE(at::equal(out[1], want)) << chain::shortDTypeName(d) << " affine " << affine;
    }
  }
}

TEST(ChainReferenceTest, GivenValuesInTheSubnormalRangeWhenMeasuredThenOneRoundingStepIsOneUnit) {
  // Note [Units in the subnormal range]: fp16 steps by 2^-24 under 2^-14, bf16 and fp32 by 2^-133 and 2^-149.
  EXPECT_EQ(chainSpacingAt(std::ldexp(1.0f, -16), DType::Float16), std::ldexp(1.0, -24));
  EXPECT_EQ(chainSpacingAt(0.0f, DType::Float16), std::ldexp(1.0, -24));
  EXPECT_EQ(chainSpacingAt(1.5f, DType::Float16), std::ldexp(1.0, -10));
  EXPECT_EQ(chainSpacingAt(std::ldexp(1.0f, -130), DType::BFloat16), std::ldexp(1.0, -133));
  EXPECT_EQ(chainSpacingAt(-std::ldexp(1.0f, -140), DType::Float32), std::ldexp(1.0, -149));
  const at::Tensor got = at::tensor({std::ldexp(1.0f, -16) + std::ldexp(1.0f, -24), 1.0f}).to(at::kHalf);
  const ChainDifference d = compareWithInterpreted(got, {std::ldexp(1.0f, -16), 1.0f}, DType::Float16);
  EXPECT_EQ(d.differing, 1);
  EXPECT_EQ(d.worstUnits, 1.0);
}

TEST(ChainReferenceTest, GivenAWrongInputWhenRunThenErrorNamingIt) {
  const ChainIR ir = chain::swigluChain(DType::BFloat16);
  std::vector<ChainReferenceInput> inputs(2);
  inputs[0].tensor = at::zeros({4, 8}, at::kBFloat16);
  inputs[1].tensor = at::zeros({4, 8}, at::kFloat);  // wrong dtype
  EXPECT_THROW(runChainWithAten(ir, inputs, 4, 8), Error);
  inputs.pop_back();
  EXPECT_THROW(runChainWithAten(ir, inputs, 4, 8), Error);
}

// Note [Clamp in a chain]: a recorded clamp / hardtanh of bf16 values becomes maximum / minimum with its bounds
// rounded to bf16; run by ATen op by op, that is eager's clamp bit for bit, NaN included (a zero's sign aside).
TEST(ChainReferenceTest, GivenRecordedClampsWhenRunByCpuAtenThenTheyAreEagersClampBitForBit) {
  using A = chain::RecordedArg;
  const int64_t rows = 4, cols = 16;
  std::vector<float> v(rows * cols);
  for (size_t i = 0; i < v.size(); ++i) v[i] = std::sin(0.7f * static_cast<float>(i)) * 8.0f;
  v[3] = NAN;
  v[5] = -0.0f;
  v[7] = 0.1f;
  const at::Tensor x = at::tensor(v, at::kFloat).reshape({rows, cols}).to(at::kBFloat16);
  const chain::TensorMeta meta{"bfloat16", {rows, cols}, {cols, 1}};
  struct Case {
    std::string op;
    std::vector<A> bounds;
    at::Tensor eager;
  };
  const std::vector<Case> cases = {
      {"aten::clamp", {A::number(0.1), A::number(6.0)}, at::clamp(x, 0.1, 6.0)},
      {"aten::clamp", {A::none(), A::number(-0.3)}, at::clamp(x, std::nullopt, -0.3)},
      {"aten::clamp_min", {A::number(-2.7)}, at::clamp_min(x, -2.7)},
      {"aten::clamp_max", {A::number(0.0)}, at::clamp_max(x, 0.0)},
      {"aten::hardtanh", {A::number(0.0), A::number(6.0)}, at::hardtanh(x, 0.0, 6.0)},
  };
  for (const Case& c : cases) {
    std::vector<A> args = {A::tensor(1)};
    args.insert(args.end(), c.bounds.begin(), c.bounds.end());
    const chain::ChainBuild b = chain::buildChain({chain::RecordedCall{c.op, args, {2}}}, {{1, meta}, {2, meta}});
    ASSERT_TRUE(b.ok()) << c.op << ": " << b.reason;
    const std::vector<at::Tensor> got = runChainWithAten(b.chain, {ChainReferenceInput{x, 0.0}}, rows, cols);
    ASSERT_EQ(got.size(), 1u);
    // Bit for bit but for the sign of a zero: CPU ATen's minimum(-0, 0) is +0 where its clamp_max keeps -0 (on a
    // GPU both are fminf).
    const at::Tensor same = got[0].view(at::kShort).eq(c.eager.view(at::kShort)).logical_or(got[0].eq(0).logical_and(c.eager.eq(0)));
    EXPECT_TRUE(same.all().item<bool>()) << c.op << "\n" << got[0] << c.eager;
  }
}

}  // namespace
}  // namespace hotkernel
