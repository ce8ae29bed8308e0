// The norm tuners' harness bounds (Note [Norm harness bounds]) on the CPU:
// rms_norm's rstd allows ATen's own distance from a float64 rstd, so an
// accurate kernel passes where ATen's float32 sum of millions of squares is
// off by more than the family's statRel; a wrong rstd still fails.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <limits>

#include "hotkernel/kernels/DType.h"
#include "hotkernel/kernels/RmsNormFamily.h"
#include "hotkernel/optimizer/NormTuner.h"

namespace hotkernel {
namespace {

using kernels::DType;

// The harness's "shifted" rows of 2,097,152 bfloat16 columns: uniform in [-1, 5) + 1e5, which bfloat16 rounds to
// one value, 99840, so the float64 rstd is exactly known.
struct ShiftedRows {
  at::Tensor in;     // [4, 2097152] bfloat16
  at::Tensor rstd64;  // [4] float64
};

ShiftedRows shiftedRows() {
  at::manual_seed(7);
  ShiftedRows r;
  r.in = (at::rand({4, 2097152}) * 6 - 1 + 1e5).to(at::kBFloat16);
  const double eps = std::numeric_limits<float>::epsilon();
  r.rstd64 = r.in.to(at::kDouble).square().mean(1).add(eps).rsqrt();
  return r;
}

// Whether every element of `got` is within `bound` of `ref`.
bool within(const at::Tensor& got, const at::Tensor& ref, const at::Tensor& bound) {
  return (got.to(at::kDouble) - ref.to(at::kDouble)).abs().le(bound.to(at::kDouble)).all().item<bool>();
}

TEST(NormBoundTest, GivenAtensRstdOffByMoreThanStatRelWhenAnAccurateKernelIsCheckedThenItPassesOnlyWithAtensOwnError) {
  const ShiftedRows r = shiftedRows();
  const RowOpSpec spec = rmsNormSpec(/*hasWeight=*/true);
  const RowOpOutput& rstd = spec.outputs.at(1);
  ASSERT_EQ(rstd.name, "rstd");
  ASSERT_TRUE(rstd.boundWithArgs);
  const double statRel = kernels::RmsNormFamily::tolerance(DType::BFloat16, 2097152).statRel;
  // ATen's float32 rstd as the H200 gave it on such rows: 5.0e-5 relative off the float64 value.
  const at::Tensor aten = r.rstd64.mul(1.0 + 5.0e-5).to(at::kFloat);
  ASSERT_GT(5.0e-5, statRel) << "the case must be one statRel alone refuses";
  const std::vector<at::Tensor> refs = {at::Tensor(), aten};
  RowOpArgs args;
  args.scalars = {std::nullopt};  // eps: ATen's default
  const at::Tensor accurate = r.rstd64.to(at::kFloat);
  EXPECT_FALSE(within(accurate, aten, rstd.bound(r.in, refs, DType::BFloat16))) << "statRel alone";
  EXPECT_TRUE(within(accurate, aten, rstd.boundWithArgs(r.in, args, refs, DType::BFloat16)));
  // A kernel on the other side of float64, within statRel of it, passes too; one ten times further does not.
  EXPECT_TRUE(within(r.rstd64.mul(1.0 - 4.0e-5).to(at::kFloat), aten,
                     rstd.boundWithArgs(r.in, args, refs, DType::BFloat16)));
  EXPECT_FALSE(within(r.rstd64.mul(1.0 - 5.0e-4).to(at::kFloat), aten,
                      rstd.boundWithArgs(r.in, args, refs, DType::BFloat16)));
}

TEST(NormBoundTest, GivenAnExplicitEpsWhenTheRstdBoundIsComputedThenAtensErrorIsMeasuredWithThatEps) {
  const ShiftedRows r = shiftedRows();
  const RowOpSpec spec = rmsNormSpec(/*hasWeight=*/false);
  // A huge eps moves the float64 rstd far from 1 / 99840: ATen's rstd computed with it is exact, and a kernel
  // that ignored the eps is far off.
  const double eps = 1e10;
  const at::Tensor rstdEps = r.in.to(at::kDouble).square().mean(1).add(eps).rsqrt();
  RowOpArgs args;
  args.scalars = {eps};
  const std::vector<at::Tensor> refs = {at::Tensor(), rstdEps.to(at::kFloat)};
  const at::Tensor bound = spec.outputs.at(1).boundWithArgs(r.in, args, refs, DType::BFloat16);
  EXPECT_TRUE(within(rstdEps.to(at::kFloat), refs[1], bound));
  EXPECT_FALSE(within(r.rstd64.to(at::kFloat), refs[1], bound));
}

}  // namespace
}  // namespace hotkernel
