// Tests of buildChain (ChainBuilder.h): HF's chains as the dispatcher
// records them become the named chains; everything that ends a chain is
// refused with its reason.

#include "hotkernel/chain/ChainBuilder.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "hotkernel/chain/ChainKey.h"
#include "hotkernel/chain/NamedChains.h"

namespace hotkernel::chain {
namespace {

using A = RecordedArg;

TensorMeta contiguous(const std::string& type, std::vector<int64_t> sizes) {
  std::vector<int64_t> strides(sizes.size());
  int64_t s = 1;
  for (size_t d = sizes.size(); d-- > 0;) {
    strides[d] = s;
    s *= sizes[d];
  }
  return TensorMeta{type, std::move(sizes), std::move(strides)};
}

RecordedCall call(std::string op, std::vector<A> args, int64_t out) { return RecordedCall{std::move(op), std::move(args), {out}}; }

// LlamaRMSNorm.forward on a bf16 [2, 8, 64] hidden state, as recorded.
struct RmsNormRecording {
  std::vector<RecordedCall> calls = {
      call("aten::_to_copy", {A::tensor(1)}, 3),
      call("aten::pow.Tensor_Scalar", {A::tensor(3), A::number(2)}, 4),
      call("aten::mean.dim", {A::tensor(4), A::intList({-1}), A::boolean(true), A::none()}, 5),
      call("aten::add.Tensor", {A::tensor(5), A::number(1e-6), A::number(1)}, 6),
      call("aten::rsqrt", {A::tensor(6)}, 7),
      call("aten::mul.Tensor", {A::tensor(3), A::tensor(7)}, 8),
      call("aten::_to_copy", {A::tensor(8)}, 9),
      call("aten::mul.Tensor", {A::tensor(2), A::tensor(9)}, 10),
  };
  TensorMetas metas = {
      {1, contiguous("bfloat16", {2, 8, 64})}, {2, contiguous("bfloat16", {64})},
      {3, contiguous("float32", {2, 8, 64})},  {4, contiguous("float32", {2, 8, 64})},
      {5, contiguous("float32", {2, 8, 1})},   {6, contiguous("float32", {2, 8, 1})},
      {7, contiguous("float32", {2, 8, 1})},   {8, contiguous("float32", {2, 8, 64})},
      {9, contiguous("bfloat16", {2, 8, 64})}, {10, contiguous("bfloat16", {2, 8, 64})},
  };
};

void expectRefused(const std::vector<RecordedCall>& calls, const TensorMetas& metas, const std::string& needle,
                   const std::vector<int64_t>& live = {}) {
  const ChainBuild b = buildChain(calls, metas, live);
  EXPECT_FALSE(b.ok()) << "built a chain; expected a refusal holding '" << needle << "'";
  EXPECT_NE(b.reason.find(needle), std::string::npos) << b.reason;
}

TEST(ChainBuilderTest, GivenHfRmsNormRecordedWhenBuiltThenItIsTheRmsNormChainOverTheFoldedView) {
  const RmsNormRecording r;
  const ChainBuild b = buildChain(r.calls, r.metas);
  ASSERT_TRUE(b.ok()) << b.reason;
  EXPECT_EQ(b.rows, 16);
  EXPECT_EQ(b.cols, 64);
  EXPECT_EQ(b.inputValues, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(b.outputValues, std::vector<int64_t>{10});
  EXPECT_EQ(chainKey(b.chain).text, chainKey(rmsNormChain(DType::BFloat16, 1e-6)).text);
}

TEST(ChainBuilderTest, GivenSwigluGeluAndRsubRecordedWhenBuiltThenTheChainsAreTheNamedOnes) {
  TensorMetas m;
  for (int64_t id = 1; id <= 12; ++id) m[id] = contiguous("float16", {4, 96});
  const ChainBuild swiglu = buildChain(
      {call("aten::silu", {A::tensor(1)}, 3), call("aten::mul.Tensor", {A::tensor(3), A::tensor(2)}, 4)}, m);
  ASSERT_TRUE(swiglu.ok()) << swiglu.reason;
  EXPECT_EQ(chainKey(swiglu.chain).sha256, chainKey(swigluChain(DType::Float16)).sha256);
  const ChainBuild gelu = buildChain(
      {call("aten::mul.Tensor", {A::tensor(1), A::number(0.5)}, 2),
       call("aten::pow.Tensor_Scalar", {A::tensor(1), A::number(3.0)}, 3),
       call("aten::mul.Tensor", {A::tensor(3), A::number(0.044715)}, 4),
       call("aten::add.Tensor", {A::tensor(1), A::tensor(4)}, 5),
       call("aten::mul.Tensor", {A::tensor(5), A::number(std::sqrt(2.0 / M_PI))}, 6),
       call("aten::tanh", {A::tensor(6)}, 7), call("aten::add.Tensor", {A::tensor(7), A::number(1.0)}, 8),
       call("aten::mul.Tensor", {A::tensor(2), A::tensor(8)}, 9)},
      m);
  ASSERT_TRUE(gelu.ok()) << gelu.reason;
  EXPECT_EQ(chainKey(gelu.chain).sha256, chainKey(newGeluChain(DType::Float16)).sha256);
  const ChainBuild rsub = buildChain({call("aten::rsub.Scalar", {A::tensor(1), A::number(1.0)}, 2),
                                      call("aten::gelu", {A::tensor(2), A::string("tanh")}, 3)},
                                     m);
  ASSERT_TRUE(rsub.ok()) << rsub.reason;
  const std::vector<Node>& n = rsub.chain.nodes();
  ASSERT_EQ(n.size(), 4u);
  EXPECT_EQ(n[2].op, OpKind::Sub);
  EXPECT_EQ(n[2].operands, (std::vector<int>{1, 0}));  // 1.0 - x
  EXPECT_EQ(n[3].op, OpKind::GeluTanh);
}

TEST(ChainBuilderTest, GivenLiveOutputsWhenBuiltThenDeadNodesAndTheirInputsAreDropped) {
  TensorMetas m;
  for (int64_t id = 1; id <= 6; ++id) m[id] = contiguous("float32", {3, 5});
  const std::vector<RecordedCall> calls = {call("aten::exp", {A::tensor(1)}, 3),
                                           call("aten::mul.Tensor", {A::tensor(3), A::number(2.0)}, 4),
                                           call("aten::neg", {A::tensor(2)}, 5)};
  const ChainBuild all = buildChain(calls, m);
  ASSERT_TRUE(all.ok()) << all.reason;
  EXPECT_EQ(all.outputValues, (std::vector<int64_t>{4, 5}));  // the values no later call reads
  EXPECT_EQ(all.inputValues, (std::vector<int64_t>{1, 2}));
  const ChainBuild one = buildChain(calls, m, {4});
  ASSERT_TRUE(one.ok()) << one.reason;
  EXPECT_EQ(one.inputValues, std::vector<int64_t>{1});  // %2 fed only the dead neg
  EXPECT_EQ(one.chain.size(), 4u);                      // input, exp, constant, mul
  const ChainBuild both = buildChain(calls, m, {3, 4});  // an intermediate read after the chain
  ASSERT_TRUE(both.ok()) << both.reason;
  EXPECT_EQ(both.chain.outputs().size(), 2u);
  expectRefused(calls, m, "live output %9 is not a value the calls return", {9});
}

TEST(ChainBuilderTest, GivenAReductionWithDtypeWhenBuiltThenAWideningCastPrecedesIt) {
  TensorMetas m = {{1, contiguous("bfloat16", {4, 32})}, {2, contiguous("float32", {4})}};
  const ChainBuild b = buildChain(
      {call("aten::sum.dim_IntList", {A::tensor(1), A::intList({1}), A::boolean(false), A::string("float32")}, 2)},
      m);
  ASSERT_TRUE(b.ok()) << b.reason;
  ASSERT_EQ(b.chain.size(), 3u);
  EXPECT_EQ(b.chain.nodes()[1].op, OpKind::Cast);
  EXPECT_EQ(b.chain.nodes()[2].shape, ShapeClass::RowFlat);
  m[2] = contiguous("bfloat16", {4});
  m[1] = contiguous("float32", {4, 32});
  expectRefused({call("aten::sum.dim_IntList", {A::tensor(1), A::intList({-1}), A::boolean(false)}, 2)}, m,
                "narrows a float32 reduction");
}

TEST(ChainBuilderTest, GivenWhatEndsAChainWhenBuiltThenTheReasonNamesTheCallAndTheRule) {
  TensorMetas m;
  for (int64_t id = 1; id <= 6; ++id) m[id] = contiguous("bfloat16", {16, 64});
  expectRefused({call("aten::add_.Tensor", {A::tensor(1), A::tensor(2)}, 1)}, m, "call 0 (aten::add_.Tensor(%1, %2)");
  expectRefused({call("aten::add_.Tensor", {A::tensor(1), A::tensor(2)}, 1)}, m, "in-place op");
  expectRefused({call("aten::mul.out", {A::tensor(1), A::tensor(2), A::tensor(3)}, 3)}, m, "out= op");
  expectRefused({call("aten::exp", {A::tensor(1)}, 3), call("aten::view", {A::tensor(3), A::intList({64, 16})}, 4)},
                m, "call 1 (aten::view(%3, [64, 16]) -> (%4)): view op");
  expectRefused({call("aten::cat", {A::tensor(1), A::tensor(2)}, 3)}, m, "unsupported op");
  expectRefused({call("aten::div.Tensor_mode", {A::tensor(1), A::tensor(2), A::string("floor")}, 3)}, m,
                "unsupported op");
  expectRefused({call("aten::mul.Tensor", {A::tensor(1), A::tensor(2)}, 1)}, m, "aliases an argument");
  expectRefused({call("aten::gelu", {A::tensor(1), A::string("sigmoid")}, 3)}, m, "approximate='sigmoid'");
  expectRefused({call("aten::mean.dim", {A::tensor(1), A::intList({0}), A::boolean(true)}, 3)}, m,
                "reduces dim 0 of a 2-d tensor");
  expectRefused({call("aten::amax", {A::tensor(1), A::intList({}), A::boolean(false)}, 3)}, m,
                "a chain reduces the last dim alone");
  expectRefused({call("aten::exp", {A::tensor(1)}, 3), call("aten::exp", {A::tensor(2)}, 3)}, m,
                "already returned");
  // Non-contiguous: a transposed [64, 16] view read as [16, 64].
  TensorMetas t = m;
  t[2] = TensorMeta{"bfloat16", {16, 64}, {1, 16}};
  expectRefused({call("aten::add.Tensor", {A::tensor(1), A::tensor(2)}, 3)}, t, "value %2 is not contiguous");
  // A broadcast that is no chain class.
  TensorMetas half = m;
  half[2] = contiguous("bfloat16", {32});
  expectRefused({call("aten::mul.Tensor", {A::tensor(1), A::tensor(2)}, 3)}, half, "not a chain broadcast");
  TensorMetas oneElem = m;
  oneElem[2] = contiguous("bfloat16", {});
  expectRefused({call("aten::mul.Tensor", {A::tensor(1), A::tensor(2)}, 3)}, oneElem, "not a chain broadcast");
  // Dtypes: a tensor no chain holds; a result that is not ATen's promotion.
  TensorMetas ints = m;
  ints[2] = contiguous("int64", {16, 64});
  expectRefused({call("aten::mul.Tensor", {A::tensor(1), A::tensor(2)}, 3)}, ints, "value %2 is int64");
  TensorMetas mixed = m;
  mixed[2] = contiguous("float32", {16, 64});
  expectRefused({call("aten::mul.Tensor", {A::tensor(1), A::tensor(2)}, 3)}, mixed,
                "is bfloat16 where ATen's promotion gives float32");
  // A result whose sizes are not its class.
  TensorMetas wide = m;
  wide[3] = contiguous("bfloat16", {16, 1});
  expectRefused({call("aten::exp", {A::tensor(1)}, 3)}, wide, "is row where its operands give full");
  TensorMetas missing = m;
  missing.erase(2);
  expectRefused({call("aten::mul.Tensor", {A::tensor(1), A::tensor(2)}, 3)}, missing, "value %2 has no tensor metadata");
  EXPECT_EQ(buildChain({}, m).reason, "no calls");
}

}  // namespace
}  // namespace hotkernel::chain
