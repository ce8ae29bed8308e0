#pragma once
// The group_norm tuner: for one recorded variant, the family search
// (FamilyTuner.h) over the norm points whose vector stays in one channel, each
// candidate through the five-stage harness in its general form (fresh weight,
// bias and eps per check; out, mean and rstd each compared under the family's
// tolerance), and timed against aten::native_group_norm.

#include <cstdint>

#include "hotkernel/kernels/GroupNormFamily.h"
#include "hotkernel/optimizer/FamilyTuner.h"
#include "hotkernel/optimizer/Harness.h"
#include "hotkernel/optimizer/TunerOptions.h"

namespace hotkernel {

// What aten::native_group_norm(x [N, G * D, hw], weight?, bias?, N, G * D, hw,
// G, eps) must compute on a [rows, cols] input (rows = N * G, cols = D * hw):
// outputs "out" ([rows, cols]), "mean" and "rstd" ([rows], the input's dtype).
// Each check draws a weight and a bias of G * D channels and an eps. Kernel
// ABI: hk_layer_norm's (group mode).
RowOpSpec groupNormSpec(int64_t groups, int64_t hw, bool hasWeight, bool hasBias);

// A compiled group_norm point as a harness candidate (the family's guards;
// `colsSpecialized` as layerNormCandidate's).
HarnessCandidate groupNormCandidate(const kernels::GroupNormVariant& v, const kernels::NormParams& params,
                                    const std::string& cubin, bool colsSpecialized);

// What tuneGroupNorm searches for `variant` on `device` (Note [A tuner's spec] in FamilyTuner.h).
FamilyTuneSpec groupNormTuneSpec(const kernels::GroupNormVariant& variant, int device, const TunerOptions& options);

// Run on the calling thread on `device` (own stream, relaxed capture mode).
// Throws Error when the variant cannot be tuned at all. The outcome's family is
// "group_norm" and its paramsJson a NormParams point.
TuneOutcome tuneGroupNorm(const kernels::GroupNormVariant& variant, int device, const TunerOptions& options = {});

}  // namespace hotkernel
