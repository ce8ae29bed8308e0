// The tuner applies a target's stop rules (Note [Stopping a target's search]):
// its budget (waits in the yield point not charged) and the near-roofline
// stop, recorded in metrics["target"] for the experiment log.

#include <gtest/gtest.h>

#include <ATen/cuda/CUDAContext.h>

#include <chrono>
#include <thread>

#include "hotkernel/optimizer/SoftmaxTuner.h"
#include "hotkernel/optimizer/TargetBudget.h"
#include "hotkernel/runtime/Nvrtc.h"

namespace hotkernel {
namespace {

#define REQUIRE_CUDA_AND_NVRTC()                                    \
  if (!at::cuda::is_available() || at::cuda::device_count() == 0) { \
    GTEST_SKIP() << "no CUDA device";                               \
  }                                                                 \
  if (!nvrtcAvailable()) GTEST_SKIP() << "no NVRTC"

const kernels::SoftmaxVariant kVariant{kernels::DType::BFloat16, 2048, 8192};

TEST(TunerStopGpuTest, GivenTinyBudgetWhenTunedThenSearchStopsAfterFirstRoundWithBudgetSpent) {
  REQUIRE_CUDA_AND_NVRTC();
  TargetBudget budget;
  budget.budgetSeconds = 0.05;  // less than one round of compiles
  TargetClock clock(budget);
  TunerOptions options;
  options.clock = &clock;
  options.yieldPoint = clock.wrapYield([] {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));  // "waiting for idle GPU time"
    return true;
  });
  const auto t0 = std::chrono::steady_clock::now();
  TuneOutcome out = tuneSoftmax(kVariant, 0, options);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_TRUE(out.metrics.target && out.metrics.search) << out.metrics.toJson().dump(2);
  EXPECT_EQ(out.metrics.search->stop, SearchStop::OutOfTime);
  EXPECT_EQ(out.metrics.search->rounds, 1);
  const nlohmann::json& target = *out.metrics.target;
  EXPECT_EQ(target["stop"], "budget_spent");
  EXPECT_DOUBLE_EQ(target["budgetSeconds"].get<double>(), 0.05);
  EXPECT_GT(target["waitedSeconds"].get<double>(), 0.0);
  EXPECT_GE(target["spentSeconds"].get<double>(), 0.05);
  EXPECT_LE(target["spentSeconds"].get<double>() + target["waitedSeconds"].get<double>(), wall + 0.01);
}

TEST(TunerStopGpuTest, GivenEveryCandidateWithinNinetyPercentOfRooflineWhenTunedThenStopsNearRoofline) {
  REQUIRE_CUDA_AND_NVRTC();
  TargetBudget budget;
  budget.rooflineSecondsPerCall = 1.0;  // a planted roofline of 1 s per call: any correct candidate is "there"
  TargetClock clock(budget);
  TunerOptions options;
  options.clock = &clock;
  TuneOutcome out = tuneSoftmax(kVariant, 0, options);
  ASSERT_TRUE(out.metrics.target && out.metrics.search) << out.metrics.toJson().dump(2);
  EXPECT_EQ(out.metrics.search->stop, SearchStop::GoodEnough);
  EXPECT_EQ(out.metrics.search->rounds, 1);
  EXPECT_EQ(out.metrics.target->at("stop"), "near_roofline");
  EXPECT_GT(out.metrics.target->at("bestUs").get<double>(), 0.0);
  EXPECT_GT(out.metrics.target->at("rooflineFraction").get<double>(), 0.9);
}

TEST(TunerStopGpuTest, GivenNoClockWhenTunedThenNoTargetSummaryAndTheSearchsOwnStop) {
  REQUIRE_CUDA_AND_NVRTC();
  TunerOptions options;
  options.searchEvaluations = 12;
  TuneOutcome out = tuneSoftmax(kernels::SoftmaxVariant{kernels::DType::BFloat16, 256, 4096}, 0, options);
  EXPECT_FALSE(out.metrics.target.has_value());
  ASSERT_TRUE(out.metrics.search.has_value());
  EXPECT_NE(out.metrics.search->stop, SearchStop::OutOfTime);
  EXPECT_NE(out.metrics.search->stop, SearchStop::GoodEnough);
}

}  // namespace
}  // namespace hotkernel
