// Tests of buildChain (ChainBuilder.h): HF's chains as the dispatcher
// records them become the named chains; everything that ends a chain is
// refused with its reason.

#include "hotkernel/chain/ChainBuilder.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "hotkernel/chain/ChainCodegen.h"
#include "hotkernel/chain/ChainKey.h"
#include "hotkernel/chain/ChainLayout.h"
#include "hotkernel/chain/NamedChains.h"
#include "hotkernel/chain/Rounding.h"
#include "RecordedCalls.h"

namespace hotkernel::chain {
namespace {

using A = RecordedArg;
using testutil::call;
using testutil::contiguous;
using testutil::expectRefused;

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
  expectRefused({call("aten::stack", {A::tensorList({1, 2}), A::number(-1)}, 3)}, m, "unsupported op");
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

// HF's rotary embedding as the dispatcher delivers it, for q (32 heads) and
// k (8 heads), batch 1 and 2, bf16 and fp16.
TEST(ChainBuilderTest, GivenHfRotaryRecordedWhenBuiltWithLayoutsThenItIsTheRotaryChainInItsStridedLayout) {
  for (const DType dtype : {DType::BFloat16, DType::Float16}) {
    for (const RotaryShape shape : {RotaryShape{1, 32, 4096, 128}, RotaryShape{1, 8, 4096, 128},
                                    RotaryShape{2, 4, 64, 64}}) {
      const RecordedChain r = rotaryRecording(dtype, shape);
      const ChainBuild b = buildChain(r.calls, r.metas, {}, ChainBuildOptions{true});
      ASSERT_TRUE(b.ok()) << b.reason;
      EXPECT_EQ(b.rows, shape.batch * shape.heads * shape.seq);
      EXPECT_EQ(b.cols, shape.headDim);
      EXPECT_EQ(b.inputValues, (std::vector<int64_t>{1, 2, 5, 4, 3}));  // x, cos, x2, x1, sin
      EXPECT_EQ(b.outputValues, std::vector<int64_t>{10});
      EXPECT_EQ(b.chain, rotaryChain(dtype, shape.headDim));
      EXPECT_EQ(b.layout, rotaryLayout(shape));
      // The row space keeps the heads apart from the positions (x's rows are not evenly spaced),
      // drops the batch of 1, and broadcasts cos and sin over the heads.
      const std::vector<int64_t> dims = shape.batch == 1 ? std::vector<int64_t>{shape.heads, shape.seq}
                                                         : std::vector<int64_t>{shape.batch, shape.heads, shape.seq};
      EXPECT_EQ(b.layout.rowDims, dims);
      const int64_t d = shape.headDim;
      EXPECT_EQ(b.layout.strides[1].back(), d);                  // cos: one row a position
      EXPECT_EQ(b.layout.strides[1][dims.size() - 2], 0);        // ... shared by the heads
      EXPECT_EQ(b.layout.strides[0][dims.size() - 2], d);        // x: a head is d further
      EXPECT_EQ(b.layout.strides[0].back(), shape.heads * d);    // ... a position heads * d
      EXPECT_EQ(b.layout.strides[5], b.layout.strides[0]);       // the output follows x * cos
    }
  }
}

TEST(ChainBuilderTest, GivenHfRotaryWithoutLayoutsOrAlteredWhenBuiltThenTheReasonNamesWhatIsNotAChain) {
  const RotaryShape shape{1, 4, 16, 32};
  const RecordedChain r = rotaryRecording(DType::BFloat16, shape);
  // The engine's default: no layouts, so the transposed x is refused as before.
  const ChainBuild plain = buildChain(r.calls, r.metas);
  EXPECT_FALSE(plain.ok());
  EXPECT_NE(plain.reason.find("value %1 is not contiguous"), std::string::npos) << plain.reason;
  const ChainBuildOptions layouts{true};
  auto expectLayoutRefused = [&](std::vector<RecordedCall> calls, const TensorMetas& metas, const std::string& needle) {
    const ChainBuild b = buildChain(calls, metas, {}, layouts);
    EXPECT_FALSE(b.ok()) << "built; expected a refusal holding '" << needle << "'";
    EXPECT_NE(b.reason.find(needle), std::string::npos) << b.reason;
  };
  // A cat along another dim.
  std::vector<RecordedCall> otherDim = r.calls;
  otherDim[2].args[1] = A::number(1);
  expectLayoutRefused(otherDim, r.metas, "cat along dim 1 of 4-d tensors");
  // A result whose strides are not the ones ATen allocates (neg(x2) recorded contiguous).
  TensorMetas denseNeg = r.metas;
  denseNeg[7].strides = {4 * 16 * 16, 16 * 16, 16, 1};
  expectLayoutRefused(r.calls, denseNeg, "the result %7 has strides [1024, 256, 16, 1] where ATen allocates");
  // An output written with the wrong layout (the sum recorded contiguous).
  TensorMetas denseSum = r.metas;
  denseSum[10].strides = {4 * 16 * 32, 16 * 32, 32, 1};
  expectLayoutRefused(r.calls, denseSum, "the result %10 has strides");
  // The last dim read with a stride.
  TensorMetas strided = r.metas;
  strided[3].strides = {16 * 64, 16 * 64, 64, 2};
  expectLayoutRefused(r.calls, strided, "has its columns at stride 2: only a lone copy (a transpose) reads such a value");
  // A part whose leading dims differ from the other's.
  TensorMetas shorter = r.metas;
  shorter[4].sizes = {1, 4, 8, 16};
  expectLayoutRefused(r.calls, shorter, "the parts differ in a leading dim");
  // cat * sin with a sin table of another extent than the cat's.
  TensorMetas narrowSin = r.metas;
  narrowSin[3] = TensorMeta{"bfloat16", {1, 1, 16, 16}, {256, 256, 16, 1}};
  expectLayoutRefused(r.calls, narrowSin, "column extents 32 and 16");
  // A broadcast over a middle dim that is not a size-1 dim.
  TensorMetas otherSeq = r.metas;
  otherSeq[2] = TensorMeta{"bfloat16", {1, 1, 8, 32}, {256, 256, 32, 1}};
  expectLayoutRefused(r.calls, otherSeq, "do not broadcast to the chain's [1, 4, 16, 32]");
}

TEST(ChainBuilderTest, GivenATensorIteratorOpOnPermutedOperandsWhenBuiltThenTheResultMustFollowTheFirstDecidingOperand) {
  // [4, 8] tensors: %1 transposed (column-major), %2 contiguous.
  TensorMetas m;
  m[1] = TensorMeta{"float32", {4, 8}, {1, 4}};
  m[2] = contiguous("float32", {4, 8});
  // add(%1 transposed, %2): the first operand decides, the result is column-major too ...
  m[3] = TensorMeta{"float32", {4, 8}, {1, 4}};
  // ... but the chain writes rows with stride 1, so a column-major result is no chain value (and a column-major
  // operand is only a transposed copy's: Note [Transposed layouts]).
  const ChainBuild t = buildChain({call("aten::add.Tensor", {A::tensor(1), A::tensor(2)}, 3)}, m, {},
                                  ChainBuildOptions{true});
  EXPECT_FALSE(t.ok());
  EXPECT_NE(t.reason.find("is an output with column stride 4"), std::string::npos) << t.reason;
  m[3] = contiguous("float32", {4, 8});
  const ChainBuild u = buildChain({call("aten::add.Tensor", {A::tensor(2), A::tensor(1)}, 3)}, m, {},
                                  ChainBuildOptions{true});
  EXPECT_FALSE(u.ok());
  EXPECT_NE(u.reason.find("has its columns at stride 4: only a lone copy"), std::string::npos) << u.reason;
  // [2, 3, 8] with %1 permuted over the leading dims: add(%2, %1) is contiguous (the first decides),
  // add(%1, %2) takes %1's order.
  TensorMetas p;
  p[1] = TensorMeta{"float32", {2, 3, 8}, {8, 16, 1}};
  p[2] = contiguous("float32", {2, 3, 8});
  p[3] = contiguous("float32", {2, 3, 8});
  p[4] = TensorMeta{"float32", {2, 3, 8}, {8, 16, 1}};
  const ChainBuild firstContiguous = buildChain({call("aten::add.Tensor", {A::tensor(2), A::tensor(1)}, 3)}, p, {},
                                                ChainBuildOptions{true});
  ASSERT_TRUE(firstContiguous.ok()) << firstContiguous.reason;
  const ChainBuild firstPermuted = buildChain({call("aten::add.Tensor", {A::tensor(1), A::tensor(2)}, 4)}, p, {},
                                              ChainBuildOptions{true});
  ASSERT_TRUE(firstPermuted.ok()) << firstPermuted.reason;
  EXPECT_EQ(firstPermuted.layout.rowDims, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(firstPermuted.layout.strides[2], (std::vector<int64_t>{8, 16}));  // the output
  // The other way round each is refused.
  const ChainBuild wrong = buildChain({call("aten::add.Tensor", {A::tensor(1), A::tensor(2)}, 3)}, p, {},
                                      ChainBuildOptions{true});
  EXPECT_FALSE(wrong.ok());
  EXPECT_NE(wrong.reason.find("where ATen allocates [8, 16, 1]"), std::string::npos) << wrong.reason;
  // A wrapped number makes the shapes unequal: the general path, still %1's order.
  p[5] = TensorMeta{"float32", {2, 3, 8}, {8, 16, 1}};
  const ChainBuild scaled = buildChain({call("aten::mul.Tensor", {A::tensor(1), A::number(0.5)}, 5)}, p, {},
                                       ChainBuildOptions{true});
  EXPECT_TRUE(scaled.ok()) << scaled.reason;
  // A cast keeps a dense permuted layout (empty_like preserves it).
  TensorMetas c = p;
  c[6] = TensorMeta{"bfloat16", {2, 3, 8}, {8, 16, 1}};
  const ChainBuild cast = buildChain({call("aten::_to_copy", {A::tensor(1)}, 6)}, c, {}, ChainBuildOptions{true});
  EXPECT_TRUE(cast.ok()) << cast.reason;
}

TEST(ChainBuilderTest, GivenACatOfContiguousPartsWhenBuiltThenTheChainIsWidthFixedAndContiguous) {
  TensorMetas m;
  m[1] = contiguous("float16", {8, 16});
  m[2] = contiguous("float32", {8, 48});
  m[3] = contiguous("float32", {8, 64});
  m[4] = contiguous("float32", {8, 64});
  // cat([a (f16), b (f32)], 1): the promotion is float32; the dim as a positive number.
  const ChainBuild b = buildChain({call("aten::cat", {A::tensorList({1, 2}), A::number(1)}, 3),
                                   call("aten::exp", {A::tensor(3)}, 4)},
                                  m);
  ASSERT_TRUE(b.ok()) << b.reason;
  EXPECT_TRUE(b.layout.contiguous());
  EXPECT_EQ(b.chain.width(), 64);
  EXPECT_EQ(b.chain.node(0).cols, 16);
  EXPECT_EQ(b.chain.node(1).cols, 48);
  EXPECT_EQ(b.chain.node(2).op, OpKind::Cat);
  EXPECT_EQ(b.chain.node(2).dtype, DType::Float32);
}

}  // namespace
}  // namespace hotkernel::chain

namespace hotkernel::chain {
namespace {

std::vector<RecordedCall> softmaxCall(const char* op, bool halfToFloat) {
  return {call(op, {A::tensor(1), A::number(-1), A::boolean(halfToFloat)}, 2)};
}

TEST(ChainBuilderTest, GivenSoftmaxAndLogSoftmaxRecordedWhenBuiltThenTheyAreTheSoftmaxChains) {
  for (DType d : {DType::Float32, DType::Float16, DType::BFloat16}) {
    const TensorMetas m = {{1, contiguous(dtypeName(d), {3, 5, 40})}, {2, contiguous(dtypeName(d), {3, 5, 40})}};
    for (bool log : {false, true}) {
      const ChainBuild b = buildChain(softmaxCall(log ? "aten::_log_softmax" : "aten::_softmax", false), m);
      ASSERT_TRUE(b.ok()) << b.reason;
      EXPECT_EQ(b.rows, 15);
      EXPECT_EQ(b.cols, 40);
      EXPECT_EQ(chainKey(b.chain).sha256, chainKey(softmaxChain(d, log)).sha256) << dtypeName(d) << " log " << log;
      EXPECT_TRUE(b.chain.hasReductions());
    }
  }
}

TEST(ChainBuilderTest, GivenHalfToFloatWhenBuiltThenTheResultIsFloat32AndAResultOfAnotherDtypeIsRefused) {
  TensorMetas m = {{1, contiguous("float16", {4, 64})}, {2, contiguous("float32", {4, 64})}};
  const ChainBuild b = buildChain(softmaxCall("aten::_softmax", true), m);
  ASSERT_TRUE(b.ok()) << b.reason;
  EXPECT_EQ(b.chain.node(b.chain.outputs()[0]).dtype, DType::Float32);
  expectRefused(softmaxCall("aten::_softmax", false), m, "half_to_float=False");
  m[2] = contiguous("float16", {4, 64});
  expectRefused(softmaxCall("aten::_softmax", true), m, "half_to_float=True");
}

TEST(ChainBuilderTest, GivenSoftmaxOverAnotherDimOrAStridedResultWhenBuiltThenItIsRefused) {
  const TensorMetas m = {{1, contiguous("float32", {4, 8, 16})}, {2, contiguous("float32", {4, 8, 16})}};
  expectRefused({call("aten::_softmax", {A::tensor(1), A::number(1), A::boolean(false)}, 2)}, m,
                "softmax over dim 1");
  expectRefused({call("aten::_softmax", {A::tensor(1), A::intList({-1}), A::boolean(false)}, 2)}, m,
                "softmax's dim must be a number");
  TensorMetas strided = m;
  strided[2].strides = {16, 64, 1};  // not what ATen allocates (contiguous)
  expectRefused(softmaxCall("aten::_softmax", false), strided, "strides");
}

TEST(ChainBuilderTest, GivenASoftmaxOfATransposedInputWhenBuiltWithLayoutsThenItReadsTheStridesAndWritesContiguous) {
  // ATen's softmax takes any input strides and allocates its result contiguous.
  const TensorMetas m = {{1, TensorMeta{"bfloat16", {4, 8, 32}, {32, 128, 1}}}, {2, contiguous("bfloat16", {4, 8, 32})}};
  const ChainBuild b = buildChain(softmaxCall("aten::_softmax", false), m, {}, ChainBuildOptions{true});
  ASSERT_TRUE(b.ok()) << b.reason;
  EXPECT_FALSE(b.layout.contiguous());
  EXPECT_FALSE(buildChain(softmaxCall("aten::_softmax", false), m).ok());  // without layouts
}

TEST(ChainBuilderTest, GivenGpt2EagerAttentionScoresRecordedWhenBuiltThenTheMaskIsBroadcastOverTheHeads) {
  const AttentionShape shape{2, 3, 8, 16};
  const double scale = 0.125;
  for (DType d : {DType::Float16, DType::BFloat16, DType::Float32}) {
    const RecordedChain r = attentionSoftmaxRecording(d, shape, scale);
    const ChainBuild b = buildChain(r.calls, r.metas, {5}, ChainBuildOptions{true});
    ASSERT_TRUE(b.ok()) << b.reason;
    EXPECT_EQ(b.rows, attentionRows(shape));
    EXPECT_EQ(b.cols, 16);
    EXPECT_EQ(b.inputValues, (std::vector<int64_t>{1, 2}));
    EXPECT_EQ(chainKey(b.chain).sha256, chainKey(attentionSoftmaxChain(d, scale)).sha256);
    EXPECT_EQ(layoutText(b.layout), layoutText(attentionSoftmaxLayout(shape)));
    EXPECT_FALSE(buildChain(r.calls, r.metas, {5}).ok());  // the broadcast mask needs layouts
  }
}

// Note [Relayout copies]: q's head view of GPT-2's fused QKV projection ([b, s, 3 * h * d] viewed as
// [b, h, s, d]) copied contiguous, as matmul's reshape does.
TEST(ChainBuilderTest, GivenACloneOfAHeadViewWhenBuiltThenItIsARelayoutCopyAndOtherClonesAreNot) {
  const int64_t b = 2, h = 3, s = 5, d = 8;
  const TensorMeta head{"float16", {b, h, s, d}, {s * 3 * h * d, d, 3 * h * d, 1}};
  const std::vector<RecordedCall> contiguousClone = {call("aten::clone", {A::tensor(1), A::number(0)}, 2)};
  const TensorMetas m = {{1, head}, {2, contiguous("float16", {b, h, s, d})}};
  const ChainBuild copy = buildChain(contiguousClone, m, {2}, ChainBuildOptions{true});
  ASSERT_TRUE(copy.ok()) << copy.reason;
  EXPECT_TRUE(isRelayoutCopy(copy));
  ASSERT_EQ(copy.chain.size(), 2u);
  EXPECT_EQ(copy.chain.node(1).op, OpKind::Cast);
  EXPECT_EQ(copy.chain.node(1).dtype, DType::Float16);
  EXPECT_EQ(copy.rows, b * h * s);
  EXPECT_FALSE(copy.layout.contiguous());
  // Preserve (the default; None the same) of a non-dense view keeps its order of dims, densely (empty_like:
  // (batch, seq, heads, dim) as the projection had them); a contiguous result is then refused.
  const TensorMeta preserved{"float16", {b, h, s, d}, {s * h * d, d, h * d, 1}};
  for (const A& format : {A::number(1), A::none()}) {
    const std::vector<RecordedCall> clone = {call("aten::clone", {A::tensor(1), format}, 2)};
    EXPECT_TRUE(isRelayoutCopy(buildChain(clone, {{1, head}, {2, preserved}}, {2}, ChainBuildOptions{true})));
    expectRefused(clone, m, "strides");
  }
  // The attention output's transpose back (GPT-2's merge of the heads: [b, h, s, d] viewed as [b, s, h, d],
  // reshape's contiguous clone) is one too.
  const TensorMeta merged{"float16", {b, s, h, d}, {h * s * d, d, s * d, 1}};
  const ChainBuild back = buildChain(contiguousClone, {{1, merged}, {2, contiguous("float16", {b, s, h, d})}}, {2},
                                     ChainBuildOptions{true});
  ASSERT_TRUE(back.ok()) << back.reason;
  EXPECT_TRUE(isRelayoutCopy(back));
  // A clone of a contiguous value changes no layout: a chain, but no relayout copy.
  const TensorMetas dense = {{1, contiguous("float16", {b, h, s, d})}, {2, contiguous("float16", {b, h, s, d})}};
  const ChainBuild plain = buildChain(contiguousClone, dense, {2}, ChainBuildOptions{true});
  ASSERT_TRUE(plain.ok()) << plain.reason;
  EXPECT_FALSE(isRelayoutCopy(plain));
  // The result's strides must be the format's; channels_last is no chain format.
  TensorMetas wrongStrides = m;
  wrongStrides[2] = head;
  expectRefused(contiguousClone, wrongStrides, "strides");
  expectRefused({call("aten::clone", {A::tensor(1), A::number(2)}, 2)}, m, "memory format 2");
  // k's transpose (last-dim stride 3hd, stride 1 in its head dim) is a transposed copy (Note [Transposed
  // layouts]): the head view's layout with column strides, as headTransposeCopyLayout writes it.
  const TensorMetas transposed = {{1, TensorMeta{"float16", {b, h, d, s}, {s * 3 * h * d, d, 1, 3 * h * d}}},
                                  {2, contiguous("float16", {b, h, d, s})}};
  const ChainBuild kt = buildChain(contiguousClone, transposed, {2}, ChainBuildOptions{true});
  ASSERT_TRUE(kt.ok()) << kt.reason;
  EXPECT_TRUE(isRelayoutCopy(kt));
  EXPECT_TRUE(kt.layout.transposed());
  EXPECT_EQ(kt.layout, headTransposeCopyLayout(RotaryShape{b, h, s, d}, 3)) << layoutText(kt.layout);
  EXPECT_EQ(kt.cols, s);
  // NHWC to NCHW (a permute(0, 3, 1, 2) made contiguous): the channels, at stride 1, are a middle row dim of the
  // result's view; they go last, so the tile reads along them.
  const int64_t n = 2, hh = 3, w = 5, c = 8;
  const TensorMetas nhwc = {{1, TensorMeta{"float16", {n, c, hh, w}, {hh * w * c, 1, w * c, c}}},
                            {2, contiguous("float16", {n, c, hh, w})}};
  const ChainBuild toNchw = buildChain(contiguousClone, nhwc, {2}, ChainBuildOptions{true});
  ASSERT_TRUE(toNchw.ok()) << toNchw.reason;
  EXPECT_TRUE(isRelayoutCopy(toNchw));
  EXPECT_EQ(layoutText(toNchw.layout), "2x3x8:120,40,1@8|120,5,15@1");
  // Without the default's layouts it is no chain; with its head dim not at stride 1 it is none either.
  EXPECT_FALSE(buildChain(contiguousClone, transposed, {2}).ok());
  TensorMetas gathered = transposed;
  gathered[1].strides = {s * 3 * h * d, d, 2, 3 * h * d};
  const ChainBuild g = buildChain(contiguousClone, gathered, {2}, ChainBuildOptions{true});
  EXPECT_FALSE(g.ok());
  EXPECT_NE(g.reason.find("stride 1 in its innermost row dim"), std::string::npos) << g.reason;
  // A cast of the head view to another dtype (`.float()`, contiguous: empty_like of a non-dense view) is one
  // too; a cast followed by another op is a chain of more nodes, no lone copy.
  const TensorMeta widenedOut{"float32", {b, h, s, d}, {s * h * d, d, h * d, 1}};  // empty_like's order
  const TensorMetas widened = {{1, head}, {2, widenedOut}, {3, widenedOut}};
  EXPECT_TRUE(isRelayoutCopy(buildChain({call("aten::_to_copy", {A::tensor(1)}, 2)}, widened, {2}, ChainBuildOptions{true})));
  const ChainBuild twoOps = buildChain({call("aten::_to_copy", {A::tensor(1)}, 2), call("aten::neg", {A::tensor(2)}, 3)},
                                       widened, {3}, ChainBuildOptions{true});
  ASSERT_TRUE(twoOps.ok()) << twoOps.reason;
  EXPECT_FALSE(isRelayoutCopy(twoOps));
}

// GPT-2's block: `hidden = attn_output + residual`, then `ln_2(hidden)` (Note [LayerNorm in a chain]).
TEST(ChainBuilderTest, GivenAResidualAddAndALayerNormRecordedWhenBuiltThenTheNormIsTwoRowMeansInFloat32) {
  for (DType d : {DType::Float32, DType::BFloat16, DType::Float16}) {
    const char* type = dtypeName(d);
    const TensorMetas m = {
        {1, contiguous(type, {2, 8, 64})},   {2, contiguous(type, {2, 8, 64})},  {3, contiguous(type, {64})},
        {4, contiguous(type, {64})},         {5, contiguous(type, {2, 8, 64})},  {6, contiguous(type, {2, 8, 64})},
        {7, contiguous("float32", {2, 8, 1})}, {8, contiguous("float32", {2, 8, 1})},
    };
    const std::vector<RecordedCall> calls = {
        call("aten::add.Tensor", {A::tensor(1), A::tensor(2), A::number(1)}, 5),
        RecordedCall{"aten::native_layer_norm",
                     {A::tensor(5), A::intList({64}), A::tensor(3), A::tensor(4), A::number(1e-5)},
                     {6, 7, 8}},
    };
    // The residual sum is kept (the block adds it again after the MLP), the mean and rstd are dropped.
    const ChainBuild b = buildChain(calls, m, {5, 6});
    ASSERT_TRUE(b.ok()) << type << ": " << b.reason;
    EXPECT_EQ(b.rows, 16);
    EXPECT_EQ(b.cols, 64);
    EXPECT_EQ(b.inputValues, (std::vector<int64_t>{1, 2, 3, 4}));
    EXPECT_EQ(b.outputValues, (std::vector<int64_t>{5, 6}));
    int means = 0;
    for (const Node& n : b.chain.nodes()) means += n.op == OpKind::Mean ? 1 : 0;
    EXPECT_EQ(means, 2) << "the mean, then the variance";
    EXPECT_EQ(b.chain.node(b.chain.outputs()[1]).dtype, d);
    EXPECT_EQ(chainKey(b.chain).sha256, chainKey(residualLayerNormChain(d, 1e-5)).sha256) << type;
    // Every result, the statistics included, when all are live.
    const ChainBuild all = buildChain(calls, m, {5, 6, 7, 8});
    ASSERT_TRUE(all.ok()) << all.reason;
    EXPECT_EQ(all.chain.node(all.chain.outputs()[3]).dtype, DType::Float32);
    EXPECT_EQ(all.chain.node(all.chain.outputs()[3]).shape, ShapeClass::Row);
  }
}

TEST(ChainBuilderTest, GivenALayerNormOverMoreThanTheLastDimOrStridedOrMisshapedWhenBuiltThenItIsRefused) {
  const TensorMetas m = {
      {1, contiguous("float32", {4, 8, 16})}, {3, contiguous("float32", {16})},      {4, contiguous("float32", {8, 16})},
      {6, contiguous("float32", {4, 8, 16})}, {7, contiguous("float32", {4, 8, 1})}, {8, contiguous("float32", {4, 8, 1})},
  };
  auto norm = [](std::vector<int64_t> shape, A weight) {
    return std::vector<RecordedCall>{RecordedCall{
        "aten::native_layer_norm", {A::tensor(1), A::intList(std::move(shape)), weight, A::none(), A::number(1e-5)},
        {6, 7, 8}}};
  };
  ASSERT_TRUE(buildChain(norm({16}, A::tensor(3)), m).ok());
  ASSERT_TRUE(buildChain(norm({16}, A::none()), m).ok());
  expectRefused(norm({8, 16}, A::none()), m, "normalizes the last dim alone");
  expectRefused(norm({16}, A::tensor(4)), m, "the weight is not a [16] tensor");
  TensorMetas strided = m;
  strided[1].strides = {16, 64, 1};
  expectRefused(norm({16}, A::none()), strided, "not contiguous");
  expectRefused({RecordedCall{"aten::native_layer_norm",
                              {A::tensor(1), A::intList({16}), A::none(), A::none(), A::number(1e-5)}, {6}}},
                m, "returns 3");
}

TEST(ChainBuilderTest, GivenTheSecondPointwiseVocabularyRecordedWhenBuiltThenEachOpIsItsNode) {
  TensorMetas m;
  for (int64_t id = 1; id <= 4; ++id) m[id] = contiguous("float32", {4, 32});
  for (const auto& [op, kind] : std::vector<std::pair<std::string, OpKind>>{
           {"aten::sin", OpKind::Sin}, {"aten::cos", OpKind::Cos}, {"aten::erf", OpKind::Erf},
           {"aten::log1p", OpKind::Log1p}, {"aten::expm1", OpKind::Expm1}, {"aten::hardsigmoid", OpKind::Hardsigmoid},
           {"aten::hardswish", OpKind::Hardswish}, {"aten::mish", OpKind::Mish}}) {
    const ChainBuild b = buildChain({call(op, {A::tensor(1)}, 3)}, m);
    ASSERT_TRUE(b.ok()) << op << ": " << b.reason;
    ASSERT_EQ(b.chain.size(), 2u) << op;
    EXPECT_EQ(b.chain.node(1).op, kind) << op;
  }
  // Note [Softplus and Mish in a chain]: softplus with ATen's defaults (given or not) only.
  for (const std::vector<A>& args : std::vector<std::vector<A>>{
           {A::tensor(1)}, {A::tensor(1), A::number(1), A::number(20)}, {A::tensor(1), A::none(), A::none()}}) {
    const ChainBuild softplus = buildChain({call("aten::softplus", args, 3)}, m);
    ASSERT_TRUE(softplus.ok()) << softplus.reason;
    EXPECT_EQ(softplus.chain.node(1).op, OpKind::Softplus);
  }
  expectRefused({call("aten::softplus", {A::tensor(1), A::number(2), A::number(20)}, 3)}, m,
                "softplus with beta 2 and threshold 20");
  expectRefused({call("aten::softplus", {A::tensor(1), A::number(1), A::number(10)}, 3)}, m, "threshold 10");
  // leaky_relu carries its slope: the default 0.01, or the call's; two slopes are two chains.
  const ChainBuild leaky = buildChain({call("aten::leaky_relu", {A::tensor(1), A::number(0.2)}, 3)}, m);
  ASSERT_TRUE(leaky.ok()) << leaky.reason;
  EXPECT_EQ(leaky.chain.node(1).op, OpKind::LeakyRelu);
  EXPECT_EQ(leaky.chain.node(1).scalar, 0.2);
  const ChainBuild byDefault = buildChain({call("aten::leaky_relu", {A::tensor(1), A::none()}, 3)}, m);
  ASSERT_TRUE(byDefault.ok()) << byDefault.reason;
  EXPECT_EQ(byDefault.chain.node(1).scalar, 0.01);
  EXPECT_NE(chainKey(leaky.chain).sha256, chainKey(byDefault.chain).sha256);
  expectRefused({call("aten::leaky_relu", {A::tensor(1), A::number(INFINITY)}, 3)}, m, "not finite");
  // hardswish(x) then maximum with another tensor: one chain, the maximum NaN-propagating.
  const ChainBuild both = buildChain(
      {call("aten::hardswish", {A::tensor(1)}, 3), call("aten::minimum", {A::tensor(3), A::tensor(2)}, 4)}, m);
  ASSERT_TRUE(both.ok()) << both.reason;
  EXPECT_EQ(both.chain.node(both.chain.outputs()[0]).op, OpKind::Minimum);
  EXPECT_EQ(both.inputValues, (std::vector<int64_t>{1, 2}));
}

// Note [Clamp in a chain]: maximum with the lower bound, minimum with the upper, each bound rounded to the
// tensor's dtype as ATen's kernel rounds it before comparing.
TEST(ChainBuilderTest, GivenClampsRecordedWhenBuiltThenTheyAreMaximumAndMinimumWithBoundsInTheTensorsDtype) {
  TensorMetas m = {{1, contiguous("bfloat16", {4, 32})}, {3, contiguous("bfloat16", {4, 32})}};
  const ChainBuild b = buildChain({call("aten::clamp", {A::tensor(1), A::number(0.1), A::number(6.0)}, 3)}, m);
  ASSERT_TRUE(b.ok()) << b.reason;
  const Node& upper = b.chain.node(b.chain.outputs()[0]);
  ASSERT_EQ(upper.op, OpKind::Minimum);
  EXPECT_EQ(b.chain.node(upper.operands[1]).scalar, 6.0);
  const Node& lower = b.chain.node(upper.operands[0]);
  ASSERT_EQ(lower.op, OpKind::Maximum);
  EXPECT_EQ(b.chain.node(lower.operands[1]).scalar, 0.10009765625);  // bfloat16(0.1)
  EXPECT_EQ(upper.dtype, DType::BFloat16);

  const ChainBuild low = buildChain({call("aten::clamp_min", {A::tensor(1), A::number(-0.5)}, 3)}, m);
  ASSERT_TRUE(low.ok()) << low.reason;
  EXPECT_EQ(low.chain.node(low.chain.outputs()[0]).op, OpKind::Maximum);
  const ChainBuild high = buildChain({call("aten::clamp", {A::tensor(1), A::none(), A::number(1.0)}, 3)}, m);
  ASSERT_TRUE(high.ok()) << high.reason;
  EXPECT_EQ(high.chain.size(), 3u);  // x, the bound, the minimum
  EXPECT_EQ(high.chain.node(high.chain.outputs()[0]).op, OpKind::Minimum);

  TensorMetas f = {{1, contiguous("float32", {4, 32})}, {3, contiguous("float32", {4, 32})}};
  const ChainBuild exact = buildChain({call("aten::clamp_max", {A::tensor(1), A::number(0.1)}, 3)}, f);
  ASSERT_TRUE(exact.ok()) << exact.reason;
  const Node& bound = exact.chain.node(exact.chain.node(exact.chain.outputs()[0]).operands[1]);
  EXPECT_EQ(bound.scalar, static_cast<double>(0.1f));  // float32's bound is the float nearest 0.1

  const ChainBuild relu6 = buildChain({call("aten::hardtanh", {A::tensor(1), A::number(0.0), A::number(6.0)}, 3)}, m);
  ASSERT_TRUE(relu6.ok()) << relu6.reason;
  EXPECT_EQ(chainKey(relu6.chain).text,
            chainKey(buildChain({call("aten::clamp", {A::tensor(1), A::number(0.0), A::number(6.0)}, 3)}, m).chain).text);

  expectRefused({call("aten::clamp", {A::tensor(1), A::none(), A::none()}, 3)}, m, "without a bound");
  expectRefused({call("aten::clamp", {A::tensor(1), A::number(std::nan("")), A::number(1.0)}, 3)}, m, "finite");
  expectRefused({call("aten::clamp_min", {A::tensor(1), A::number(-INFINITY)}, 3)}, m, "finite");
}

}  // namespace
}  // namespace hotkernel::chain

namespace hotkernel::chain {
namespace {

// Note [The group view]: diffusers' norm + SiLU and BiT's norm + ReLU are the named chains over [N * G, C / G * HxW],
// the weight and bias per-channel values; only with layouts (the repeats are no contiguous layout).
TEST(ChainBuilderTest, GivenAGroupNormAndItsActivationRecordedWhenBuiltThenTheyAreTheNamedChainOverTheGroupView) {
  for (DType d : {DType::Float32, DType::BFloat16, DType::Float16}) {
    for (OpKind act : {OpKind::Silu, OpKind::Relu}) {
      const GroupNormShape shape{2, 64, 49, 32};
      const RecordedChain r = groupNormActRecording(d, shape, 1e-5, act);
      const ChainBuild b = buildChain(r.calls, r.metas, {7}, ChainBuildOptions{true});  // mean and rstd dropped
      ASSERT_TRUE(b.ok()) << dtypeName(d) << ": " << b.reason;
      EXPECT_EQ(b.rows, 64);
      EXPECT_EQ(b.cols, 2 * 49);
      EXPECT_EQ(b.inputValues, (std::vector<int64_t>{1, 2, 3}));
      EXPECT_EQ(b.outputValues, std::vector<int64_t>{7});
      EXPECT_EQ(chainKey(b.chain).sha256, chainKey(groupNormActChain(d, 1e-5, act)).sha256);
      EXPECT_EQ(b.layout, groupNormActLayout(shape)) << layoutText(b.layout);
      EXPECT_NE(buildChain(r.calls, r.metas, {7}).reason.find("not contiguous"), std::string::npos);
    }
  }
  // x as [N, C, H, W] (HxW the product of the spatial dims) is the same view.
  RecordedChain r = groupNormActRecording(DType::Float16, {2, 64, 49, 32}, 1e-5, OpKind::Silu);
  for (int64_t id : {1, 4, 7}) r.metas[id] = contiguous("float16", {2, 64, 7, 7});
  const ChainBuild fourD = buildChain(r.calls, r.metas, {7}, ChainBuildOptions{true});
  ASSERT_TRUE(fourD.ok()) << fourD.reason;
  EXPECT_EQ(fourD.layout, groupNormActLayout({2, 64, 49, 32}));
  // The statistics when kept: rows in x's dtype, the eps rounded to it.
  const ChainBuild stats = buildChain(r.calls, r.metas, {7, 5, 6}, ChainBuildOptions{true});
  ASSERT_TRUE(stats.ok()) << stats.reason;
  EXPECT_EQ(stats.chain.node(stats.chain.outputs()[1]).shape, ShapeClass::Row);
  EXPECT_EQ(stats.chain.node(stats.chain.outputs()[2]).dtype, DType::Float16);
  bool roundedEps = false;
  for (const Node& n : stats.chain.nodes()) {
    roundedEps = roundedEps || (n.op == OpKind::Constant && n.scalar == static_cast<double>(roundTo(DType::Float16, 1e-5f)));
  }
  EXPECT_TRUE(roundedEps) << "eps as ATen's static_cast<half>(eps)";
}

// Note [The group view]: a residual [N, C, H, W] addend is a Full value of the view, a [N, C, 1, 1] one (a time
// embedding) a per-channel value of row strides (C, C / G), a per-sample [N, 1, 1, 1] one repeats over the row.
TEST(ChainBuilderTest, GivenAddendsAfterAGroupNormWhenBuiltThenEachIsPlacedByItsStridesOverTheView) {
  RecordedChain r = groupNormActRecording(DType::BFloat16, {4, 32, 16, 8}, 1e-6, OpKind::Silu);
  auto withAddend = [&](TensorMeta addend) {
    RecordedChain c = r;
    c.calls.push_back({"aten::add.Tensor", {A::tensor(7), A::tensor(8), A::number(1)}, {9}});
    c.metas[8] = std::move(addend);
    c.metas[9] = c.metas[7];
    return buildChain(c.calls, c.metas, {9}, ChainBuildOptions{true});
  };
  const ChainBuild residual = withAddend(contiguous("bfloat16", {4, 32, 16}));
  ASSERT_TRUE(residual.ok()) << residual.reason;
  EXPECT_EQ(residual.layout.strides[3], (std::vector<int64_t>{8 * 64, 64}));  // x's own strides over [N, G]
  EXPECT_EQ(residual.layout.colRepeats[3], 1);
  const ChainBuild temb = withAddend(contiguous("bfloat16", {4, 32, 1}));
  ASSERT_TRUE(temb.ok()) << temb.reason;
  EXPECT_EQ(temb.layout.strides[3], (std::vector<int64_t>{32, 4}));
  EXPECT_EQ(temb.layout.colRepeats[3], 16);
  const ChainBuild sample = withAddend(contiguous("bfloat16", {4, 1, 1}));
  ASSERT_TRUE(sample.ok()) << sample.reason;
  EXPECT_EQ(sample.layout.strides[3], (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(sample.layout.colRepeats[3], 64);
  // A spatial map shared by the channels is no value of the view; nor are channels at a stride.
  EXPECT_NE(withAddend(contiguous("bfloat16", {16})).reason.find("varies over the spatial dims"), std::string::npos);
  EXPECT_NE(withAddend(TensorMeta{"bfloat16", {4, 32, 1}, {64, 2, 1}}).reason.find("at stride 2"), std::string::npos);
}

TEST(ChainBuilderTest, GivenWhatAGroupViewCannotHoldWhenBuiltThenTheReasonNamesIt) {
  const RecordedChain r = groupNormActRecording(DType::Float16, {2, 64, 49, 32}, 1e-5, OpKind::Silu);
  const ChainBuildOptions layouts{true};
  auto refusedWith = [&](const RecordedChain& c, const std::string& text) {
    const ChainBuild b = buildChain(c.calls, c.metas, {c.calls.back().outputs[0]}, layouts);
    EXPECT_FALSE(b.ok());
    EXPECT_NE(b.reason.find(text), std::string::npos) << b.reason;
  };
  RecordedChain reduced = r;  // a reduction over x's last dim inside the view
  reduced.calls.push_back({"aten::sum.dim_IntList", {A::tensor(7), A::intList({-1}), A::boolean(true), A::none()}, {8}});
  reduced.metas[8] = contiguous("float16", {2, 64, 1});
  refusedWith(reduced, "reduces or joins over the last dim");
  RecordedChain readsStats = r;
  readsStats.calls.push_back({"aten::mul.Tensor", {A::tensor(5), A::tensor(6)}, {8}});
  readsStats.metas[8] = readsStats.metas[5];
  refusedWith(readsStats, "a group norm's mean or rstd");
  RecordedChain wideWeight = r;
  wideWeight.metas[2].scalarType = "float32";
  refusedWith(wideWeight, "the weight is float32 where x is float16");
  RecordedChain wrongHw = r;
  wrongHw.calls[0].args[5] = A::number(48);
  refusedWith(wrongHw, "HxW");
  RecordedChain strided = r;
  strided.metas[1].strides = {49, 98, 1};
  refusedWith(strided, "not contiguous");
  RecordedChain uneven = r;
  uneven.calls[0].args[6] = A::number(24);
  refusedWith(uneven, "64 channels in 24 groups");
  RecordedChain flat = r;
  flat.metas[1] = contiguous("float16", {2, 64});
  refusedWith(flat, "HxW 1 is ATen's other expression");
  RecordedChain twoViews = r;  // a second group norm of another geometry
  twoViews.calls.push_back({"aten::native_group_norm",
                            {A::tensor(7), A::none(), A::none(), A::number(2), A::number(64), A::number(49),
                             A::number(16), A::number(1e-5)},
                            {8, 9, 10}});
  twoViews.metas[8] = twoViews.metas[7];
  twoViews.metas[9] = twoViews.metas[10] = contiguous("float16", {2, 16});
  refusedWith(twoViews, "a chain holds one group view");
}

}  // namespace
}  // namespace hotkernel::chain

namespace hotkernel::chain {
namespace {

// Note [Eval BatchNorm in a chain]: an eval BatchNorm2d and its ReLU / SiLU (HF's ResNet, EfficientNet) through
// native_batch_norm or cudnn_batch_norm are the named chain over the view of one channel a row, its statistics and
// affine per-channel values, its unused results (empty, or CUDA's [C] statistics) no value; the chain has no reduction (the row kernel's: Note
// [Repeated columns]).
TEST(ChainBuilderTest, GivenAnEvalBatchNormAndItsActivationRecordedWhenBuiltThenTheyAreTheNamedChainOverChannelRows) {
  const GroupNormShape shape{4, 16, 49, 16};
  for (bool cudnn : {false, true}) {
    for (DType d : {DType::Float32, DType::BFloat16}) {
      const RecordedChain r = batchNormActRecording(d, shape, 1e-5, OpKind::Relu, cudnn);
      const ChainBuild b = buildChain(r.calls, r.metas, {10}, ChainBuildOptions{true});
      ASSERT_TRUE(b.ok()) << dtypeName(d) << (cudnn ? " cudnn: " : ": ") << b.reason;
      EXPECT_EQ(b.rows, 64);
      EXPECT_EQ(b.cols, 49);
      EXPECT_FALSE(b.chain.hasReductions());
      EXPECT_EQ(b.inputValues, (std::vector<int64_t>{1, 2, 3, 4, 5}));
      EXPECT_EQ(chainKey(b.chain).sha256, chainKey(batchNormActChain(d, 1e-5, OpKind::Relu)).sha256);
      EXPECT_EQ(b.layout, batchNormActLayout(shape)) << layoutText(b.layout);
      EXPECT_TRUE(chainUsesRowKernel(b.chain, b.layout));
    }
  }
  const ChainBuildOptions layouts{true};
  auto refusedWith = [&](RecordedChain c, const std::string& text, std::vector<int64_t> live = {10}) {
    const ChainBuild b = buildChain(c.calls, c.metas, live, layouts);
    EXPECT_FALSE(b.ok());
    EXPECT_NE(b.reason.find(text), std::string::npos) << b.reason;
  };
  const RecordedChain r = batchNormActRecording(DType::Float16, shape, 1e-5, OpKind::Silu, false);
  RecordedChain training = r;
  training.calls[0].args[5] = RecordedArg::boolean(true);
  refusedWith(training, "a training batch norm reduces over the batch");
  RecordedChain noStats = r;
  noStats.calls[0].args[3] = RecordedArg::none();
  refusedWith(noStats, "the running mean is absent");
  // CUDA's eval native_batch_norm returns save_mean and save_invstd as [C] float32 tensors (the CPU's are empty):
  // unused results, no chain value: the same chain builds, and one the caller keeps is refused.
  RecordedChain cuda = r;
  cuda.metas[7] = cuda.metas[8] = TensorMeta{"float32", {shape.channels}, {1}};
  const ChainBuild withStats = buildChain(cuda.calls, cuda.metas, {10}, layouts);
  ASSERT_TRUE(withStats.ok()) << withStats.reason;
  EXPECT_EQ(chainKey(withStats.chain).sha256, chainKey(batchNormActChain(DType::Float16, 1e-5, OpKind::Silu)).sha256);
  refusedWith(cuda, "live output %7 is not a value the calls return", {10, 7});
  RecordedChain readsEmpty = r;
  readsEmpty.calls.push_back({"aten::mul.Tensor", {RecordedArg::tensor(10), RecordedArg::tensor(7)}, {11}});
  readsEmpty.metas[11] = readsEmpty.metas[10];
  refusedWith(readsEmpty, "an eval batch norm's unused result", {11});
  // cuDNN's float32 parameters for a 16-bit x: per-channel values of their own dtype.
  RecordedChain mixed = batchNormActRecording(DType::BFloat16, shape, 1e-5, OpKind::Relu, true);
  for (int64_t id : {2, 3, 4, 5}) mixed.metas[id].scalarType = "float32";
  const ChainBuild m = buildChain(mixed.calls, mixed.metas, {10}, layouts);
  ASSERT_TRUE(m.ok()) << m.reason;
  EXPECT_EQ(m.chain.node(m.chain.inputs()[1]).dtype, DType::Float32);
}

// Note [Lone normalizations]: a group norm or an eval batch norm recorded alone (its result the live value) builds
// and is a chain of its own, as a relayout copy is; a lone activation, a lone layer norm or a refused build is not.
TEST(ChainBuilderTest, GivenALoneGroupOrEvalBatchNormWhenBuiltThenItIsALoneChainAndOtherLoneCallsAreNot) {
  const GroupNormShape shape{2, 64, 49, 32};
  const ChainBuildOptions layouts{true};
  RecordedChain gn = groupNormActRecording(DType::Float16, shape, 1e-5, OpKind::Silu);
  gn.calls.pop_back();  // the norm alone, its result (value 4) live
  const ChainBuild gnBuild = buildChain(gn.calls, gn.metas, {4}, layouts);
  ASSERT_TRUE(gnBuild.ok()) << gnBuild.reason;
  EXPECT_TRUE(isLoneChain(gn.calls, gnBuild));
  EXPECT_FALSE(isRelayoutCopy(gnBuild));
  for (bool cudnn : {false, true}) {
    RecordedChain bn = batchNormActRecording(DType::BFloat16, shape, 1e-5, OpKind::Relu, cudnn);
    const int64_t out = bn.calls[0].outputs[0];
    bn.calls.pop_back();
    const ChainBuild bnBuild = buildChain(bn.calls, bn.metas, {out}, layouts);
    ASSERT_TRUE(bnBuild.ok()) << bnBuild.reason;
    EXPECT_TRUE(isLoneChain(bn.calls, bnBuild)) << (cudnn ? "cudnn" : "native");
  }
  // Two calls are a chain anyway, not a lone one; a refused build is none.
  const RecordedChain both = groupNormActRecording(DType::Float16, shape, 1e-5, OpKind::Silu);
  EXPECT_FALSE(isLoneChain(both.calls, buildChain(both.calls, both.metas, {7}, layouts)));
  ChainBuild refused = gnBuild;
  refused.reason = "refused";
  EXPECT_FALSE(isLoneChain(gn.calls, refused));
  // A lone activation and a lone layer norm: their own kernels (or ATen's) serve them.
  const TensorMeta x = contiguous("float16", {8, 64});
  const std::vector<RecordedCall> silu = {call("aten::silu", {A::tensor(1)}, 2)};
  const ChainBuild siluBuild = buildChain(silu, {{1, x}, {2, x}}, {2}, layouts);
  ASSERT_TRUE(siluBuild.ok()) << siluBuild.reason;
  EXPECT_FALSE(isLoneChain(silu, siluBuild));
  const TensorMetas lnMetas = {{1, x}, {2, contiguous("float16", {64})}, {3, contiguous("float16", {64})}, {4, x},
                                {5, contiguous("float32", {8, 1})}, {6, contiguous("float32", {8, 1})}};
  const std::vector<RecordedCall> ln = {RecordedCall{
      "aten::native_layer_norm", {A::tensor(1), A::intList({64}), A::tensor(2), A::tensor(3), A::number(1e-5)}, {4, 5, 6}}};
  const ChainBuild lnBuild = buildChain(ln, lnMetas, {4}, layouts);
  ASSERT_TRUE(lnBuild.ok()) << lnBuild.reason;
  EXPECT_FALSE(isLoneChain(ln, lnBuild));
}

}  // namespace
}  // namespace hotkernel::chain
