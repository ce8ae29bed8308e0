#include <gtest/gtest.h>

#include "hotkernel/runtime/KernelArgs.h"
#include "hotkernel/runtime/PlanTable.h"

namespace hotkernel {
namespace {

TEST(KernelArgsTest, GivenMixedArgumentsWhenFilledThenEachParamPointsAtItsValue) {
  int x = 0;
  KernelArgs a;
  a.pointer(&x).pointer(nullptr).int64(-7).int64(int64_t{1} << 40).float32(1e-5f);
  ASSERT_TRUE(a.valid());
  ASSERT_EQ(a.size(), 5u);
  void* params[KernelArgs::kMaxArgs];
  a.fillParams(params);
  // What cuLaunchKernel reads: sizeof(parameter) bytes at each pointer.
  EXPECT_EQ(*static_cast<const void* const*>(params[0]), &x);
  EXPECT_EQ(*static_cast<const void* const*>(params[1]), nullptr);
  EXPECT_EQ(*static_cast<const long long*>(params[2]), -7);
  EXPECT_EQ(*static_cast<const long long*>(params[3]), 1ll << 40);
  EXPECT_EQ(*static_cast<const float*>(params[4]), 1e-5f);
  EXPECT_EQ(a.pointerAt(0), &x);
  EXPECT_EQ(a.int64At(2), -7);
  EXPECT_EQ(a.float32At(4), 1e-5f);
  EXPECT_EQ(a.kindAt(4), KernelArgs::Kind::Float32);
}

TEST(KernelArgsTest, GivenMoreThanMaxArgumentsWhenAppendingThenListIsInvalid) {
  KernelArgs a;
  for (size_t i = 0; i < KernelArgs::kMaxArgs; ++i) a.int64(static_cast<int64_t>(i));
  EXPECT_TRUE(a.valid());
  a.int64(99);
  EXPECT_FALSE(a.valid());
  EXPECT_EQ(a.size(), KernelArgs::kMaxArgs);
}

TEST(VariantKeyTest, GivenSameShapeWhenOptionsDifferThenKeysDifferAndPlansAreSeparate) {
  const VariantKey plain{2, 0, 64, 4096};
  VariantKey withOption = plain;
  withOption.options = 1;
  EXPECT_FALSE(plain == withOption);
  EXPECT_NE(VariantKeyHash{}(plain), VariantKeyHash{}(withOption));
  PlanTable table;
  Plan a;
  a.key = plain;
  a.description = "plain";
  Plan b;
  b.key = withOption;
  b.description = "with option";
  auto t = table.with(a)->with(b);
  ASSERT_NE(t->find(plain), nullptr);
  ASSERT_NE(t->find(withOption), nullptr);
  EXPECT_EQ(t->find(plain)->description, "plain");
  EXPECT_EQ(t->find(withOption)->description, "with option");
}

}  // namespace
}  // namespace hotkernel
