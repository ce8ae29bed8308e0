#include "hotkernel/runtime/ExitGate.h"

#include <chrono>
#include <thread>

namespace hotkernel {

ExitGate& ExitGate::process() {
  static ExitGate* gate = new ExitGate();  // leaked: used while the process exits
  return *gate;
}

bool ExitGate::begin(double boundSeconds, const std::function<bool()>& settled) noexcept {
  exiting_.store(true, std::memory_order_release);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(boundSeconds);
  try {
    std::unique_lock<std::mutex> lock(mu_);
    while (true) {
      if (parked_.load(std::memory_order_acquire) > 0) return true;
      bool done = false;
      try {
        done = !settled || settled();
      } catch (...) {
        done = false;
      }
      if (done) return true;
      if (std::chrono::steady_clock::now() >= deadline) return false;
      // Woken by a park; the settled() test is polled (it has its own lock).
      cv_.wait_for(lock, std::chrono::milliseconds(2));
    }
  } catch (...) {
    return false;
  }
}

void ExitGate::parkIfExiting() noexcept {
  if (!exiting()) return;
  {
    std::lock_guard<std::mutex> guard(mu_);
    parked_.fetch_add(1, std::memory_order_acq_rel);
  }
  cv_.notify_all();
  // Note [Ordered exit]: the process ends around this thread.
  while (true) std::this_thread::sleep_for(std::chrono::hours(1));
}

}  // namespace hotkernel
