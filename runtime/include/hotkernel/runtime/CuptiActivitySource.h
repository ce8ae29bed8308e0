#pragma once
// The real ActivitySource: CUPTI's activity API, libcupti dlopen'ed (opt-in,
// HOTKERNEL_CUPTI=1; the recorder starts it at its first sampled CUDA op).
//
// Note [GPU time from CUPTI]
// CUPTI allows one callback subscriber per process, and a client that
// subscribes first blinds torch.profiler and Nsight for the process's
// lifetime. This source therefore never keeps a subscription: start probes
// with cuptiSubscribe and unsubscribes at once; a refusal
// (CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED: torch.profiler, once used,
// or Nsight holds it) or any refusal of the activity API backs off: nothing
// is enabled, one log line says so, and the profile ranks by calls. Started,
// it enables only what the attribution needs: concurrent-kernel records,
// external-correlation records (kind CUSTOM2, apart from kineto's), and
// activity records for the kernel-launch API calls alone
// (cuptiActivityEnableRuntimeApi / EnableDriverApi: cudaLaunchKernel and its
// variants, __cudaLaunchKernel, cuLaunchKernel(Ex) and their variants), so
// other API calls cost nothing more. A libcupti already in the process
// (libtorch_cpu links it) is used rather than a second copy; its API version
// must be the build's major version (the records' layout), otherwise it is
// not used. Buffers are 1 MiB each, at most kMaxBuffers outstanding: past
// that CUPTI drops records and counts them (the profile reports them). A
// client that takes the activity buffers over later (torch.profiler started
// after this source) ends the attribution; takenOver says so, by probing the
// subscription again, when the profile is written. Nothing here throws.

#include <memory>

#include "hotkernel/runtime/ActivitySource.h"

namespace hotkernel {

// A new source. One per process: CUPTI's buffer callbacks are process-wide.
std::unique_ptr<ActivitySource> makeCuptiActivitySource();

}  // namespace hotkernel
