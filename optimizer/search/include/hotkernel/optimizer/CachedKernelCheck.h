#pragma once
// The check of a family's cached kernel before a process first serves it (torch).
//
// Note [Cached kernels checked before first use]
// An entry of the shared tier (HOTKERNEL_REMOTE_CACHE) passed its digests and
// signature, so it is what some holder of the fleet's key published; that
// says nothing of whether the kernel is right here: a key that leaked, a
// publisher with a broken GPU or driver, or a tier written by a host whose
// fingerprint matches but whose loader differs would all hand over a signed
// kernel with wrong results. So before the first use in a process, on the
// optimizer thread (idle GPU time, yield points; ATen serves the variant
// meanwhile), the kernel goes through what its family's tuner held it to:
// the tuner's own spec for the variant (Note [A tuner's spec] in
// FamilyTuner.h) gives the harness candidate, the harness spec, the plan
// and the timed inputs. The entry's parameters must be one of the spec's
// valid points (inside the family's space for this variant on this GPU);
// the harness runs against ATen (its stages form one run on shared inputs,
// so all five, the smoke stage first); then the plan the trampoline would
// run is called once on each timed input, as a served call is (the tuner's
// planCall where it has one), and its outputs are compared with ATen's
// under the family's bounds (checkOutputs): the spot check of the kernel's
// own module and launch path, not only the harness's. Rows are the tuner's
// (within the memory cap: Note [Tuning on a row subset]). The check runs
// once per entry and process; an entry that passed is stored in the own
// cache, signed with the local key, and later processes of the host load it
// from there without a new check.

#include <string>

#include "hotkernel/kernels/FamilyDescriptor.h"
#include "hotkernel/optimizer/TunerOptions.h"
#include "hotkernel/runtime/PlanTable.h"

namespace hotkernel {

// "" when the cached kernel (`paramsJson`, `cubin`) of `family` may serve
// `key` (on key.device); otherwise why not. Uses options.memoryCapBytes and
// options.yieldPoint; an interrupted check throws Error("tuning interrupted")
// as an interrupted tuning does. Never throws for a bad kernel.
std::string checkCachedKernel(const kernels::FamilyDescriptor& family, const VariantKey& key,
                              const std::string& paramsJson, const std::string& cubin, const TunerOptions& options);

}  // namespace hotkernel
