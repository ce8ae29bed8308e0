// The rows a row family's tuner tunes on (Note [Tuning on a row subset]):
// all of them when they fit the cap, else the most that fit, never fewer
// than fill the GPU; for a family that allows it, else the harness on fewer
// rows than the timed calls (Note [A harness on fewer rows]); refused when
// not even those fit.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <optional>
#include <string>

#include "hotkernel/optimizer/TuningRows.h"
#include "hotkernel/runtime/Check.h"

namespace hotkernel {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;

// fp32 [4096, 400000] as the softmax tuner sees it: 12 row buffers a row, a
// 50 MiB L2's flush buffer twice over.
TuningMemory longRows() {
  TuningMemory m;
  m.bytesPerRow = 12 * 400000 * 4;
  m.fixedBytes = 2 * 50 * kMiB;
  return m;
}

TEST(TuningRowsTest, GivenOneRowACtaOn132SmsWhenFillRowsThenEightCtasAnSm) {
  EXPECT_EQ(fillRows(132, 1), 8 * 132);
  EXPECT_EQ(fillRows(132, 0), 8 * 132);  // no point serves fewer than one row a CTA
}

TEST(TuningRowsTest, GivenSeveralRowsACtaWhenFillRowsThenScaledByTheMostRowsACta) {
  EXPECT_EQ(fillRows(132, 32), 8 * 132 * 32);
  EXPECT_EQ(fillRows(1, 4), 8 * 4);
}

TEST(TuningRowsTest, GivenNoSmsWhenFillRowsThenError) { EXPECT_THROW(fillRows(0, 1), Error); }

TEST(TuningRowsTest, GivenOuterRowsOfSeveralCtasWhenFillRowsOfCtasThenTheFewestRowsGivingEightCtasAnSm) {
  EXPECT_EQ(fillRowsOfCtas(132, 1), 8 * 132);
  EXPECT_EQ(fillRowsOfCtas(132, 0), 8 * 132);  // every row takes at least one CTA
  EXPECT_EQ(fillRowsOfCtas(132, 8), 132);
  EXPECT_EQ(fillRowsOfCtas(132, 7), (8 * 132 + 6) / 7);  // rounded up: never fewer CTAs than the fill
  EXPECT_GE(fillRowsOfCtas(132, 7) * 7, 8 * 132);
  EXPECT_EQ(fillRowsOfCtas(132, 100000), 1);  // one outer row of many tiles fills the GPU alone
  EXPECT_THROW(fillRowsOfCtas(0, 1), Error);
}

TEST(TuningRowsTest, GivenVariantThatFitsWhenTuningRowCountThenAllRows) {
  const TuningMemory m = longRows();
  EXPECT_EQ(tuningRowCount(4096, fillRows(132, 1), m, m.bytes(4096)), 4096);
  EXPECT_EQ(tuningRowCount(4096, fillRows(132, 1), m, m.bytes(4096) + 1), 4096);
}

TEST(TuningRowsTest, GivenNoCapWhenTuningRowCountThenAllRows) {
  EXPECT_EQ(tuningRowCount(4096, fillRows(132, 1), longRows(), 0), 4096);
  EXPECT_EQ(tuningRowCount(int64_t{1} << 40, fillRows(132, 1), longRows(), -1), int64_t{1} << 40);
}

TEST(TuningRowsTest, GivenVariantOverTheCapWhenTuningRowCountThenTheMostRowsThatFitAndAtLeastTheFill) {
  const TuningMemory m = longRows();
  const int64_t cap = int64_t{35} << 30;
  ASSERT_GT(m.bytes(4096), cap);
  const std::optional<int64_t> rows = tuningRowCount(4096, fillRows(132, 1), m, cap);
  ASSERT_TRUE(rows.has_value());
  EXPECT_LT(*rows, 4096);
  EXPECT_GE(*rows, fillRows(132, 1));
  EXPECT_LE(m.bytes(*rows), cap);
  EXPECT_GT(m.bytes(*rows + 1), cap);  // the most that fit
  EXPECT_EQ(*rows, (cap - m.fixedBytes) / m.bytesPerRow);
}

TEST(TuningRowsTest, GivenCapHoldingExactlyTheFillWhenTuningRowCountThenTheFill) {
  const TuningMemory m = longRows();
  const int64_t fill = fillRows(132, 1);
  EXPECT_EQ(tuningRowCount(4096, fill, m, m.bytes(fill)), fill);
}

TEST(TuningRowsTest, GivenFillOverTheCapWhenTuningRowCountThenRefused) {
  const TuningMemory m = longRows();
  const int64_t fill = fillRows(132, 1);
  EXPECT_FALSE(tuningRowCount(4096, fill, m, m.bytes(fill) - 1).has_value());
  EXPECT_FALSE(tuningRowCount(4096, fill, m, m.fixedBytes - 1).has_value());  // not even the flush buffer
}

TEST(TuningRowsTest, GivenFewerRowsThanTheFillWhenAllDoNotFitThenRefused) {
  const TuningMemory m = longRows();
  const int64_t fill = fillRows(132, 32);
  ASSERT_GT(fill, 4096);
  EXPECT_EQ(tuningRowCount(4096, fill, m, m.bytes(4096)), 4096);
  EXPECT_FALSE(tuningRowCount(4096, fill, m, m.bytes(4096) - 1).has_value());
}

TEST(TuningRowsTest, GivenHugeVariantWhenBytesThenSaturatesInsteadOfOverflowing) {
  const TuningMemory m = longRows();
  EXPECT_EQ(m.bytes(std::numeric_limits<int64_t>::max() / 2), std::numeric_limits<int64_t>::max());
  EXPECT_EQ(m.bytes(0), m.fixedBytes);
  // A variant whose bytes overflow int64 still gets the most rows that fit.
  const int64_t cap = int64_t{35} << 30;
  EXPECT_EQ(tuningRowCount(std::numeric_limits<int64_t>::max() / 2, fillRows(132, 1), m, cap),
            (cap - m.fixedBytes) / m.bytesPerRow);
}

TEST(TuningRowsTest, GivenFillOverTheCapWhenTuningRowsWithinCapThenErrorNamesTheFewestRowsAndTheCap) {
  const TuningMemory m = longRows();
  const int64_t fill = fillRows(132, 1);
  try {
    tuningRowsWithinCap("softmax_lastdim", 4096, 400000, fill, m, m.bytes(fill) - 1);
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("tuning softmax_lastdim 4096x400000 needs ~" + std::to_string(m.bytes(fill) >> 20) +
                        " MiB of GPU memory on its fewest rows (" + std::to_string(fill) +
                        ", enough to fill the GPU), over the cap of " + std::to_string((m.bytes(fill) - 1) >> 20) +
                        " MiB"),
              std::string::npos)
        << what;
  }
}

TEST(TuningRowsTest, GivenFewRowsOverTheCapWhenTuningRowsWithinCapThenErrorNamesTheVariantsNeed) {
  const TuningMemory m = longRows();
  try {
    tuningRowsWithinCap("rms_norm", 64, 400000, fillRows(132, 1), m, m.bytes(64) - 1);
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("tuning rms_norm 64x400000 needs ~" + std::to_string(m.bytes(64) >> 20) +
                        " MiB of GPU memory, over the cap of "),
              std::string::npos)
        << what;
  }
}

TEST(TuningRowsTest, GivenSubsetThatFitsWhenTuningRowsWithinCapThenTheSubset) {
  const TuningMemory m = longRows();
  const int64_t cap = int64_t{35} << 30;
  const int64_t subset = *tuningRowCount(4096, fillRows(132, 1), m, cap);
  EXPECT_EQ(tuningRowsWithinCap("softmax_lastdim", 4096, 400000, fillRows(132, 1), m, cap),
            (TuningRowCounts{subset, subset}));
}

// fp32 [64, 2048, 4096] argmax over dim 1 as the middle-dim tuner sees it: 64
// outer rows of 32 MiB, 12 buffers a harness row, 7 a timed row, and CTAs of
// one tile of 512 positions (8 a row: 132 rows to fill 132 SMs).
TuningMemory middleDimRows() {
  TuningMemory m;
  const int64_t rowBytes = int64_t{2048} * 4096 * 4;
  m.bytesPerRow = 12 * rowBytes;
  m.timedBytesPerRow = 7 * rowBytes;
  m.fixedBytes = 2 * 50 * kMiB;
  return m;
}

TEST(TuningRowsTest, GivenFewOuterRowsWhoseHarnessOverrunsTheCapWhenTuningRowCountsThenTheHarnessRunsOnFewerRows) {
  const TuningMemory m = middleDimRows();
  const int64_t fill = fillRowsOfCtas(132, 8);
  ASSERT_GT(fill, 64);  // no subset of the 64 outer rows fills the GPU
  const int64_t cap = int64_t{20269} * kMiB;  // an 80 GB GPU's optimizer cap
  ASSERT_GT(m.bytes(64), cap);
  EXPECT_FALSE(tuningRowCount(64, fill, m, cap).has_value());
  const std::optional<TuningRowCounts> rows = tuningRowCounts(64, fill, m, cap);
  ASSERT_TRUE(rows.has_value());
  EXPECT_EQ(rows->timed, 64);  // the timed calls on all rows
  EXPECT_EQ(rows->harness, (cap - m.fixedBytes - 64 * m.timedBytesPerRow) / m.bytesPerRow);
  EXPECT_GE(rows->harness, kFewestHarnessRows);
  EXPECT_LT(rows->harness, 64);
  EXPECT_LE(m.fixedBytes + rows->timed * m.timedBytesPerRow + rows->harness * m.bytesPerRow, cap);
}

TEST(TuningRowsTest, GivenTheCapHoldsTheTimedRowsAndTheFewestHarnessRowsExactlyWhenTuningRowCountsThenThoseRows) {
  const TuningMemory m = middleDimRows();
  const int64_t fill = fillRowsOfCtas(132, 8);
  const int64_t cap = m.bytes(kFewestHarnessRows) + 64 * m.timedBytesPerRow;
  EXPECT_EQ(tuningRowCounts(64, fill, m, cap), (TuningRowCounts{64, kFewestHarnessRows}));
  EXPECT_FALSE(tuningRowCounts(64, fill, m, cap - 1).has_value());  // one byte less: a timed row short
}

TEST(TuningRowsTest, GivenManyRowsWhenTheTimedCallsFitOnlyASubsetThenTheyRunOnTheMostThatFitAboveTheFill) {
  // 4096 rows, the fill 1056: the timed calls on fewer rows than the variant's, but never fewer than the fill.
  TuningMemory m = longRows();
  m.timedBytesPerRow = 7 * 400000 * 4;
  const int64_t fill = fillRows(132, 1);
  const int64_t cap = m.bytes(kFewestHarnessRows) + 1500 * m.timedBytesPerRow;
  ASSERT_FALSE(tuningRowCount(4096, fill, m, cap).has_value());
  EXPECT_EQ(tuningRowCounts(4096, fill, m, cap), (TuningRowCounts{1500, kFewestHarnessRows}));
  const int64_t tooSmall = m.bytes(kFewestHarnessRows) + (fill - 1) * m.timedBytesPerRow;
  EXPECT_FALSE(tuningRowCounts(4096, fill, m, tooSmall).has_value());
}

TEST(TuningRowsTest, GivenAVariantOfFewerRowsThanTheFewestHarnessRowsWhenTheCapRefusesItThenSoDoesTheSplit) {
  // The harness would run on all 2 rows: a split holds more than the variant whole.
  const TuningMemory m = middleDimRows();
  EXPECT_FALSE(tuningRowCounts(2, 1000, m, m.bytes(2) - 1).has_value());
  EXPECT_EQ(tuningRowCounts(2, 1000, m, m.bytes(2)), (TuningRowCounts{2, 2}));
}

TEST(TuningRowsTest, GivenASplitNeedingMoreThanTheFewestRowsWholeWhenRefusedThenErrorNamesTheWholeRowsNeed) {
  // 2 rows: a split (both harness rows besides 2 timed ones) takes more than the 2 rows whole.
  const TuningMemory m = middleDimRows();
  try {
    tuningRowsWithinCap("argmax_lastdim", 2, 2048 * 4096, 1000, m, m.bytes(2) - 1);
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("tuning argmax_lastdim 2x8388608 needs ~" + std::to_string(m.bytes(2) >> 20) +
                        " MiB of GPU memory, over the cap of "),
              std::string::npos)
        << what;
  }
}

TEST(TuningRowsTest, GivenNoTimedBytesWhenTheCapRefusesTheVariantThenNoSplit) {
  TuningMemory m = middleDimRows();
  m.timedBytesPerRow = 0;
  EXPECT_FALSE(tuningRowCounts(64, fillRowsOfCtas(132, 8), m, int64_t{20269} * kMiB).has_value());
  EXPECT_EQ(tuningRowCounts(64, fillRowsOfCtas(132, 8), m, m.bytes(64)), (TuningRowCounts{64, 64}));
}

TEST(TuningRowsTest, GivenASplitOverTheCapWhenTuningRowsWithinCapThenErrorNamesTheSplitsNeed) {
  const TuningMemory m = middleDimRows();
  const int64_t need = m.bytes(kFewestHarnessRows) + 64 * m.timedBytesPerRow;
  try {
    tuningRowsWithinCap("argmax_lastdim", 64, 2048 * 4096, fillRowsOfCtas(132, 8), m, need - 1);
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("tuning argmax_lastdim 64x8388608 needs ~" + std::to_string(need >> 20) +
                        " MiB of GPU memory even with its timed calls on 64 rows and its harness on 4, over the cap"),
              std::string::npos)
        << what;
  }
}

}  // namespace
}  // namespace hotkernel
