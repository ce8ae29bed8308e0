#pragma once
// The rms_norm and layer_norm tuners: for one recorded variant, the family
// search (FamilyTuner.h) over the family's points, each candidate through the
// five-stage harness in its general form (fresh weight, bias and eps per
// check; out, rstd and mean each compared under the family's tolerance), and
// timed against aten::_fused_rms_norm / aten::native_layer_norm.

#include "hotkernel/kernels/LayerNormFamily.h"
#include "hotkernel/kernels/RmsNormFamily.h"
#include "hotkernel/optimizer/FamilyTuner.h"
#include "hotkernel/optimizer/Harness.h"
#include "hotkernel/optimizer/TunerOptions.h"

namespace hotkernel {

// What aten::_fused_rms_norm(x, [cols], weight?, eps?) must compute: outputs
// "out" ([rows, cols], the input's dtype) and "rstd" ([rows], float32). Each
// check draws a weight of both signs (when `hasWeight`) and an eps (None in
// about one check in four, ATen's default). Kernel ABI: hk_rms_norm's.
RowOpSpec rmsNormSpec(bool hasWeight);

// What aten::native_layer_norm(x, [cols], weight?, bias?, eps) must compute:
// outputs "out", "mean" and "rstd" (the statistics [rows], float32). Kernel ABI: hk_layer_norm's.
RowOpSpec layerNormSpec(bool hasWeight, bool hasBias);

// A compiled norm point as a harness candidate (the family's guards).
// `colsSpecialized`: the cubin was compiled for v.cols (HK_COLS, what the
// tuners compile: Note [Specialized columns] in kernels/norm/rms_norm.cu), so
// the harness runs it on v.cols only (its sweep varies the rows); false: any
// column count the guards accept.
HarnessCandidate rmsNormCandidate(const kernels::RmsNormVariant& v, const kernels::NormParams& params,
                                  const std::string& cubin, bool colsSpecialized);
HarnessCandidate layerNormCandidate(const kernels::LayerNormVariant& v, const kernels::NormParams& params,
                                    const std::string& cubin, bool colsSpecialized);

// What tuneRmsNorm / tuneLayerNorm search for `variant` on `device`, and what a cached kernel of it is
// checked with (Note [A tuner's spec] in FamilyTuner.h); called with the tuner's guards in place.
FamilyTuneSpec rmsNormTuneSpec(const kernels::RmsNormVariant& variant, int device, const TunerOptions& options);
FamilyTuneSpec layerNormTuneSpec(const kernels::LayerNormVariant& variant, int device, const TunerOptions& options);

// Run on the calling thread on `device` (own stream, relaxed capture mode).
// Throw Error when the variant cannot be tuned at all; failed candidates are
// logged in metrics. The outcome's family is "rms_norm" / "layer_norm" and its
// paramsJson a NormParams point (makePlan reads both back).
TuneOutcome tuneRmsNorm(const kernels::RmsNormVariant& variant, int device, const TunerOptions& options = {});
TuneOutcome tuneLayerNorm(const kernels::LayerNormVariant& variant, int device, const TunerOptions& options = {});

}  // namespace hotkernel
