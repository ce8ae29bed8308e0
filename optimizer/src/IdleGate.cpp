#include "hotkernel/optimizer/IdleGate.h"

#include <thread>

namespace hotkernel {
namespace {
thread_local bool tOptimizerThread = false;
}  // namespace

IdleGate::IdleGate() : captureSignal_(&CaptureSignal::process()) {}

IdleGate& IdleGate::instance() {
  static IdleGate* g = new IdleGate();  // leaked: used by callbacks during exit
  return *g;
}

void IdleGate::noteActivity() noexcept {
  if (tOptimizerThread) return;
  lastActivityNs_.store(nowNs(), std::memory_order_relaxed);
}

bool IdleGate::captureInProgress() const noexcept {
  CaptureSignal* s = captureSignal_.load();
  return s && s->capturesInProgress() > 0;
}

bool IdleGate::idleFor(double idleMs) const noexcept {
  const int64_t last = lastActivityNs();
  const bool quiet = last == 0 || static_cast<double>(nowNs() - last) >= idleMs * 1e6;
  return quiet && !captureInProgress();
}

bool IdleGate::waitUntilIdle(double idleMs, const std::function<bool()>& stop, double maxWaitSeconds) {
  if (idleFor(idleMs)) return true;
  pauses_.fetch_add(1);
  if (captureInProgress()) capturePauses_.fetch_add(1);
  const int64_t deadline = nowNs() + static_cast<int64_t>(maxWaitSeconds * 1e9);
  while (!idleFor(idleMs)) {
    if ((stop && stop()) || nowNs() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(500));
  }
  return true;
}

IdleGate::ScopedOptimizerThread::ScopedOptimizerThread() { tOptimizerThread = true; }
IdleGate::ScopedOptimizerThread::~ScopedOptimizerThread() { tOptimizerThread = false; }
bool IdleGate::onOptimizerThread() noexcept { return tOptimizerThread; }

}  // namespace hotkernel
