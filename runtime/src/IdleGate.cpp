#include "hotkernel/runtime/IdleGate.h"

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

void IdleGate::setUtilizationLimit(std::shared_ptr<GpuUtilization> source, int maxPercent) {
  std::lock_guard<std::mutex> guard(utilizationMu_);
  utilization_ = std::move(source);
  maxUtilization_ = utilization_ ? maxPercent : -1;
}

bool IdleGate::utilizationAllows() {
  std::shared_ptr<GpuUtilization> source;
  int maxPercent = -1;
  {
    std::lock_guard<std::mutex> guard(utilizationMu_);
    source = utilization_;
    maxPercent = maxUtilization_;
  }
  if (!source || maxPercent < 0) return true;
  return hotkernel::utilizationAllows(source->percent(), maxPercent);
}

bool IdleGate::waitUntilIdle(double idleMs, const std::function<bool()>& stop, double maxWaitSeconds,
                             bool starting) {
  // Note [NVML utilization as an idle signal]: read only while none of the
  // optimizer's work runs (a job starting, or resuming after a pause).
  if (idleFor(idleMs) && (!starting || utilizationAllows())) return true;
  pauses_.fetch_add(1);
  if (captureInProgress()) capturePauses_.fetch_add(1);
  const int64_t deadline = nowNs() + static_cast<int64_t>(maxWaitSeconds * 1e9);
  while (true) {
    // The utilization is read only once the cheap signals say idle (NVML
    // takes tens of microseconds), and then at most every ~10 ms.
    if (idleFor(idleMs)) {
      if (utilizationAllows()) return true;
      if ((stop && stop()) || nowNs() > deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      continue;
    }
    if ((stop && stop()) || nowNs() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(500));
  }
}

IdleGate::ScopedOptimizerThread::ScopedOptimizerThread() { tOptimizerThread = true; }
IdleGate::ScopedOptimizerThread::~ScopedOptimizerThread() { tOptimizerThread = false; }
bool IdleGate::onOptimizerThread() noexcept { return tOptimizerThread; }

}  // namespace hotkernel
