#pragma once
// The cross_entropy tuner: for one recorded variant of aten::cross_entropy_loss
// (dtype, rows, classes, reduction), the family search (FamilyTuner.h) over
// the cross_entropy family's points, each candidate through the five-stage
// harness in its general form (fresh int64 targets with ignored rows and a
// re-drawn ignore_index per check; the loss compared under the family's
// tolerance; the workspace counter left at 0), and timed against ATen's own
// decomposition (_log_softmax, then nll_loss_forward).

#include "hotkernel/kernels/CrossEntropyFamily.h"
#include "hotkernel/optimizer/FamilyTuner.h"
#include "hotkernel/optimizer/Harness.h"
#include "hotkernel/optimizer/TunerOptions.h"

namespace hotkernel {

// What aten::cross_entropy_loss(x, target, weight=None, reduction,
// ignore_index, label_smoothing=0) must compute (Note [Cross entropy harness]):
// output "loss", 0-dim (mean, sum) or [rows] (none) in the logits' dtype.
// Each check draws targets (about one row in 8 ignored, every row in about one
// check in 16) and ignore_index (-100, or a real class half of the time).
// Kernel ABI: hk_cross_entropy's (the workspace after the outputs).
RowOpSpec crossEntropySpec(kernels::CrossEntropyReduction reduction);

// Note [The ATen reference] of cross_entropy: ATen's decomposition
// (_log_softmax, then nll_loss_forward) with `reduction`, on labels drawn
// for each input, every eighth row ignored (ignore_index -100).
AtenReference crossEntropyAtenReference(kernels::CrossEntropyReduction reduction);

// A compiled cross_entropy point as a harness candidate (the family's guards).
HarnessCandidate crossEntropyCandidate(const kernels::CrossEntropyVariant& v, const kernels::CrossEntropyParams& params,
                                       const std::string& cubin);

// What tuneCrossEntropy searches for `variant` on `device`, and what a cached kernel of it is checked with
// (Note [A tuner's spec] in FamilyTuner.h); called with the tuner's guards in place. Error when the variant's
// buffers do not fit options.memoryCapBytes.
FamilyTuneSpec crossEntropyTuneSpec(const kernels::CrossEntropyVariant& variant, int device,
                                    const TunerOptions& options);

// Run on the calling thread on `device` (own stream, relaxed capture mode).
// Throws Error when the variant cannot be tuned at all; failed candidates are
// logged in metrics. The outcome's family is "cross_entropy" and its
// paramsJson a CrossEntropyParams point (makePlan reads both back, with the
// reduction from the variant string).
TuneOutcome tuneCrossEntropy(const kernels::CrossEntropyVariant& variant, int device,
                             const TunerOptions& options = {});

}  // namespace hotkernel
