#include <gtest/gtest.h>

#include "hotkernel/optimizer/WorkSlices.h"

namespace hotkernel {
namespace {

TEST(WorkSlicesTest, GivenTheYieldBenchVariantWhenComparedThenEachSliceStaysWithinTheTrafficBudget) {
  // bf16 [4096, 32000], the variant bench/YieldLatencyBench.cpp tunes.
  const int64_t rows = 4096, cols = 32000;
  const int64_t step = rowsPerSlice(rows, cols, kCompareTrafficPerElement);
  EXPECT_EQ(step, kSliceTrafficBytes / (cols * kCompareTrafficPerElement));  // 349 rows: 12 slices
  EXPECT_LE(step * cols * kCompareTrafficPerElement, kSliceTrafficBytes);
  EXPECT_GT((step + 1) * cols * kCompareTrafficPerElement, kSliceTrafficBytes);
  const std::vector<RowSlice> s = rowSlices(rows, cols, kCompareTrafficPerElement);
  EXPECT_EQ(s.size(), static_cast<size_t>((rows + step - 1) / step));
}

TEST(WorkSlicesTest, GivenAnyShapeWhenSlicedThenSlicesCoverEveryRowOnceInOrder) {
  for (int64_t rows : {1, 2, 7, 33, 4097, 8192}) {
    for (int64_t cols : {1, 1000, 32000, 128256}) {
      const std::vector<RowSlice> s = rowSlices(rows, cols, kCompareTrafficPerElement, 64 << 20);
      ASSERT_FALSE(s.empty());
      int64_t next = 0;
      for (const RowSlice& r : s) {
        EXPECT_EQ(r.begin, next);
        EXPECT_GE(r.rows, 1);
        next += r.rows;
      }
      EXPECT_EQ(next, rows) << rows << "x" << cols;
      // All but the last slice have the full step.
      for (size_t i = 0; i + 1 < s.size(); ++i) EXPECT_EQ(s[i].rows, s[0].rows);
    }
  }
}

TEST(WorkSlicesTest, GivenSmallTensorWhenSlicedThenOneSlice) {
  const std::vector<RowSlice> s = rowSlices(7, 1000, kCompareTrafficPerElement);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].begin, 0);
  EXPECT_EQ(s[0].rows, 7);
}

TEST(WorkSlicesTest, GivenRowOverTheBudgetWhenSlicedThenOneRowPerSlice) {
  EXPECT_EQ(rowsPerSlice(10, 1 << 20, 128, 1 << 20), 1);  // a row is 128 MiB, the budget 1 MiB
  EXPECT_EQ(rowSlices(10, 1 << 20, 128, 1 << 20).size(), 10u);
  // Products that would overflow int64 still give one row.
  EXPECT_EQ(rowsPerSlice(3, int64_t{1} << 60, 1 << 10, kSliceTrafficBytes), 1);
}

TEST(WorkSlicesTest, GivenEmptyOrDegenerateSizesWhenSlicedThenNoSlices) {
  EXPECT_EQ(rowsPerSlice(0, 100, 128), 0);
  EXPECT_EQ(rowsPerSlice(100, 0, 128), 0);
  EXPECT_TRUE(rowSlices(0, 100, 128).empty());
  EXPECT_TRUE(rowSlices(-3, 100, 128).empty());
  // A non-positive traffic estimate or budget is treated as 1 byte, never a division by zero.
  EXPECT_EQ(rowsPerSlice(5, 10, 0, 0), 1);
}

}  // namespace
}  // namespace hotkernel
