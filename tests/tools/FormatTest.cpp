// Format: the CLI's value formatters.

#include <gtest/gtest.h>

#include "Format.h"

namespace hotkernel::cli {
namespace {

TEST(FormatTest, GivenSizesWhenFormatBytesThenBinaryUnits) {
  EXPECT_EQ(formatBytes(0), "0 B");
  EXPECT_EQ(formatBytes(1023), "1023 B");
  EXPECT_EQ(formatBytes(1024), "1.0 KiB");
  EXPECT_EQ(formatBytes(5000), "4.9 KiB");
  EXPECT_EQ(formatBytes(3 * 1024 * 1024), "3.0 MiB");
}

TEST(FormatTest, GivenUnixTimeWhenFormatUtcThenIsoLikeUtc) {
  EXPECT_EQ(formatUtc(1735689600), "2025-01-01 00:00:00");
  EXPECT_EQ(formatUtc(0), "-");
}

TEST(FormatTest, GivenMetricsWhenFormatSpeedupThenTwoDecimalsOrDash) {
  EXPECT_EQ(formatSpeedup(R"({"speedup":1.4249})"), "1.42x");
  EXPECT_EQ(formatSpeedup(R"({"speedup":"fast"})"), "-");
  EXPECT_EQ(formatSpeedup("{}"), "-");
  EXPECT_EQ(formatSpeedup("not json"), "-");
}

}  // namespace
}  // namespace hotkernel::cli
