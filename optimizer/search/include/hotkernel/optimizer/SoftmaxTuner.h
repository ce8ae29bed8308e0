#pragma once
// The softmax tuner: for one recorded variant, compile the family's parameter
// points, pass each through the five-stage harness against the original ATen
// kernel, time those that pass against it with the benchmark method, and
// return the fastest one whose speed-up CI clears the threshold.

#include <nlohmann/json.hpp>

#include <functional>
#include <string>

#include "hotkernel/kernels/SoftmaxFamily.h"
#include "hotkernel/optimizer/FamilyTuner.h"
#include "hotkernel/optimizer/Harness.h"
#include "hotkernel/optimizer/TunerOptions.h"

namespace hotkernel {

// What aten::_softmax(x, -1, false) (or aten::_log_softmax) must compute, for the harness.
RowOpSpec softmaxSpec(kernels::SoftmaxOp op = kernels::SoftmaxOp::Softmax);
// A compiled softmax parameter point as a harness candidate (its guards included).
HarnessCandidate softmaxCandidate(kernels::DType dtype, const kernels::SoftmaxParams& params,
                                  const std::string& cubin);

// What tuneSoftmax searches for `variant` on `device`, and what a cached kernel of it is checked with
// (Note [A tuner's spec] in FamilyTuner.h). Call it with the tuner's guards in place (the device, a stream of its
// own, relaxed graph-capture mode): it draws the timed inputs.
FamilyTuneSpec softmaxTuneSpec(const kernels::SoftmaxVariant& variant, int device, const TunerOptions& options,
                               kernels::SoftmaxOp op = kernels::SoftmaxOp::Softmax);

// Runs on the calling thread on `device`; uses its own stream and relaxed
// graph-capture mode. Throws Error when the variant cannot be tuned at all
// (no driver, no NVRTC); candidates that fail are skipped and logged in metrics.
// `op` picks softmax or log_softmax (same family template, HK_LOG); the
// external agent is asked for softmax only (its task format describes softmax).
TuneOutcome tuneSoftmax(const kernels::SoftmaxVariant& variant, int device, const TunerOptions& options = {},
                        kernels::SoftmaxOp op = kernels::SoftmaxOp::Softmax);

}  // namespace hotkernel
