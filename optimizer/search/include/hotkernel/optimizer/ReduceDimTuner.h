#pragma once
// The middle-dim reduction tuner: for one recorded variant of a ReduceOp over
// a dim that is not the last (dtype, outer, reduced, inner, op), the family
// search (FamilyTuner.h) over ReduceDimFamily's points, each candidate
// through the five-stage harness as a row op of [outer, reduced * inner] rows
// with an output of `inner` elements a row (the input's dtype for sum, mean,
// amax and amin, int64 compared exactly for argmax and argmin; max.dim and
// min.dim: values bit for bit and int64 indices), and timed
// against ATen's CUDA kernel over dim 1 of the [outer, reduced, inner] view.
// Its outcomes and cache entries are the op's family's (Note [Two layouts,
// one family] in kernels/src/ReduceDescriptor.cpp).

#include <cstdint>
#include <string>
#include <vector>

#include "hotkernel/kernels/ReduceDimFamily.h"
#include "hotkernel/optimizer/FamilyTuner.h"
#include "hotkernel/optimizer/Harness.h"
#include "hotkernel/optimizer/SoftmaxTuner.h"  // TunerOptions, TuneOutcome

namespace hotkernel {

// What the op must compute over the middle extent of rows of `inner`
// positions (Note [Middle-dim reduction harness] in src/ReduceDimTuner.cpp):
// output "out", [rows, inner] (max.dim / min.dim: "values" and "indices").
// Reference: ATen's CUDA kernel over dim 1 of the [rows, cols / inner, inner]
// view, called below the dispatcher. Kernel ABI: hk_reduce_dim's (in, out,
// outer, reduced, inner) (the pairs: (in, values, indices, outer, reduced, inner)).
RowOpSpec reduceDimSpec(kernels::ReduceOp op, int64_t inner);

// A compiled middle-dim point as a harness candidate (the family's guards;
// any (rows, cols) shape read as [rows, cols / inner, inner], refused unless
// inner divides cols).
HarnessCandidate reduceDimCandidate(const kernels::ReduceDimVariant& v, const kernels::ReduceDimParams& params,
                                    const std::string& cubin);

// ATen's result of `op` over the middle extent of a contiguous CUDA
// [rows, reduced * inner] tensor read as [rows, reduced, inner]: [rows, inner]
// (at::cuda::<op> over dim 1: never a hotkernel trampoline).
at::Tensor atenReduceMiddleDim(const at::Tensor& x, kernels::ReduceOp op, int64_t inner);
// Every output of `op` in reduceDimSpec's order: {result}, or {values, indices}.
std::vector<at::Tensor> atenReduceMiddleDimOutputs(const at::Tensor& x, kernels::ReduceOp op, int64_t inner);

// What tuneReduceDim searches for `variant` on `device`, and what a cached kernel of it is checked with
// (Note [A tuner's spec] in FamilyTuner.h); called with the tuner's guards in place.
FamilyTuneSpec reduceDimTuneSpec(const kernels::ReduceDimVariant& variant, int device, const TunerOptions& options);

// Run on the calling thread on `device` (own stream, relaxed capture mode).
// Throws Error when the variant cannot be tuned at all (not the family's,
// no NVRTC, over the memory cap even on the fewest rows that fill the GPU);
// failed candidates are logged in metrics. The outcome's family is
// reduceFamilyName(op), its kernel hk_reduce_dim and its paramsJson a
// ReduceDimParams point (the descriptor's makePlan reads them back for the
// variant's key with its inner extent).
TuneOutcome tuneReduceDim(const kernels::ReduceDimVariant& variant, int device, const TunerOptions& options = {});

}  // namespace hotkernel
