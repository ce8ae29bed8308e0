#pragma once
// How the optimizer tunes a variant of a family (the optimizer's half of Note
// [Family descriptors]): the family's tuner runs its parameter space through
// the harness against the family's ATen reference and times the survivors;
// the reference itself, for whoever times the original kernel.

#include <string>

#include "hotkernel/kernels/FamilyDescriptor.h"
#include "hotkernel/optimizer/TunerOptions.h"
#include "hotkernel/runtime/PlanTable.h"

namespace hotkernel {

struct AtenReference;   // FamilyTuner.h
struct FamilyTuneSpec;  // FamilyTuner.h

// Tunes `key` (on key.device) with `family`'s tuner. Throws Error for a key the
// family does not take (options outside its fields) or a family without a
// tuner, and whatever the tuner throws (no driver, no NVRTC, interrupted).
TuneOutcome tuneVariant(const kernels::FamilyDescriptor& family, const VariantKey& key, const TunerOptions& options);

// The family's ATen reference for `key` (Note [The ATen reference] in
// FamilyTuner.h): what its tuner times the candidates against and the target
// measurer times for the ranking. Throws Error as tuneVariant does.
AtenReference atenReferenceOf(const kernels::FamilyDescriptor& family, const VariantKey& key);

// What `family`'s tuner searches for `key` (Note [A tuner's spec] in
// FamilyTuner.h), built as the tuner builds it; the caller holds the tuner's
// guards (key.device, a stream of its own, relaxed graph-capture mode).
// Throws Error as tuneVariant does, for a family that is not a row op
// (ownCachedCheckOf is set), and "tuning interrupted" when
// options.yieldPoint says stop while the timed inputs are drawn.
FamilyTuneSpec familyTuneSpecOf(const kernels::FamilyDescriptor& family, const VariantKey& key,
                                const TunerOptions& options);

// The check of a cached kernel before first use for a family that is not a
// row op and checks its own plans (mm_pad_n: checkCachedMmPad): "" or why the
// kernel is refused. nullptr: the row families' check (checkCachedKernel's
// harness and spot check on familyTuneSpecOf's spec).
using OwnCachedCheck = std::string (*)(const VariantKey& key, const std::string& paramsJson, const std::string& cubin,
                                       const TunerOptions& options);
OwnCachedCheck ownCachedCheckOf(const kernels::FamilyDescriptor& family);

}  // namespace hotkernel
