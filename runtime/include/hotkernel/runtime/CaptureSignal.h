#pragma once
// Whether some thread of this process is capturing a CUDA graph.
//
// Note [Capture signal]
// The count lives in the preload shim (interpose/preload/CaptureTracker.h,
// Note [Pausing during graph capture]), which keeps it from the
// cudaStreamBeginCapture / cudaStreamEndCapture calls it interposes. This
// library reads it through `hotkernel_captures_in_progress`, looked up once
// with dlsym(RTLD_DEFAULT): found in a process that preloads the shim (or an
// executable that links its capture wrappers and exports them, as the GPU
// test does); absent elsewhere (warm-up, CPU tests, a process without the
// preload), where the signal says "none" and the optimizer relies on its
// relaxed capture mode and own streams alone. The interface is thin so that
// the idle gate is tested on the CPU with a fake.

namespace hotkernel {

class CaptureSignal {
 public:
  virtual ~CaptureSignal() = default;
  // CUDA graph captures in progress in this process (any thread), as far as known.
  virtual int capturesInProgress() = 0;
  // Whether the count is available here (the shim's function was found).
  virtual bool available() = 0;

  // The process's signal: the shim's count, or "none" without it.
  static CaptureSignal& process();
};

}  // namespace hotkernel
