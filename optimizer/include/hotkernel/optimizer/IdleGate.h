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
// the milliseconds.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>

#include "hotkernel/optimizer/CaptureSignal.h"

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

  // True when no activity was seen for `idleMs` and no graph capture is in progress.
  bool idleFor(double idleMs) const noexcept;
  // Blocks (polling every ~0.5 ms) until idleFor(idleMs) or `stop` returns true or
  // `maxWaitSeconds` passes; returns true when idle. Counts the pauses.
  bool waitUntilIdle(double idleMs, const std::function<bool()>& stop, double maxWaitSeconds);
  uint64_t pauses() const noexcept { return pauses_.load(); }
  // Pauses that began while a graph capture was in progress.
  uint64_t capturePauses() const noexcept { return capturePauses_.load(); }

  // The graph-capture signal (default: CaptureSignal::process(); null: none).
  // Not owned; set before the optimizer runs.
  void setCaptureSignal(CaptureSignal* signal) noexcept { captureSignal_.store(signal); }
  bool captureInProgress() const noexcept;

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
};

}  // namespace hotkernel
