#pragma once
// How many dispatcher calls the chain-fusion engine deferred on this thread
// (Note [Deferred calls in the recorder]). The engine counts a call it takes
// into a pending chain; the recorder reads the count around a sampled call to
// tell the calls that ran from the calls a fused chain took. No torch.
//
// Note [Deferred calls in the recorder]
// A call the fusion engine defers still passes the recorder's RecordFunction
// callback (the dispatcher calls it before any kernel), so without this count
// an op whose calls all run inside fused chains (HF's RMSNorm mean, the
// attention softmax's amax and sum) would look as hot as one that runs alone:
// the optimizer would tune it, on GPU time taken from the serving process, and
// a profile would send `hotkernel warmup` after it too. A sampled call during
// which this thread's count rose was deferred (the engine took it, or a call
// nested in it): the recorder counts it as such, the profile says so
// ("deferred_calls"), and what ranks targets counts the calls that ran.

#include <cstdint>

namespace hotkernel {

// Calls deferred on the calling thread so far (wraps at 2^64; compare for change, never order).
uint64_t deferredCallsOnThisThread() noexcept;
// One more deferred call on the calling thread (the fusion engine's deferral).
void noteDeferredCall() noexcept;

}  // namespace hotkernel
