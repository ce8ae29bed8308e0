#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "hotkernel/optimizer/IdleGate.h"

namespace hotkernel {
namespace {

TEST(IdleGateTest, GivenRecentActivityWhenAskedThenBusyUntilIdleTimePasses) {
  IdleGate& g = IdleGate::instance();
  g.noteActivity();
  EXPECT_FALSE(g.idleFor(200.0));
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  EXPECT_TRUE(g.idleFor(20.0));
}

TEST(IdleGateTest, GivenOptimizerThreadWhenItRunsOpsThenItsActivityIsIgnored) {
  IdleGate& g = IdleGate::instance();
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  std::thread t([&] {
    IdleGate::ScopedOptimizerThread mark;
    EXPECT_TRUE(IdleGate::onOptimizerThread());
    g.noteActivity();
  });
  t.join();
  EXPECT_FALSE(IdleGate::onOptimizerThread());
  EXPECT_TRUE(g.idleFor(20.0));
}

TEST(IdleGateTest, GivenServingTrafficWhenOptimizerWaitsThenItResumesOnlyAfterTrafficStops) {
  IdleGate& g = IdleGate::instance();
  std::atomic<bool> serving{true};
  std::thread server([&] {
    while (serving.load()) {
      g.noteActivity();
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  const uint64_t pauses = g.pauses();
  const auto t0 = std::chrono::steady_clock::now();
  std::thread stopper([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    serving = false;
  });
  EXPECT_TRUE(g.waitUntilIdle(20.0, nullptr, 10.0));
  const double waited = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_GE(waited, 100.0);
  EXPECT_EQ(g.pauses(), pauses + 1);
  stopper.join();
  server.join();
}

TEST(IdleGateTest, GivenStopRequestWhenWaitingThenReturnsFalseQuickly) {
  IdleGate& g = IdleGate::instance();
  g.noteActivity();
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_FALSE(g.waitUntilIdle(10000.0, [] { return true; }, 10.0));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(1));
}

}  // namespace
}  // namespace hotkernel
