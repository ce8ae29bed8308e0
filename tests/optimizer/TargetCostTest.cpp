// The per-call cost model the roofline is computed from.

#include <gtest/gtest.h>

#include "hotkernel/kernels/DType.h"
#include "hotkernel/optimizer/TargetCost.h"

namespace hotkernel {
namespace {

constexpr int32_t kBf16 = static_cast<int32_t>(kernels::DType::BFloat16);
constexpr int32_t kF32 = static_cast<int32_t>(kernels::DType::Float32);

TEST(TargetCostTest, GivenSoftmaxVariantWhenCostedThenInputReadAndOutputWrittenOnceNoFlops) {
  std::optional<CallCost> c = callCost("aten::_softmax", VariantKey{kBf16, 0, 4096, 32000});
  ASSERT_TRUE(c.has_value());
  EXPECT_DOUBLE_EQ(c->bytes, 2.0 * 4096 * 32000 * 2);
  EXPECT_DOUBLE_EQ(c->flops, 0);  // Note [Memory-bound families have no FLOP term]
  std::optional<CallCost> f = callCost("aten::_log_softmax", VariantKey{kF32, 0, 8, 1000});
  ASSERT_TRUE(f.has_value());
  EXPECT_DOUBLE_EQ(f->bytes, 2.0 * 8 * 1000 * 4);
}

TEST(TargetCostTest, GivenUnknownOpOrUnservableVariantWhenCostedThenNothing) {
  EXPECT_FALSE(callCost("aten::mm", VariantKey{kBf16, 0, 64, 64}).has_value());
  EXPECT_FALSE(callCost("aten::_softmax", VariantKey{kBf16, 0, 0, 64}).has_value());
}

}  // namespace
}  // namespace hotkernel
