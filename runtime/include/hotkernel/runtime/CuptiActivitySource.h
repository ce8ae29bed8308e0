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
// activity records for the kernel-launch API calls alone (Note [Launch API
// records only]), so other API calls cost nothing more. A libcupti already
// in the process (libtorch_cpu links it) is used rather than a second copy;
// its API version must be the build's major version (the records' layout),
// otherwise it is not used. Buffers are 1 MiB each, at most kMaxBuffers outstanding: past
// that CUPTI drops records and counts them (the profile reports them). A
// client that takes the activity buffers over later (torch.profiler started
// after this source) ends the attribution; takenOver says so, by probing the
// subscription again, when the profile is written (Note [A later CUPTI
// client]). Nothing here throws.
//
// Note [Launch API records only]
// CUPTI writes an external-correlation record only in front of an API
// activity record it creates ("when a CUPTI activity API record is created
// while within an external API region and
// CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION is enabled, the activity API
// record will be preceded by a CUpti_ActivityExternalCorrelation record":
// cuptiActivityPushExternalCorrelationId in cupti_activity.h), so the
// launching calls' own records must be collected, not only the kernels'.
// Start enables the RUNTIME and DRIVER kinds, as kineto does, and then turns
// every API off again except the kernel launches (cudaLaunchKernel and its
// variants, __cudaLaunchKernel, cuLaunchKernel(Ex) and theirs) with
// cuptiActivityEnableRuntimeApi / EnableDriverApi, one call per callback id.
// The order matters: enabling a kind overrides the per-API settings made
// before it, and per-API calls after it narrow it (cupti_activity.h, the
// same functions). CUPTI's header also allows per-API enables without the
// kinds; the kinds first is the order kineto relies on for its correlations
// (docs/design/cupti.md says why). A per-API call refused for a launch id
// refuses the start; for another id it costs only its records. The profile's
// gpu_time counts the API and correlation records that arrive (api_records,
// correlations), so a run shows which half is missing.
//
// Note [A later CUPTI client]
// CUPTI's activity buffers and their callbacks are process-wide: a client
// that registers its own callbacks later (kineto, when torch.profiler
// starts) does not get the buffer CUPTI already holds from this source. The
// records written into it, up to 1 MiB of them, reach the new client's
// completion callback as a buffer it never handed out; kineto drops such a
// buffer, and does not flush at all while it has handed out none, so a short
// torch.profiler session after this source started sees no kernels.
// CUPTI tells no one when another client registers; the recorder notices the
// PyTorch profiler at its first sampled op and calls handOver (Note [Handing
// CUPTI to the PyTorch profiler] in Recorder.cpp): a forced flush with the
// new client's callbacks registered completes this source's buffer into them
// and makes CUPTI ask them for the next one. The kinds stay enabled (the new
// client enabled the same ones; disabling them would blind it).

#include <memory>

#include "hotkernel/runtime/ActivitySource.h"

namespace hotkernel {

// A new source. One per process: CUPTI's buffer callbacks are process-wide.
std::unique_ptr<ActivitySource> makeCuptiActivitySource();

}  // namespace hotkernel
