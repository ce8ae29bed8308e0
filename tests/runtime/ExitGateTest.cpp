// The exit gate (Note [Ordered exit]): a background thread parks at its next
// yield point once the process exits, and the exit waits for that no longer
// than its bound.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "hotkernel/runtime/ExitGate.h"

namespace hotkernel {
namespace {

double secondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// A fake optimizer: units of "GPU work" (sleeps) with a yield point between
// them; counts the units it starts and whether it is inside one. Detached:
// once parked it never returns, as in the process.
struct FakeWorker {
  std::atomic<int> unitsStarted{0};
  std::atomic<bool> inUnit{false};
  std::atomic<int> unitsAfterExit{0};

  void start(ExitGate& gate, std::chrono::milliseconds unit) {
    std::thread([this, &gate, unit] {
      while (true) {
        gate.parkIfExiting();
        if (gate.exiting()) unitsAfterExit.fetch_add(1);  // unreachable once parked
        inUnit = true;
        unitsStarted.fetch_add(1);
        std::this_thread::sleep_for(unit);
        inUnit = false;
      }
    }).detach();
  }
};

TEST(ExitGateTest, GivenNoExitWhenParkIfExitingThenItReturnsAtOnce) {
  ExitGate gate;
  const auto t0 = std::chrono::steady_clock::now();
  gate.parkIfExiting();
  EXPECT_LT(secondsSince(t0), 0.5);
  EXPECT_FALSE(gate.exiting());
  EXPECT_EQ(gate.parked(), 0u);
}

TEST(ExitGateTest, GivenAWorkerBetweenShortUnitsWhenExitBeginsThenItParksAndNoUnitStartsAfterwards) {
  static ExitGate gate;  // outlives the parked thread
  static FakeWorker worker;
  worker.start(gate, std::chrono::milliseconds(5));
  while (worker.unitsStarted.load() < 3) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  const auto t0 = std::chrono::steady_clock::now();
  const bool settled = gate.begin(5.0, [] { return false; });  // "a job is running" throughout: only a park settles
  EXPECT_TRUE(settled);
  EXPECT_LT(secondsSince(t0), 1.0) << "a worker between 5 ms units parks within one unit";
  EXPECT_EQ(gate.parked(), 1u);
  EXPECT_TRUE(gate.exiting());
  const int units = worker.unitsStarted.load();
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(worker.unitsStarted.load(), units) << "a parked worker starts no more GPU work";
  EXPECT_EQ(worker.unitsAfterExit.load(), 0);
  EXPECT_FALSE(worker.inUnit.load());
}

TEST(ExitGateTest, GivenAUnitLongerThanTheBoundWhenExitBeginsThenTheExitGoesOnAfterTheBoundAndTheWorkerParksLater) {
  static ExitGate gate;
  static FakeWorker worker;
  worker.start(gate, std::chrono::milliseconds(600));
  while (!worker.inUnit.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  const auto t0 = std::chrono::steady_clock::now();
  const bool settled = gate.begin(0.2, [] { return false; });
  const double waited = secondsSince(t0);
  EXPECT_FALSE(settled) << "the unit in flight outlasts the bound: abandoned";
  EXPECT_GE(waited, 0.19);
  EXPECT_LT(waited, 0.55) << "the exit waits for the bound, not for the unit";
  // The abandoned unit ends; the worker parks at its next yield point and starts nothing more.
  const auto t1 = std::chrono::steady_clock::now();
  while (gate.parked() == 0 && secondsSince(t1) < 5.0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(gate.parked(), 1u);
  EXPECT_EQ(worker.unitsStarted.load(), 1);
  EXPECT_EQ(worker.unitsAfterExit.load(), 0);
}

TEST(ExitGateTest, GivenAnIdleOptimizerWhenExitBeginsThenItReturnsAtOnceWithoutAPark) {
  ExitGate gate;
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_TRUE(gate.begin(5.0, [] { return true; }));
  EXPECT_LT(secondsSince(t0), 0.5);
  EXPECT_EQ(gate.parked(), 0u);
  EXPECT_TRUE(gate.exiting());
}

TEST(ExitGateTest, GivenASettledTestThatThrowsWhenExitBeginsThenItNeverThrowsAndWaitsOnlyTheBound) {
  ExitGate gate;
  const auto t0 = std::chrono::steady_clock::now();
  bool settled = true;
  EXPECT_NO_THROW(settled = gate.begin(0.1, []() -> bool { throw std::runtime_error("CUDA driver error"); }));
  EXPECT_FALSE(settled);
  EXPECT_LT(secondsSince(t0), 1.0);
}

}  // namespace
}  // namespace hotkernel
