// GpuTimeLedger: kernels joined to the external ids their launches ran under,
// whichever record comes first (Note [Attributing kernels to ops]).

#include <gtest/gtest.h>

#include "hotkernel/runtime/GpuTimeLedger.h"

namespace hotkernel {
namespace {

KernelActivity kernel(uint32_t correlation, uint64_t ns) { return {correlation, 1000, 1000 + ns}; }

TEST(GpuTimeLedgerTest, GivenCorrelationsThenKernelsWhenDeliveredThenTimeOnTheirExternalIdsAndTotalCountsAll) {
  GpuTimeLedger ledger;
  ActivityBatch b;
  b.correlations = {{1, 7}, {2, 9}, {3, 7}};
  b.kernels = {kernel(1, 100), kernel(2, 40), kernel(3, 5), kernel(4, 1000)};  // 4: launched outside any op
  ledger.onBatch(b);
  const auto byId = ledger.byExternalId();
  ASSERT_EQ(byId.count(7), 1u);
  EXPECT_EQ(byId.at(7).ns, 105u);
  EXPECT_EQ(byId.at(7).kernels, 2u);
  EXPECT_EQ(byId.at(9).ns, 40u);
  const GpuTimeLedger::Totals t = ledger.totals();
  EXPECT_EQ(t.kernelNs, 1145u);
  EXPECT_EQ(t.kernels, 4u);
  EXPECT_EQ(t.attributedNs, 145u);
  EXPECT_EQ(t.attributedKernels, 3u);
}

TEST(GpuTimeLedgerTest, GivenAKernelBeforeItsCorrelationInALaterBatchWhenDeliveredThenStillAttributed) {
  GpuTimeLedger ledger;
  ActivityBatch first;
  first.kernels = {kernel(11, 300)};
  ledger.onBatch(first);
  EXPECT_TRUE(ledger.byExternalId().empty());
  ActivityBatch second;
  second.correlations = {{11, 42}};
  ledger.onBatch(second);
  EXPECT_EQ(ledger.byExternalId().at(42).ns, 300u);
  EXPECT_EQ(ledger.totals().kernelNs, 300u);  // counted once, on arrival
}

TEST(GpuTimeLedgerTest, GivenMoreWaitingCorrelationsThanTheBoundWhenDeliveredThenTheOldestEvictedAndCounted) {
  GpuTimeLedger ledger(/*maxPending=*/2);
  ActivityBatch b;
  b.correlations = {{1, 5}, {2, 6}, {3, 7}};  // 1 is evicted
  ledger.onBatch(b);
  ActivityBatch k;
  k.kernels = {kernel(1, 10), kernel(2, 20), kernel(3, 30)};
  ledger.onBatch(k);
  const auto byId = ledger.byExternalId();
  EXPECT_EQ(byId.count(5), 0u);
  EXPECT_EQ(byId.at(6).ns, 20u);
  EXPECT_EQ(byId.at(7).ns, 30u);
  EXPECT_EQ(ledger.totals().evicted, 1u);
  EXPECT_EQ(ledger.totals().kernelNs, 60u);
}

TEST(GpuTimeLedgerTest, GivenDroppedRecordsAndZeroIdsWhenDeliveredThenDropsSummedAndZeroIdsIgnored) {
  GpuTimeLedger ledger;
  ActivityBatch b;
  b.droppedRecords = 3;
  b.correlations = {{1, 0}};
  b.kernels = {kernel(1, 10), {2, 50, 40}};  // an end before its start counts as 0 ns
  ledger.onBatch(b);
  b.kernels.clear();
  ledger.onBatch(b);
  EXPECT_TRUE(ledger.byExternalId().empty());
  EXPECT_EQ(ledger.totals().droppedRecords, 6u);
  EXPECT_EQ(ledger.totals().kernelNs, 10u);
  EXPECT_EQ(ledger.totals().kernels, 2u);
}

TEST(GpuTimeLedgerTest, GivenApiAndCorrelationRecordsWhenDeliveredThenTotalsCountEveryOneJoinedOrNot) {
  GpuTimeLedger ledger;
  ActivityBatch b;
  b.apiRecords = 3;
  b.correlations = {{1, 7}, {2, 0}, {5, 9}};  // 2: a zero id; 5: its kernel comes later
  b.kernels = {kernel(1, 10)};
  ledger.onBatch(b);
  ActivityBatch later;
  later.apiRecords = 2;
  later.kernels = {kernel(5, 20), kernel(6, 30)};  // 6: launched outside any op
  ledger.onBatch(later);
  const GpuTimeLedger::Totals t = ledger.totals();
  EXPECT_EQ(t.correlations, 3u);
  EXPECT_EQ(t.apiRecords, 5u);
  EXPECT_EQ(t.attributedKernels, 2u);
  EXPECT_EQ(t.attributedNs, 30u);
}

TEST(GpuTimeLedgerTest, GivenKernelsAndNoCorrelationRecordsWhenDeliveredThenCorrelationsZeroAndNothingAttributed) {
  GpuTimeLedger ledger;
  ActivityBatch b;
  b.kernels = {kernel(1, 10), kernel(2, 20)};
  ledger.onBatch(b);
  const GpuTimeLedger::Totals t = ledger.totals();
  EXPECT_EQ(t.kernels, 2u);
  EXPECT_EQ(t.correlations, 0u);
  EXPECT_EQ(t.apiRecords, 0u);
  EXPECT_EQ(t.attributedNs, 0u);
}

}  // namespace
}  // namespace hotkernel
