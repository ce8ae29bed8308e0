// The harness's output buffers (CPU: outputView only shapes views of a flat
// buffer; the checks themselves are GPU tests).
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <limits>

#include "hotkernel/optimizer/Harness.h"

namespace hotkernel {
namespace {

RowOpOutput outputOf(bool perRow, bool scalar) {
  RowOpOutput o;
  o.perRow = perRow;
  o.scalar = scalar;
  return o;
}

TEST(HarnessOutputTest, GivenScalarOutputWhenViewedThenZeroDimInTheBuffersDtypeAndFirstElement) {
  for (const at::ScalarType t : {at::kBFloat16, at::kHalf, at::kFloat}) {
    const at::Tensor flat = at::arange(8, at::TensorOptions().dtype(t));
    const at::Tensor v = outputView(flat, outputOf(false, true), 4, 5);
    EXPECT_EQ(v.dim(), 0) << t;  // `view({})` gave a [2] or [4] uint8 view here (Note [A 0-dim view])
    EXPECT_EQ(v.scalar_type(), t);
    EXPECT_EQ(v.numel(), 1);
    EXPECT_EQ(v.data_ptr(), flat.data_ptr());
    EXPECT_EQ(v.item<double>(), 0.0);
  }
}

TEST(HarnessOutputTest, GivenPerRowOutputWhenViewedThenRowsElements) {
  const at::Tensor flat = at::zeros({4 + 1024}, at::kFloat);
  const at::Tensor v = outputView(flat, outputOf(true, false), 4, 5);
  EXPECT_EQ(v.sizes(), at::IntArrayRef({4}));
  EXPECT_EQ(v.data_ptr(), flat.data_ptr());
}

TEST(HarnessOutputTest, GivenPerRowOutputOfSeveralElementsWhenViewedThenRowsByThoseElements) {
  RowOpOutput o = outputOf(true, false);
  o.perRowElements = 3;
  const at::Tensor flat = at::arange(12 + 1024, at::kFloat);
  const at::Tensor v = outputView(flat, o, 4, 6);  // a [4, 2 * 3] input reduced over its middle extent
  EXPECT_EQ(v.sizes(), at::IntArrayRef({4, 3}));
  EXPECT_EQ(v.data_ptr(), flat.data_ptr());
  EXPECT_EQ(v[3][2].item<double>(), 11.0);  // the canary after element 11 is not in the view
}

TEST(HarnessOutputTest, GivenASpecWithAnIndexOutputOfSeveralElementsAPerRowWhenAllocatedThenInt64RowsByElements) {
  RowOpSpec spec;
  RowOpOutput o = outputOf(true, false);
  o.perRowElements = 5;
  o.exactInt64 = true;
  RowOpOutput values = outputOf(true, false);
  values.perRowElements = 5;
  values.perRowInInputDtype = true;
  spec.outputs = {o, values, outputOf(true, false)};
  const std::vector<at::Tensor> outs = allocateOutputs(spec, at::zeros({7, 35}, at::kBFloat16));
  ASSERT_EQ(outs.size(), 3u);
  EXPECT_EQ(outs[0].sizes(), at::IntArrayRef({7, 5}));
  EXPECT_EQ(outs[0].scalar_type(), at::kLong);
  EXPECT_EQ(outs[1].sizes(), at::IntArrayRef({7, 5}));
  EXPECT_EQ(outs[1].scalar_type(), at::kBFloat16);
  EXPECT_EQ(outs[2].sizes(), at::IntArrayRef({7}));  // one element a row: [rows], float32
  EXPECT_EQ(outs[2].scalar_type(), at::kFloat);
}

TEST(HarnessOutputTest, GivenFullOutputWhenViewedThenRowsByColsOverTheBuffersStart) {
  const at::Tensor flat = at::arange(20 + 1024, at::kFloat);
  const at::Tensor v = outputView(flat, outputOf(false, false), 4, 5);
  EXPECT_EQ(v.sizes(), at::IntArrayRef({4, 5}));
  EXPECT_EQ(v[3][4].item<double>(), 19.0);  // the canary after element 19 is not in the view
}

TEST(HarnessOutputTest, GivenEqualIndicesWhenComparedExactlyThenNoMismatch) {
  const at::Tensor out = at::arange(6, at::kLong);
  EXPECT_EQ(exactOutputMismatch(out, out.clone()), "");
  // A reference of another integer type compares by value.
  EXPECT_EQ(exactOutputMismatch(out, out.to(at::kInt)), "");
}

TEST(HarnessOutputTest, GivenIndicesOffByOneOrNeverWrittenWhenComparedExactlyThenTheFirstMismatchIsNamed) {
  const at::Tensor ref = at::arange(6, at::kLong);
  at::Tensor out = ref.clone();
  out[4] = 5;
  out[2] = std::numeric_limits<int64_t>::min();  // the harness's pre-fill: never written
  const std::string why = exactOutputMismatch(out, ref);
  EXPECT_NE(why.find("2 element(s) differ"), std::string::npos) << why;
  EXPECT_NE(why.find("flat index 2"), std::string::npos) << why;
  EXPECT_NE(why.find("reference 2"), std::string::npos) << why;
}

}  // namespace
}  // namespace hotkernel
