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
