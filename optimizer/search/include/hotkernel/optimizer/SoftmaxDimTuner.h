#pragma once
// The middle-dim softmax tuner: for one recorded variant of softmax or
// log_softmax over a dim that is not the last (dtype, outer, dim, inner), the
// family search (FamilyTuner.h) over SoftmaxDimFamily's points, each
// candidate through the five-stage harness as a row op of [outer, dim * inner]
// rows with an output of the input's shape, and timed against ATen's CUDA
// kernel over dim 1 of the [outer, dim, inner] view. Its outcomes and cache
// entries are the op's family's (Note [Two softmax layouts] in
// kernels/src/SoftmaxDescriptor.cpp).

#include <cstdint>
#include <string>

#include "hotkernel/kernels/SoftmaxDimFamily.h"
#include "hotkernel/optimizer/FamilyTuner.h"
#include "hotkernel/optimizer/Harness.h"
#include "hotkernel/optimizer/TuneOutcome.h"
#include "hotkernel/optimizer/TunerOptions.h"

namespace hotkernel {

// What `op` must compute over the middle extent of rows of `inner` positions
// (Note [Middle-dim softmax harness] in src/SoftmaxDimTuner.cpp): output
// "out", [rows, cols] in the input's dtype. Reference: ATen's CUDA kernel
// over dim 1 of the [rows, cols / inner, inner] view, called below the
// dispatcher. Kernel ABI: hk_softmax_dim's (in, out, outer, dim, inner).
RowOpSpec softmaxDimSpec(kernels::SoftmaxOp op, int64_t inner);

// A compiled middle-dim point as a harness candidate (the family's guards;
// any (rows, cols) shape read as [rows, cols / inner, inner], refused unless
// inner divides cols).
HarnessCandidate softmaxDimCandidate(const kernels::SoftmaxDimVariant& v, const kernels::SoftmaxDimParams& params,
                                     const std::string& cubin);

// ATen's `op` over the middle extent of a contiguous CUDA [rows, dim * inner]
// tensor read as [rows, dim, inner], as [rows, dim * inner] (at::cuda::_softmax
// / _log_softmax over dim 1: never a hotkernel trampoline).
at::Tensor atenSoftmaxMiddleDim(const at::Tensor& x, kernels::SoftmaxOp op, int64_t inner);

// What tuneSoftmaxDim searches for `variant` on `device`, and what a cached kernel of it is checked with
// (Note [A tuner's spec] in FamilyTuner.h); called with the tuner's guards in place.
FamilyTuneSpec softmaxDimTuneSpec(const kernels::SoftmaxDimVariant& variant, int device, const TunerOptions& options,
                                  kernels::SoftmaxOp op);

// Run on the calling thread on `device` (own stream, relaxed capture mode).
// Throws Error when the variant cannot be tuned at all (not the family's, no
// NVRTC, over the memory cap even on the fewest outer rows that fill the
// GPU); a variant over the cap is tuned on a subset of its outer rows (Note
// [Tuning on a row subset] in TuningRows.cpp), its plan still the full
// variant's. Failed candidates are logged in metrics. The outcome's family is
// softmaxFamilyName(op), its kernel hk_softmax_dim and its paramsJson a
// SoftmaxDimParams point.
TuneOutcome tuneSoftmaxDim(const kernels::SoftmaxDimVariant& variant, int device, const TunerOptions& options = {},
                           kernels::SoftmaxOp op = kernels::SoftmaxOp::Softmax);

}  // namespace hotkernel
