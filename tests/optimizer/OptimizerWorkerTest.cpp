#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include "hotkernel/optimizer/OptimizerWorker.h"
#include "hotkernel/runtime/Check.h"

namespace hotkernel {
namespace {

OptimizerJob job(int64_t rows) { return OptimizerJob{"aten::_softmax", VariantKey{2, 0, rows, 128}, std::nullopt}; }

// Holds the first job until released, so the test can queue the others behind it.
struct Gate {
  std::atomic<bool> open{false};
  void wait() const {
    while (!open.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
};

// A ranker: larger rows first (a stand-in for the expected saving), a budget of
// rows seconds, rows == 3 dropped; counts its calls.
struct RowsRanker {
  std::atomic<int> calls{0};
  JobOrder operator()(const std::vector<OptimizerJob>& queued) {
    ++calls;
    JobOrder o;
    for (const OptimizerJob& j : queued) {
      if (j.key.rows == 3) {
        o.dropped.push_back(j);
        continue;
      }
      OptimizerJob ranked = j;
      ranked.target = RankedTarget{};
      ranked.target->budgetSeconds = static_cast<double>(j.key.rows);
      o.queue.push_back(ranked);
    }
    std::sort(o.queue.begin(), o.queue.end(),
              [](const OptimizerJob& a, const OptimizerJob& b) { return a.key.rows > b.key.rows; });
    return o;
  }
};

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

TEST(OptimizerWorkerTest, GivenRankerWhenJobsQueueBehindARunningOneThenRunLargestSavingFirstWithTheirBudgets) {
  Gate gate;
  RowsRanker ranker;
  std::mutex mu;
  std::vector<std::pair<int64_t, double>> ran;  // rows, budget given
  OptimizerWorker w([&](const OptimizerJob& j) {
    if (j.key.rows == 1) gate.wait();
    std::lock_guard<std::mutex> guard(mu);
    ran.emplace_back(j.key.rows, j.target ? j.target->budgetSeconds : -1.0);
  });
  w.setRanker([&ranker](const std::vector<OptimizerJob>& q) { return ranker(q); });
  ASSERT_TRUE(w.enqueue(job(1)));
  // Let the worker take job 1, then queue the rest in arrival order 2, 3, 8, 5.
  while (w.rankings() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  for (int64_t rows : {2, 3, 8, 5}) ASSERT_TRUE(w.enqueue(job(rows)));
  gate.open = true;
  ASSERT_TRUE(w.waitIdle(10.0));
  std::lock_guard<std::mutex> guard(mu);
  ASSERT_EQ(ran.size(), 4u);
  EXPECT_EQ(ran[0], std::make_pair(int64_t{1}, 1.0));
  EXPECT_EQ(ran[1], std::make_pair(int64_t{8}, 8.0));  // re-ranked when the others arrived
  EXPECT_EQ(ran[2], std::make_pair(int64_t{5}, 5.0));
  EXPECT_EQ(ran[3], std::make_pair(int64_t{2}, 2.0));
  EXPECT_EQ(w.jobsDropped(), 1u);  // rows 3: the ranker dropped it, it never ran
  EXPECT_EQ(w.jobsDone(), 4u);
  EXPECT_GE(ranker.calls.load(), 2);
  EXPECT_FALSE(w.enqueue(job(3)));  // a dropped job is not queued again
}

TEST(OptimizerWorkerTest, GivenRankerThatReleasesAJobWhenRankedThenItDoesNotRunAndMayBeQueuedAgain) {
  std::mutex mu;
  std::vector<int64_t> ran;
  std::atomic<bool> release{true};
  OptimizerWorker w([&](const OptimizerJob& j) {
    std::lock_guard<std::mutex> guard(mu);
    ran.push_back(j.key.rows);
  });
  w.setRanker([&release](const std::vector<OptimizerJob>& q) {
    JobOrder o;
    for (const OptimizerJob& j : q) (j.key.rows == 4 && release.load() ? o.released : o.queue).push_back(j);
    return o;
  });
  ASSERT_TRUE(w.enqueue(job(4)));
  ASSERT_TRUE(w.waitIdle(10.0));
  EXPECT_EQ(w.jobsDropped(), 1u);
  EXPECT_EQ(w.jobsDone(), 0u);
  {
    std::lock_guard<std::mutex> guard(mu);
    EXPECT_TRUE(ran.empty());
  }
  // Released, not dropped: the same job is taken again, and runs when the ranker keeps it.
  release = false;
  ASSERT_TRUE(w.enqueue(job(4)));
  EXPECT_FALSE(w.enqueue(job(4)));  // queued once
  ASSERT_TRUE(w.waitIdle(10.0));
  std::lock_guard<std::mutex> guard(mu);
  EXPECT_EQ(ran, std::vector<int64_t>{4});
  EXPECT_EQ(w.jobsDone(), 1u);
}

TEST(OptimizerWorkerTest, GivenChainsVariantsAndTakenVariantsWhenOrderedForServingThenChainsFirstAndTakenReleased) {
  OptimizerJob chainA = job(100), chainB = job(101);
  chainA.chain = "a";
  chainB.chain = "b";
  RowsRanker ranker;
  const std::vector<OptimizerJob> queued = {job(2), chainA, job(7), job(4), chainB, job(3)};
  const JobOrder o = orderServingQueue(
      queued, [&ranker](const std::vector<OptimizerJob>& q) { return ranker(q); },
      [](const OptimizerJob& j) { return j.key.rows == 7; });
  std::vector<int64_t> order;
  for (const OptimizerJob& j : o.queue) order.push_back(j.key.rows);
  EXPECT_EQ(order, (std::vector<int64_t>{100, 101, 4, 2}));  // chains in arrival order, then ranked
  ASSERT_EQ(o.released.size(), 1u);
  EXPECT_EQ(o.released[0].key.rows, 7);
  ASSERT_EQ(o.dropped.size(), 1u);  // the ranker's own drop (rows 3) stays a drop
  EXPECT_EQ(o.dropped[0].key.rows, 3);
  EXPECT_EQ(ranker.calls.load(), 1);

  // Every variant taken: the ranker is not asked.
  const JobOrder onlyChains = orderServingQueue(
      {chainA, job(7)}, [&ranker](const std::vector<OptimizerJob>& q) { return ranker(q); },
      [](const OptimizerJob&) { return true; });
  EXPECT_EQ(ranker.calls.load(), 1);
  ASSERT_EQ(onlyChains.queue.size(), 1u);
  EXPECT_EQ(onlyChains.queue[0].chain, "a");
  EXPECT_EQ(onlyChains.released.size(), 1u);
}

TEST(OptimizerWorkerTest, GivenThrowingRankerWhenJobsQueuedThenArrivalOrderAndAllRun) {
  Gate gate;
  std::mutex mu;
  std::vector<int64_t> ran;
  OptimizerWorker w([&](const OptimizerJob& j) {
    if (j.key.rows == 1) gate.wait();
    EXPECT_FALSE(j.target.has_value());
    std::lock_guard<std::mutex> guard(mu);
    ran.push_back(j.key.rows);
  });
  w.setRanker([](const std::vector<OptimizerJob>&) -> JobOrder { HOTKERNEL_THROW("planted ranking failure"); });
  w.enqueue(job(1));
  while (w.rankings() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  for (int64_t rows : {2, 8, 5}) w.enqueue(job(rows));
  gate.open = true;
  ASSERT_TRUE(w.waitIdle(10.0));
  std::lock_guard<std::mutex> guard(mu);
  EXPECT_EQ(ran, (std::vector<int64_t>{1, 2, 8, 5}));
  EXPECT_EQ(w.jobsFailed(), 0u);
}

TEST(OptimizerWorkerTest, GivenRankerThatForgetsAJobWhenRankedThenTheJobStillRunsAfterTheOrderedOnes) {
  Gate gate;
  std::mutex mu;
  std::vector<int64_t> ran;
  OptimizerWorker w([&](const OptimizerJob& j) {
    if (j.key.rows == 1) gate.wait();
    std::lock_guard<std::mutex> guard(mu);
    ran.push_back(j.key.rows);
  });
  w.setRanker([](const std::vector<OptimizerJob>& q) {
    JobOrder o;
    for (const OptimizerJob& j : q) {
      if (j.key.rows != 4) o.queue.insert(o.queue.begin(), j);  // reversed, rows 4 left out
    }
    return o;
  });
  w.enqueue(job(1));
  while (w.rankings() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  for (int64_t rows : {4, 6, 7}) w.enqueue(job(rows));
  gate.open = true;
  ASSERT_TRUE(w.waitIdle(10.0));
  std::lock_guard<std::mutex> guard(mu);
  EXPECT_EQ(ran, (std::vector<int64_t>{1, 7, 6, 4}));
}

TEST(OptimizerWorkerTest, GivenStartedWorkerWhenRankerSetThenError) {
  OptimizerWorker w([](const OptimizerJob&) {});
  w.enqueue(job(1));
  EXPECT_THROW(w.setRanker([](const std::vector<OptimizerJob>& q) { return JobOrder{q, {}}; }), Error);
}

TEST(OptimizerWorkerTest, GivenSameVariantOnTwoDevicesWhenEnqueuedThenBothQueued) {
  OptimizerWorker w([](const OptimizerJob&) {});
  OptimizerJob a = job(1), b = job(1);
  b.key.device = 1;
  EXPECT_NE(jobId(a), jobId(b));
  EXPECT_EQ(jobId(a), jobId(job(1)));
  EXPECT_TRUE(w.enqueue(a));
  EXPECT_TRUE(w.enqueue(b));
  EXPECT_TRUE(w.waitIdle(10.0));
}

}  // namespace
}  // namespace hotkernel
