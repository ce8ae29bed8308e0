#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "hotkernel/optimizer/OptimizerWorker.h"
#include "hotkernel/runtime/Check.h"

namespace hotkernel {
namespace {

OptimizerJob job(int64_t rows) { return OptimizerJob{"aten::_softmax", VariantKey{2, 0, rows, 128}}; }

TEST(OptimizerWorkerTest, GivenJobsWhenEnqueuedThenEachRunsOnceInBackground) {
  std::atomic<int> runs{0};
  std::thread::id workerThread;
  OptimizerWorker w([&](const OptimizerJob&) {
    workerThread = std::this_thread::get_id();
    ++runs;
  });
  EXPECT_TRUE(w.enqueue(job(1)));
  EXPECT_TRUE(w.enqueue(job(2)));
  EXPECT_FALSE(w.enqueue(job(1)));  // de-duplicated
  ASSERT_TRUE(w.waitIdle(10.0));
  EXPECT_EQ(runs.load(), 2);
  EXPECT_NE(workerThread, std::this_thread::get_id());
  EXPECT_EQ(w.jobsDone(), 2u);
}

TEST(OptimizerWorkerTest, GivenThrowingJobWhenRunThenWorkerSurvivesAndCountsFailure) {
  std::atomic<int> runs{0};
  OptimizerWorker w([&](const OptimizerJob& j) {
    ++runs;
    if (j.key.rows == 1) HOTKERNEL_THROW("planted failure");
  });
  w.enqueue(job(1));
  w.enqueue(job(2));
  ASSERT_TRUE(w.waitIdle(10.0));
  EXPECT_EQ(runs.load(), 2);
  EXPECT_EQ(w.jobsFailed(), 1u);
}

TEST(OptimizerWorkerTest, GivenSlowJobWhenWaitingShortlyThenTimesOutWithoutBlocking) {
  std::atomic<bool> release{false};
  OptimizerWorker w([&](const OptimizerJob&) {
    while (!release.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  });
  w.enqueue(job(1));
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_FALSE(w.waitIdle(0.05));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(2));
  release = true;
  EXPECT_TRUE(w.waitIdle(10.0));
}

TEST(OptimizerWorkerTest, GivenStoppedWorkerWhenEnqueuingThenRefused) {
  OptimizerWorker w([](const OptimizerJob&) {});
  w.stop(1.0);
  EXPECT_FALSE(w.enqueue(job(1)));
}

}  // namespace
}  // namespace hotkernel
