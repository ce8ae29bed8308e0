#include "hotkernel/runtime/CaptureSignal.h"

#include <dlfcn.h>

#include <atomic>

namespace hotkernel {
namespace {

using CountFn = int (*)();

// Note [Capture signal]
class ShimCaptureSignal final : public CaptureSignal {
 public:
  int capturesInProgress() override {
    const CountFn fn = count();
    return fn ? fn() : 0;
  }
  bool available() override { return count() != nullptr; }

 private:
  CountFn count() {
    // Looked up once: the shim is loaded before this library, or never.
    static const CountFn fn = reinterpret_cast<CountFn>(dlsym(RTLD_DEFAULT, "hotkernel_captures_in_progress"));
    return fn;
  }
};

}  // namespace

CaptureSignal& CaptureSignal::process() {
  static ShimCaptureSignal* s = new ShimCaptureSignal();  // leaked: used by callbacks during exit
  return *s;
}

}  // namespace hotkernel
