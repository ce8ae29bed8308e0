#pragma once
// The idle gate of the background optimizer.
//
// Note [Optimize only on idle GPU time]
// Serving threads report activity (noteActivity(): one relaxed atomic store
// of a steady-clock timestamp) from the recorder callback when an op touches a
// CUDA tensor, and from the trampolines. The optimizer thread marks itself
// (ScopedOptimizerThread) so its own ops never count. Between two units of
// GPU work the optimizer calls waitUntilIdle(): it returns once no activity
// was seen for `idleMs` and no thread of the process captures a CUDA graph
// (Note [Capture signal]), so the optimizer yields within one unit of work
// after traffic resumes; the units are bounded (Note [Bounded units of
// background GPU work] in WorkSlices.h) so that the yield latency stays in
// the milliseconds. With a utilization limit (Note [NVML utilization as an
// idle signal]) the device's utilization must also be at most that limit
// before a job starts and before the optimizer resumes after a pause.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>

#include "hotkernel/runtime/CaptureSignal.h"
#include "hotkernel/runtime/GpuUtilization.h"

namespace hotkernel {

class IdleGate {
 public:
  static IdleGate& instance();
  // A gate of its own (tests); instance() is the process's.
  IdleGate();

  // Called by serving threads; ignored on the optimizer thread. Lock-free.
  void noteActivity() noexcept;
  // Nanoseconds (steady clock) of the last activity, 0 if none yet.
  int64_t lastActivityNs() const noexcept { return lastActivityNs_.load(std::memory_order_relaxed); }

  // True when no activity was seen for `idleMs` and no graph capture is in
  // progress. (The utilization limit is not consulted here.)
  bool idleFor(double idleMs) const noexcept;
  // Blocks (polling every ~0.5 ms) until idleFor(idleMs) or `stop` returns true or
  // `maxWaitSeconds` passes; returns true when idle. Counts the pauses. After a
  // pause, and with `starting` (a job about to start) also without one, it
  // also waits for the utilization limit to allow (Note [NVML utilization as
  // an idle signal]).
  bool waitUntilIdle(double idleMs, const std::function<bool()>& stop, double maxWaitSeconds, bool starting = false);
  uint64_t pauses() const noexcept { return pauses_.load(); }
  // Pauses that began while a graph capture was in progress.
  uint64_t capturePauses() const noexcept { return capturePauses_.load(); }

  // The graph-capture signal (default: CaptureSignal::process(); null: none).
  // Not owned; set before the optimizer runs.
  void setCaptureSignal(CaptureSignal* signal) noexcept { captureSignal_.store(signal); }
  bool captureInProgress() const noexcept;
  // The utilization limit: `maxPercent` < 0 or a null source turns it off.
  void setUtilizationLimit(std::shared_ptr<GpuUtilization> source, int maxPercent);
  // Whether the utilization limit allows running now (true when off).
  bool utilizationAllows();

  // Marks the calling thread as the optimizer's for its lifetime.
  class ScopedOptimizerThread {
   public:
    ScopedOptimizerThread();
    ~ScopedOptimizerThread();
  };
  static bool onOptimizerThread() noexcept;

  static int64_t nowNs() noexcept {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }

 private:
  std::atomic<int64_t> lastActivityNs_{0};
  std::atomic<uint64_t> pauses_{0};
  std::atomic<uint64_t> capturePauses_{0};
  std::atomic<CaptureSignal*> captureSignal_;
  std::mutex utilizationMu_;
  std::shared_ptr<GpuUtilization> utilization_;  // Precondition: utilizationMu_ held
  int maxUtilization_ = -1;                      // Precondition: utilizationMu_ held
};

}  // namespace hotkernel
