#pragma once
// The scope every tuner (and a cached kernel's check) runs its GPU work in.
//
// Note [A tuner's scope]
// A tuner runs on the optimizer's thread, beside the serving threads: it sets
// the device it tunes on, takes a stream of its own from the pool (its work
// never queues behind, or in front of, the host's work on the current stream)
// and sets the thread's capture mode to relaxed, so that nothing it calls
// (allocations, syncs) invalidates a CUDA graph another thread is capturing.
// All three hold for the whole tuning, benchmark inputs included, and are
// restored when the scope ends.

#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAGraphsC10Utils.h>
#include <c10/cuda/CUDAStream.h>

namespace hotkernel {

struct TunerScope {
  explicit TunerScope(int device)
      : deviceGuard(static_cast<c10::DeviceIndex>(device)),
        captureGuard(cudaStreamCaptureModeRelaxed),
        streamGuard(at::cuda::getStreamFromPool(false, device)) {}
  c10::cuda::CUDAGuard deviceGuard;
  c10::cuda::CUDAStreamCaptureModeGuard captureGuard;
  c10::cuda::CUDAStreamGuard streamGuard;
};

}  // namespace hotkernel
