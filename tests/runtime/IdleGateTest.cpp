#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "hotkernel/runtime/IdleGate.h"

#include <optional>

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

// The gate resumes after idleMs without serving activity; a serving thread descheduled for longer than that on a
// loaded machine looks idle to it (rightly). The idle window is therefore 100 ms, far above a time slice of the
// 1 ms serving loop, so that only the traffic's end can open it, also on a loaded machine.
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
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    serving = false;
  });
  EXPECT_TRUE(g.waitUntilIdle(100.0, nullptr, 10.0));
  const double waited = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_GE(waited, 300.0);
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

// Note [Capture signal]: a fake count of graph captures in progress.
class FakeCaptureSignal final : public CaptureSignal {
 public:
  std::atomic<int> captures{0};
  int capturesInProgress() override { return captures.load(); }
  bool available() override { return true; }
};

// Note [NVML utilization as an idle signal]: a fake utilization, counting reads.
class FakeUtilization final : public GpuUtilization {
 public:
  std::atomic<int> value{0};
  std::atomic<bool> readable{true};
  std::atomic<int> reads{0};
  std::optional<int> percent() override {
    ++reads;
    return readable.load() ? std::optional<int>(value.load()) : std::nullopt;
  }
};

TEST(IdleGateTest, GivenNoShimInThisProcessWhenAskedThenTheCaptureSignalIsUnavailableAndSaysNone) {
  // The CPU test binary neither preloads the shim nor exports its wrappers.
  EXPECT_FALSE(CaptureSignal::process().available());
  EXPECT_EQ(CaptureSignal::process().capturesInProgress(), 0);
}

TEST(IdleGateTest, GivenACaptureInProgressWhenAskedThenBusyWithoutAnyServingActivity) {
  IdleGate g;
  FakeCaptureSignal capture;
  g.setCaptureSignal(&capture);
  EXPECT_TRUE(g.idleFor(20.0));
  capture.captures = 1;
  EXPECT_TRUE(g.captureInProgress());
  EXPECT_FALSE(g.idleFor(20.0));
  capture.captures = 0;
  EXPECT_TRUE(g.idleFor(20.0));
  g.setCaptureSignal(nullptr);
  EXPECT_FALSE(g.captureInProgress());
}

TEST(IdleGateTest, GivenACaptureInProgressWhenTheOptimizerWaitsThenItResumesOnlyAfterTheCaptureEnds) {
  IdleGate g;
  FakeCaptureSignal capture;
  g.setCaptureSignal(&capture);
  capture.captures = 2;
  const auto t0 = std::chrono::steady_clock::now();
  std::thread capturer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    capture.captures = 1;  // one of the two ended: still busy
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    capture.captures = 0;
  });
  EXPECT_TRUE(g.waitUntilIdle(1.0, nullptr, 10.0));
  const double waited = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_GE(waited, 100.0);
  EXPECT_EQ(g.pauses(), 1u);
  EXPECT_EQ(g.capturePauses(), 1u);
  capturer.join();
}

TEST(IdleGateTest, GivenACaptureThatNeverEndsWhenStopIsRequestedThenTheWaitReturnsFalse) {
  IdleGate g;
  FakeCaptureSignal capture;
  g.setCaptureSignal(&capture);
  capture.captures = 1;
  EXPECT_FALSE(g.waitUntilIdle(1.0, [] { return true; }, 10.0));
  EXPECT_FALSE(g.waitUntilIdle(1.0, nullptr, 0.02));  // or the wait's limit passes
}

TEST(IdleGateTest, GivenUtilizationOverTheLimitWhenAJobStartsThenItWaitsUntilTheUtilizationDrops) {
  IdleGate g;
  g.setCaptureSignal(nullptr);
  auto util = std::make_shared<FakeUtilization>();
  util->value = 90;
  g.setUtilizationLimit(util, 20);
  EXPECT_FALSE(g.utilizationAllows());
  std::thread other([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(60));
    util->value = 15;
  });
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_TRUE(g.waitUntilIdle(1.0, nullptr, 10.0, /*starting=*/true));
  const double waited = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_GE(waited, 60.0);
  EXPECT_EQ(g.pauses(), 1u);
  other.join();
}

TEST(IdleGateTest, GivenUtilizationOverTheLimitWhileRunningWhenNoPauseIsNeededThenItIsNotRead) {
  // The optimizer's own kernels are in the utilization: between two units of
  // its work (not starting, no pause) the dispatch signal alone decides.
  IdleGate g;
  g.setCaptureSignal(nullptr);
  auto util = std::make_shared<FakeUtilization>();
  util->value = 100;
  g.setUtilizationLimit(util, 20);
  EXPECT_TRUE(g.waitUntilIdle(1.0, nullptr, 10.0));
  EXPECT_EQ(util->reads.load(), 0);
  EXPECT_EQ(g.pauses(), 0u);
}

TEST(IdleGateTest, GivenAPauseForServingWhenTrafficStopsThenTheUtilizationMustAlsoAllowBeforeResuming) {
  IdleGate g;
  g.setCaptureSignal(nullptr);
  auto util = std::make_shared<FakeUtilization>();
  util->value = 80;
  g.setUtilizationLimit(util, 50);
  g.noteActivity();
  std::thread other([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(80));
    util->value = 10;
  });
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_TRUE(g.waitUntilIdle(5.0, nullptr, 10.0));
  const double waited = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_GE(waited, 80.0);  // idle after 5 ms, then held by the utilization
  EXPECT_GT(util->reads.load(), 0);
  other.join();
}

TEST(IdleGateTest, GivenAnUnreadableUtilizationOrNoLimitWhenAJobStartsThenTheDispatchSignalAloneDecides) {
  IdleGate g;
  g.setCaptureSignal(nullptr);
  auto util = std::make_shared<FakeUtilization>();
  util->value = 100;
  util->readable = false;
  g.setUtilizationLimit(util, 20);
  EXPECT_TRUE(g.utilizationAllows());
  EXPECT_TRUE(g.waitUntilIdle(1.0, nullptr, 0.5, /*starting=*/true));
  util->readable = true;
  g.setUtilizationLimit(util, -1);  // HOTKERNEL_IDLE_MAX_UTIL unset
  EXPECT_TRUE(g.utilizationAllows());
  g.setUtilizationLimit(nullptr, 20);  // NVML unavailable
  EXPECT_TRUE(g.utilizationAllows());
}

}  // namespace
}  // namespace hotkernel
