// The ranking's GPU measurements on the real device: the copy bandwidth peak
// and a real softmax target's ATen time, ranked with a sane headroom.

#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>

#include "hotkernel/kernels/DType.h"
#include "hotkernel/kernels/FamilyDescriptor.h"
#include "hotkernel/kernels/SoftmaxFamily.h"
#include "hotkernel/kernels/VariantOptions.h"
#include "hotkernel/optimizer/GpuTargetMeasurer.h"
#include "hotkernel/optimizer/QueueRanker.h"
#include "hotkernel/runtime/Check.h"

namespace hotkernel {
namespace {

#define REQUIRE_CUDA()                                              \
  if (!at::cuda::is_available() || at::cuda::device_count() == 0) { \
    GTEST_SKIP() << "no CUDA device";                               \
  }

// No GPU needed: the buffer sizing of Note [Copy bandwidth peak].
TEST(GpuTargetMeasurerGpuTest, GivenCapWhenCopyBufferSizedThenFitsTheCapAndStaysPastTheL2) {
  const int64_t l2 = int64_t{60} << 20, mib = int64_t{1} << 20;
  EXPECT_EQ(GpuTargetMeasurer::copyBufferBytes(l2, int64_t{35} << 30), 1024 * mib);  // a quarter of an H200
  const int64_t tight = GpuTargetMeasurer::copyBufferBytes(l2, 2400 * mib);  // (2400 - 120) / 2 = 1140 > 1024
  EXPECT_EQ(tight, 1024 * mib);
  const int64_t small = GpuTargetMeasurer::copyBufferBytes(l2, 380 * mib);  // (380 - 120) / 2 = 130
  EXPECT_EQ(small, 130 * mib);
  EXPECT_LE(2 * small + 2 * l2, 380 * mib);
  const int64_t edge = GpuTargetMeasurer::copyBufferBytes(l2, 360 * mib);  // (360 - 120) / 2 = 120 = 2 x L2
  EXPECT_EQ(edge, 120 * mib);
  EXPECT_EQ(GpuTargetMeasurer::copyBufferBytes(l2, 300 * mib), 0);  // 90 MiB < 2 x L2: cannot measure
}

TEST(GpuTargetMeasurerGpuTest, GivenDeviceWhenCopyBandwidthMeasuredThenPlausible) {
  REQUIRE_CUDA();
  GpuTargetMeasurer m;
  const MachinePeaks peaks = m.measurePeaks(0);
  RecordProperty("copy_GBps", static_cast<int>(peaks.copyBytesPerSecond / 1e9));
  EXPECT_GT(peaks.copyBytesPerSecond, 100e9);  // any datacenter GPU of this decade
  EXPECT_LT(peaks.copyBytesPerSecond, 20e12);  // above any HBM: the timing would be wrong
  EXPECT_EQ(peaks.flopsPerSecond, 0);          // Note [Memory-bound families have no FLOP term]
  // Measured twice, the same machine: within 25%.
  const MachinePeaks again = m.measurePeaks(0);
  EXPECT_NEAR(again.copyBytesPerSecond / peaks.copyBytesPerSecond, 1.0, 0.25);
}

TEST(GpuTargetMeasurerGpuTest, GivenCapTooSmallWhenMeasuringThenError) {
  REQUIRE_CUDA();
  GpuMeasurerOptions o;
  o.memoryCapBytes = int64_t{8} << 20;
  GpuTargetMeasurer m(o);
  EXPECT_THROW(m.measurePeaks(0), Error);
  EXPECT_THROW(m.measureSecondsPerCall("aten::_softmax", VariantKey{static_cast<int32_t>(kernels::DType::BFloat16), 0,
                                                                    4096, 32000}),
               Error);
  EXPECT_THROW(GpuTargetMeasurer().measureSecondsPerCall("aten::mm", VariantKey{0, 0, 8, 8}), Error);
}

TEST(GpuTargetMeasurerGpuTest, GivenYieldPointThatRefusesWhenMeasuringThenInterrupted) {
  REQUIRE_CUDA();
  GpuMeasurerOptions o;
  o.yieldPoint = [] { return false; };
  EXPECT_THROW(GpuTargetMeasurer(o).measurePeaks(0), Error);
}

// bf16 softmax 4096 x 32000 (524 MB per call): eager runs at ~40% of the copy
// bandwidth on an H200. Whatever the GPU, ATen cannot beat the copy by much
// and is not 50x off it; the ranking must see it with a headroom in [0, 1).
TEST(GpuTargetMeasurerGpuTest, GivenRealSoftmaxTargetWhenRankedThenSaneHeadroomAndSaving) {
  REQUIRE_CUDA();
  GpuTargetMeasurer m;
  const VariantKey key{static_cast<int32_t>(kernels::DType::BFloat16), 0, 4096, 32000};
  const double seconds = m.measureSecondsPerCall("aten::_softmax", key);
  const MachinePeaks peaks = m.measurePeaks(0);
  const double roofline = kernels::SoftmaxFamily::bytesMoved({kernels::DType::BFloat16, 4096, 32000}) /
                          peaks.copyBytesPerSecond;
  RecordProperty("aten_us", static_cast<int>(seconds * 1e6));
  RecordProperty("roofline_us", static_cast<int>(roofline * 1e6));
  EXPECT_GT(seconds, 0.8 * roofline);
  EXPECT_LT(seconds, 50 * roofline);

  QueueRankerHooks hooks;
  hooks.estimatedCalls = [](const OptimizerJob&) { return 1000.0; };
  std::vector<SkippedTarget> skipped;
  hooks.onSkipped = [&skipped](const OptimizerJob&, const SkippedTarget& s) { skipped.push_back(s); };
  QueueRanker ranker(m, RankingOptions{}, hooks);
  QueueRanking r = ranker.rank({OptimizerJob{"aten::_softmax", key, std::nullopt}});
  ASSERT_TRUE(r.peaks.has_value());
  if (r.order.queue.empty()) {
    // Only on a GPU where ATen's softmax is already at >= 90% of the copy: kept, with that reason.
    ASSERT_EQ(skipped.size(), 1u);
    EXPECT_EQ(skipped[0].reason, TargetStop::NearRoofline);
    EXPECT_GE(skipped[0].rooflineFraction, 0.9);
    return;
  }
  ASSERT_EQ(r.order.queue.size(), 1u);
  ASSERT_TRUE(r.order.queue[0].target.has_value());
  const RankedTarget& t = *r.order.queue[0].target;
  RecordProperty("headroom_pct", static_cast<int>(t.headroom * 100));
  EXPECT_GT(t.headroom, 0.0);
  EXPECT_LT(t.headroom, 0.95);
  EXPECT_NEAR(t.rooflineFraction, 1.0 - t.headroom, 1e-9);
  EXPECT_NEAR(t.target.gpuSeconds, 1000 * t.target.currentSecondsPerCall, 1e-12);
  EXPECT_NEAR(t.expectedSavingSeconds, t.target.gpuSeconds * t.headroom, 1e-12);
  EXPECT_DOUBLE_EQ(t.budgetSeconds, RankingOptions{}.budgetSeconds);  // alone: the whole pass
  // The ATen time the ranking used is the one measured (same method, same GPU): within 25%.
  EXPECT_NEAR(t.target.currentSecondsPerCall / seconds, 1.0, 0.25);
}

TEST(GpuTargetMeasurerGpuTest, GivenReductionTargetsWhenTimedThenPositiveAndBelowASecond) {
  REQUIRE_CUDA();
  GpuTargetMeasurer m;
  for (const char* op : {"aten::sum.dim_IntList", "aten::mean.dim", "aten::amax", "aten::argmax"}) {
    const double s =
        m.measureSecondsPerCall(op, VariantKey{static_cast<int32_t>(kernels::DType::BFloat16), 0, 4096, 32000});
    EXPECT_GT(s, 1e-6) << op;  // 262 MB read: tens of microseconds at least
    EXPECT_LT(s, 1.0) << op;
  }
  VariantKey weighted{static_cast<int32_t>(kernels::DType::BFloat16), 0, 64, 64};
  weighted.options = kernels::variant_options::kWeight;
  EXPECT_THROW(m.measureSecondsPerCall("aten::amax", weighted), Error);
}

// Note [The ATen reference]: one table row per family, so every family's
// variant is timed (a family without a reference throws "no tuner").
TEST(GpuTargetMeasurerGpuTest, GivenEveryFamilyWhenItsVariantIsTimedThenItsAtenReferenceRunsAndTakesTime) {
  REQUIRE_CUDA();
  GpuTargetMeasurer m;
  for (const kernels::FamilyDescriptor* f : kernels::allFamilies()) {
    const kernels::FamilyDescriptor& family = *f;
    VariantKey key{static_cast<int32_t>(kernels::DType::BFloat16), 0, 2048, 4096};
    key.options = std::string(family.name) == "cross_entropy" ? kernels::reductionOptions(1) : family.optionFields;
    if (std::string(family.name).find("mm_pad_n") != std::string::npos) {  // [2048, 512] x [512, 4097] (+ bias)
      key.cols = 4097;
      key.inner = 512;
    }
    ASSERT_TRUE(family.servesKey(key)) << family.name;
    const double s = m.measureSecondsPerCall(family.atenOp, key);
    EXPECT_GT(s, 1e-6) << family.name;  // 16 MB read: microseconds at least
    EXPECT_LT(s, 1.0) << family.name;
  }
}

}  // namespace
}  // namespace hotkernel
