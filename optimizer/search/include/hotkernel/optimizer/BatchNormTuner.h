#pragma once
// The batch_norm tuner (Note [Batch norm of one sample] in
// hotkernel/kernels/BatchNormFamily.h): layer_norm's kernel and search for a
// [C, K] variant, each candidate through the five-stage harness against and
// timed against aten::native_batch_norm of the [1, C, K] view in training
// mode, without weight, bias or running statistics.

#include "hotkernel/kernels/BatchNormFamily.h"
#include "hotkernel/optimizer/FamilyTuner.h"
#include "hotkernel/optimizer/Harness.h"
#include "hotkernel/optimizer/TunerOptions.h"

namespace hotkernel {

// What aten::native_batch_norm(x.view(1, rows, cols), None, None, None, None,
// training=True, momentum, eps) must compute on a [rows, cols] input: outputs
// "out" ([rows, cols]), "mean" and "rstd" (save_mean and save_invstd, [rows],
// float32) under layer_norm's tolerance. Each check draws an eps. Kernel ABI:
// hk_layer_norm's, weight and bias null.
RowOpSpec batchNormSpec();

// What tuneBatchNorm searches for `variant` (no weight, no bias) on `device`
// (Note [A tuner's spec] in FamilyTuner.h).
FamilyTuneSpec batchNormTuneSpec(const kernels::LayerNormVariant& variant, int device, const TunerOptions& options);

// Run on the calling thread on `device` (own stream, relaxed capture mode).
// Throws Error when the variant cannot be tuned at all. The outcome's family is
// "batch_norm" and its paramsJson a NormParams point.
TuneOutcome tuneBatchNorm(const kernels::LayerNormVariant& variant, int device, const TunerOptions& options = {});

}  // namespace hotkernel
