#include <gtest/gtest.h>

#include "hotkernel/chain/ChainPattern.h"
#include "hotkernel/runtime/Check.h"

using namespace hotkernel;
using namespace hotkernel::chain;

namespace {

TensorMeta full(const char* type) { return TensorMeta{type, {4, 8}, {8, 1}}; }

// silu(%a) * %b with arbitrary recorder ids.
std::vector<RecordedCall> swiglu(int64_t a, int64_t b, int64_t act, int64_t out) {
  RecordedCall silu{"aten::silu", {RecordedArg::tensor(a)}, {act}};
  RecordedCall mul{"aten::mul.Tensor", {RecordedArg::tensor(act), RecordedArg::tensor(b)}, {out}};
  return {silu, mul};
}

TensorMetas metasOf(std::initializer_list<int64_t> ids, const char* type = "bfloat16") {
  TensorMetas m;
  for (int64_t id : ids) m[id] = full(type);
  return m;
}

}  // namespace

TEST(ChainPatternTest, GivenTwoRecordingsWithOtherIdsButTheSameDataflowWhenCanonicalizedThenTheyHaveOneKey) {
  const ChainPattern p = canonicalPattern(swiglu(40, 41, 42, 43), metasOf({40, 41, 42, 43}), {43});
  const ChainPattern q = canonicalPattern(swiglu(7, 3, 100, 9), metasOf({7, 3, 100, 9}), {9});
  EXPECT_EQ(p.key(), q.key());
  EXPECT_EQ(p.calls[0].args[0].value, 0);  // numbered by first appearance
  EXPECT_EQ(p.calls[0].outputs[0], 1);
  EXPECT_EQ(p.calls[1].args[1].value, 2);
  EXPECT_EQ(p.live, std::vector<int64_t>{3});
}

TEST(ChainPatternTest, GivenOtherDataflowDtypeScalarOrLiveSetWhenCanonicalizedThenTheKeyDiffers) {
  const std::string base = canonicalPattern(swiglu(0, 1, 2, 3), metasOf({0, 1, 2, 3}), {3}).key();
  // silu(a) * a: the second operand is the first input.
  EXPECT_NE(canonicalPattern(swiglu(0, 0, 2, 3), metasOf({0, 2, 3}), {3}).key(), base);
  EXPECT_NE(canonicalPattern(swiglu(0, 1, 2, 3), metasOf({0, 1, 2, 3}, "float16"), {3}).key(), base);
  EXPECT_NE(canonicalPattern(swiglu(0, 1, 2, 3), metasOf({0, 1, 2, 3}), {2, 3}).key(), base);
  std::vector<RecordedCall> scaled = swiglu(0, 1, 2, 3);
  scaled[1] = RecordedCall{"aten::mul.Tensor", {RecordedArg::tensor(2), RecordedArg::number(0.5)}, {3}};
  std::vector<RecordedCall> scaledOther = scaled;
  scaledOther[1].args[1] = RecordedArg::number(0.5000000001);
  EXPECT_NE(canonicalPattern(scaled, metasOf({0, 2, 3}), {3}).key(),
            canonicalPattern(scaledOther, metasOf({0, 2, 3}), {3}).key());
}

TEST(ChainPatternTest, GivenTheSameCallWhenComparedThenItIsTheSameStepAndAnyDifferenceMakesItAnother) {
  const auto calls = swiglu(0, 1, 2, 3);
  const TensorMetas m = metasOf({0, 1, 2, 3});
  EXPECT_TRUE(sameStep(calls[1], m, calls[1], m));
  TensorMetas strided = m;
  strided[1].strides = {1, 4};
  EXPECT_FALSE(sameStep(calls[1], m, calls[1], strided));
  RecordedCall other = calls[1];
  other.op = "aten::div.Tensor";
  EXPECT_FALSE(sameStep(other, m, calls[1], m));
  RecordedCall renumbered = calls[1];
  renumbered.outputs = {4};
  TensorMetas m4 = m;
  m4[4] = full("bfloat16");
  EXPECT_FALSE(sameStep(renumbered, m4, calls[1], m));
}

TEST(ChainPatternTest, GivenArgumentAndOutputMetadataInTwoTablesWhenComparedThenEachIsReadFromItsOwn) {
  const auto calls = swiglu(0, 1, 2, 3);  // calls[1]: mul(%2, %1) -> %3
  const TensorMetas m = metasOf({0, 1, 2, 3});
  TensorMetas args = metasOf({0, 1, 2});  // a chain's table: the call's inputs, not its output
  TensorMetas outs;
  outs[3] = m.at(3);  // a candidate pattern's metadata for the output
  EXPECT_TRUE(sameStep(calls[1], args, outs, calls[1], m));
  EXPECT_FALSE(sameStep(calls[1], args, args, calls[1], m));  // the output's metadata is not in the table
  TensorMetas stridedArgs = args;
  stridedArgs[2].strides = {1, 4};
  EXPECT_FALSE(sameStep(calls[1], stridedArgs, outs, calls[1], m));
  TensorMetas otherOut = outs;
  otherOut[3] = full("float32");
  EXPECT_FALSE(sameStep(calls[1], args, otherOut, calls[1], m));
}

TEST(ChainPatternTest, GivenALiveValueTheCallsDoNotNameWhenCanonicalizedThenItIsRefused) {
  EXPECT_THROW(canonicalPattern(swiglu(0, 1, 2, 3), metasOf({0, 1, 2, 3}), {99}), Error);
  EXPECT_THROW(canonicalPattern(swiglu(0, 1, 2, 3), metasOf({0, 1, 2}), {3}), Error);
}

TEST(ChainPatternTest, GivenAPatternWhenItsTextIsReadThenItNamesCallsMetadataAndLiveValues) {
  const std::string text = canonicalPattern(swiglu(0, 1, 2, 3), metasOf({0, 1, 2, 3}), {3}).text();
  EXPECT_NE(text.find("hotkernel-chain-pattern v1"), std::string::npos);
  EXPECT_NE(text.find("aten::silu(%0)->[1]"), std::string::npos);
  EXPECT_NE(text.find("%2:bfloat16[4,8][8,1]"), std::string::npos);
  EXPECT_NE(text.find("live[3]"), std::string::npos);
}
