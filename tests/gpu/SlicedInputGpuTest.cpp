// The optimizer's inputs drawn in row slices (optimizer/SlicedInput.h).
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>

#include "hotkernel/optimizer/SlicedInput.h"
#include "hotkernel/optimizer/WorkSlices.h"

namespace hotkernel {
namespace {

#define REQUIRE_CUDA()                                              \
  if (!at::cuda::is_available() || at::cuda::device_count() == 0) { \
    GTEST_SKIP() << "no CUDA device";                               \
  }

TEST(SlicedInputGpuTest, GivenALargeShapeWhenBuiltThenEveryRowHoldsItsSliceAndEachSliceFollowsAYieldPoint) {
  REQUIRE_CUDA();
  const int64_t rows = 8192, cols = 32000;  // 4 slices at the build budget
  const size_t slices = rowSlices(rows, cols, kBuildTrafficPerElement).size();
  ASSERT_GT(slices, 1u);
  int yields = 0, inFlight = 0;
  const at::Tensor t = buildInRowSlices(
      rows, cols, at::kBFloat16, 0,
      [&](int64_t b, int64_t k) {
        // Row r holds r (exact in bf16 up to 256; compared modulo below).
        return at::arange(b, b + k, at::device(at::kCUDA).dtype(at::kFloat)).remainder_(256).unsqueeze(1).expand({k, cols});
      },
      [&] {
        ++yields;
        if (!at::cuda::getCurrentCUDAStream().query()) ++inFlight;
        return true;
      });
  ASSERT_TRUE(t.defined());
  EXPECT_EQ(t.scalar_type(), at::kBFloat16);
  EXPECT_EQ(t.sizes(), at::IntArrayRef({rows, cols}));
  EXPECT_EQ(yields, static_cast<int>(slices));
  EXPECT_EQ(inFlight, 0);
  const at::Tensor expected =
      at::arange(rows, at::device(at::kCUDA).dtype(at::kFloat)).remainder_(256).unsqueeze(1).expand({rows, cols});
  EXPECT_TRUE(at::equal(t.to(at::kFloat), expected));
}

TEST(SlicedInputGpuTest, GivenAYieldPointThatStopsWhenBuildingThenUndefinedAndNoFurtherSlice) {
  REQUIRE_CUDA();
  int yields = 0, slicesBuilt = 0;
  const at::Tensor t = buildInRowSlices(
      8192, 32000, at::kFloat, 0,
      [&](int64_t, int64_t k) {
        ++slicesBuilt;
        return at::zeros({k, 32000}, at::device(at::kCUDA));
      },
      [&] { return ++yields < 2; });
  EXPECT_FALSE(t.defined());
  EXPECT_EQ(yields, 2);
  EXPECT_EQ(slicesBuilt, 1);
}

}  // namespace
}  // namespace hotkernel
