#pragma once
// The process's exit, as hotkernel's background threads see it.
//
// Note [Ordered exit]
// At exit the CUDA runtime and driver tear down (cudart registers its teardown
// with atexit when it initializes, lazily, after hotkernel started). A
// background thread that makes a CUDA call after that point, or merely
// unwinds through a CUDA guard's destructor (c10's device guard asks the
// driver for the primary context and throws from a noexcept destructor),
// terminates the host process. So:
//  - the runtime's exit hook runs before CUDA's teardown: it is registered
//    once CUDA is known to be initialized (the first CUDA variant or device
//    use, so atexit runs it before cudart's handler) and, in a Python host,
//    with Py_AtExit (run at the end of interpreter finalization, before any
//    C atexit handler);
//  - the hook calls begin(): from then on exiting() is true, and waits a short
//    bound until the optimizer is idle or parked;
//  - a background thread calls parkIfExiting() at each point where none of
//    its GPU work is in flight (the yield points between bounded units of GPU
//    work). When the process is exiting it never returns: the thread sleeps
//    until the process ends, so nothing on its stack (guards, events, tensors)
//    runs after CUDA's teardown, and no error can unwind it;
//  - a unit of GPU work that outlasts the bound is abandoned: the exit goes
//    on, and the thread parks at its next yield point.
// The gate only ever opens once per process; tests make gates of their own.

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>

namespace hotkernel {

class ExitGate {
 public:
  // The process's gate.
  static ExitGate& process();
  ExitGate() = default;
  ExitGate(const ExitGate&) = delete;
  ExitGate& operator=(const ExitGate&) = delete;

  bool exiting() const noexcept { return exiting_.load(std::memory_order_acquire); }

  // Marks the process exiting, then waits up to `boundSeconds` until `settled()`
  // (the caller's test that no background GPU work is running) or a thread
  // parks. Returns true when settled or parked in time. Never throws.
  // Idempotent: a second call only waits again.
  bool begin(double boundSeconds, const std::function<bool()>& settled) noexcept;

  // On a background thread, at a point with none of its GPU work in flight:
  // returns at once unless the process is exiting; then never returns.
  void parkIfExiting() noexcept;

  // Threads parked so far.
  size_t parked() const noexcept { return parked_.load(std::memory_order_acquire); }

 private:
  std::atomic<bool> exiting_{false};
  std::atomic<size_t> parked_{0};
  std::mutex mu_;                // guards nothing but the waits below
  std::condition_variable cv_;   // notified when a thread parks
};

}  // namespace hotkernel
