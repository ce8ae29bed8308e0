// Tests of buildChain's in-place steps (Note [In-place steps] in
// kernels/chain/src/CallWrites.h): an in-place op on a value an earlier call
// returned is its functional op's node, its result a new value; everything
// that would make the kernel write what eager does not is refused.

#include "hotkernel/chain/ChainBuilder.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "hotkernel/chain/ChainKey.h"
#include "hotkernel/chain/NamedChains.h"
#include "RecordedCalls.h"

namespace hotkernel::chain {
namespace {

using A = RecordedArg;
using testutil::call;
using testutil::contiguous;
using testutil::expectRefused;

// A ResNet block's tail as eager code writes it: y = exp(x) (the batch norm's stand-in); y += identity; y.relu_().
std::vector<RecordedCall> residualTail(const std::string& add, const std::string& relu) {
  return {call("aten::exp", {A::tensor(1)}, 3), call(add, {A::tensor(3), A::tensor(2), A::number(1)}, 4),
          call(relu, {A::tensor(4)}, 5)};
}

TensorMetas sameMetas(const std::string& type, int64_t count) {
  TensorMetas m;
  for (int64_t id = 1; id <= count; ++id) m[id] = contiguous(type, {8, 96});
  return m;
}

TEST(ChainInPlaceTest, GivenAResidualAddAndReluInPlaceWhenBuiltThenTheChainIsTheFunctionalOnesWritingTheLastValue) {
  const TensorMetas m = sameMetas("bfloat16", 6);
  const ChainBuild inPlace = buildChain(residualTail("aten::add_.Tensor", "aten::relu_"), m, {5});
  ASSERT_TRUE(inPlace.ok()) << inPlace.reason;
  const ChainBuild functional = buildChain(residualTail("aten::add.Tensor", "aten::relu"), m, {5});
  ASSERT_TRUE(functional.ok()) << functional.reason;
  EXPECT_EQ(chainKey(inPlace.chain).sha256, chainKey(functional.chain).sha256);
  EXPECT_EQ(inPlace.inputValues, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(inPlace.outputValues, std::vector<int64_t>{5});
  // Without live outputs: the overwritten values are read by the call that overwrote them, so only %5 is written.
  const ChainBuild inferred = buildChain(residualTail("aten::add_.Tensor", "aten::relu_"), m);
  ASSERT_TRUE(inferred.ok()) << inferred.reason;
  EXPECT_EQ(inferred.outputValues, std::vector<int64_t>{5});
}

TEST(ChainInPlaceTest, GivenAnEvalBatchNormAndAnInPlaceReluWhenBuiltThenItIsTheNamedBatchNormReluChain) {
  const GroupNormShape shape{4, 16, 49, 16};
  RecordedChain r = batchNormActRecording(DType::BFloat16, shape, 1e-5, OpKind::Relu, false);
  r.calls[1].op = "aten::relu_";  // torchvision's ReLU(inplace=True)
  const ChainBuild b = buildChain(r.calls, r.metas, {10}, ChainBuildOptions{true});
  ASSERT_TRUE(b.ok()) << b.reason;
  EXPECT_EQ(chainKey(b.chain).sha256, chainKey(batchNormActChain(DType::BFloat16, 1e-5, OpKind::Relu)).sha256);
  EXPECT_EQ(b.layout, batchNormActLayout(shape));
}

TEST(ChainInPlaceTest, GivenScalarAndClampStepsInPlaceWhenBuiltThenEachIsItsFunctionalNode) {
  const TensorMetas m = sameMetas("float16", 6);
  const ChainBuild b = buildChain({call("aten::exp", {A::tensor(1)}, 2), call("aten::mul_.Scalar", {A::tensor(2), A::number(0.5)}, 3),
                                   call("aten::hardtanh_", {A::tensor(3), A::number(0), A::number(6)}, 4),
                                   call("aten::silu_", {A::tensor(4)}, 5)},
                                  m, {5});
  ASSERT_TRUE(b.ok()) << b.reason;
  const ChainBuild f = buildChain({call("aten::exp", {A::tensor(1)}, 2), call("aten::mul.Scalar", {A::tensor(2), A::number(0.5)}, 3),
                                   call("aten::hardtanh", {A::tensor(3), A::number(0), A::number(6)}, 4),
                                   call("aten::silu", {A::tensor(4)}, 5)},
                                  m, {5});
  ASSERT_TRUE(f.ok()) << f.reason;
  EXPECT_EQ(chainKey(b.chain).sha256, chainKey(f.chain).sha256);
}

TEST(ChainInPlaceTest, GivenWhatAnInPlaceStepMustNotBeWhenBuiltThenTheReasonNamesIt) {
  const TensorMetas m = sameMetas("bfloat16", 7);
  // On a chain input: the kernel would write a tensor the caller made and the chain reads.
  expectRefused({call("aten::relu_", {A::tensor(1)}, 2)}, m, "in-place op on %1, which no earlier call returned");
  expectRefused({call("aten::exp", {A::tensor(1)}, 3), call("aten::add_.Tensor", {A::tensor(2), A::tensor(3), A::number(1)}, 4)},
                m, "in-place op on %2");
  // The overwritten value read later, or wanted as an output.
  std::vector<RecordedCall> readsOld = residualTail("aten::add_.Tensor", "aten::relu_");
  readsOld.push_back(call("aten::mul.Tensor", {A::tensor(3), A::tensor(5)}, 6));
  expectRefused(readsOld, m, "reads %3, a value an in-place call overwrote");
  expectRefused(residualTail("aten::add_.Tensor", "aten::relu_"), m, "live output %4 is a value an in-place call overwrote",
                {4, 5});
  // An op no step takes in place, and forms without an in-place step.
  expectRefused({call("aten::exp", {A::tensor(1)}, 2), call("aten::cumsum_", {A::tensor(2), A::number(1)}, 3)}, m,
                "no chain step writes its argument in place");
  expectRefused({call("aten::exp", {A::tensor(1)}, 2), call("aten::_softmax_", {A::tensor(2), A::number(-1), A::boolean(false)}, 3)},
                m, "no chain step writes its argument in place");
  // A result that is not the tensor it writes: another dtype (ATen would cast back; the chain refuses), other strides.
  TensorMetas promoted = m;
  promoted[2] = contiguous("float32", {8, 96});
  expectRefused(residualTail("aten::add_.Tensor", "aten::relu_"), promoted, "where ATen's promotion gives float32");
  TensorMetas widened = m;
  widened[4] = contiguous("float32", {8, 96});
  expectRefused(residualTail("aten::add_.Tensor", "aten::relu_"), widened, "is not laid out as %3");
  TensorMetas transposed = m;
  transposed[4] = TensorMeta{"bfloat16", {8, 96}, {1, 8}};
  expectRefused(residualTail("aten::add_.Tensor", "aten::relu_"), transposed, "is not laid out as %3");
}

}  // namespace
}  // namespace hotkernel::chain
