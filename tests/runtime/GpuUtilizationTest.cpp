// The NVML idle signal's wrapper (Note [NVML utilization as an idle signal]);
// the gate's use of it is in IdleGateTest with a fake.
#include <gtest/gtest.h>

#include <optional>
#include <string>

#include "hotkernel/runtime/GpuUtilization.h"

namespace hotkernel {
namespace {

TEST(GpuUtilizationTest, GivenADeviceNvmlCannotFindWhenOpenedThenNullWithAReason) {
  // Without NVML (a CPU machine) the library is missing; with it, no GPU sits at this bus id.
  std::string why;
  EXPECT_EQ(openNvmlUtilization("ffff:ff:1f.7", &why), nullptr);
  EXPECT_FALSE(why.empty());
}

TEST(GpuUtilizationTest, GivenALimitWhenAUtilizationIsReadThenAllowedAtOrBelowItOnlyOrWhenUnreadable) {
  EXPECT_TRUE(utilizationAllows(0, 0));
  EXPECT_FALSE(utilizationAllows(1, 0));
  EXPECT_TRUE(utilizationAllows(30, 30));
  EXPECT_FALSE(utilizationAllows(31, 30));
  EXPECT_TRUE(utilizationAllows(std::nullopt, 30));  // a failed read falls back to the dispatch signal
  EXPECT_TRUE(utilizationAllows(100, -1));           // no limit
}

}  // namespace
}  // namespace hotkernel
