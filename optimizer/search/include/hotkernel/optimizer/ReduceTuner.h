#pragma once
// The last-dim reduction tuner: for one recorded variant of a ReduceOp over
// dim -1 (dtype, rows, cols, op), the family search (FamilyTuner.h) over the
// reduction family's points, each candidate through the five-stage harness in
// its general form (one output per row: the input's dtype for sum, mean, amax
// and amin, int64 compared exactly for argmax and argmin: Note [Exact integer
// outputs] in Harness.h; two for max.dim and min.dim: values bit for bit and
// int64 indices), and timed against ATen's CUDA kernel (at::cuda::<op>).

#include <functional>
#include <vector>

#include "hotkernel/kernels/ReduceFamily.h"
#include "hotkernel/optimizer/FamilyTuner.h"
#include "hotkernel/optimizer/Harness.h"
#include "hotkernel/optimizer/SoftmaxTuner.h"  // TunerOptions, TuneOutcome

namespace hotkernel {

// What the op must compute (Note [Reduction harness] in src/ReduceTuner.cpp):
// output "out", [rows] (max.dim / min.dim: "values" and "indices"). Reference:
// ATen's CUDA kernel called below the dispatcher. Kernel ABI:
// hk_reduce_lastdim's (in, out, rows, cols) (the pairs: (in, values, indices, rows, cols)).
RowOpSpec reduceSpec(kernels::ReduceOp op);

// The harness outputs of `op` with `perRowElements` results a row (1: the
// last-dim layout; inner: the middle-dim one): "out" (exact for the extrema,
// within `sumBound(in, ref, dtype)` for sum and mean), or a pair's "values"
// (bit for bit) and "indices" (int64, exact).
std::vector<RowOpOutput> reduceOutputs(
    kernels::ReduceOp op, int64_t perRowElements,
    std::function<at::Tensor(const at::Tensor& in, const at::Tensor& ref, kernels::DType dtype)> sumBound);

// A compiled reduction point as a harness candidate (the family's guards).
HarnessCandidate reduceCandidate(const kernels::ReduceVariant& v, const kernels::ReduceParams& params,
                                 const std::string& cubin);

// ATen's result of `op` over the last dim of a 2-D CUDA tensor, [rows]
// (at::cuda::<op>: never a hotkernel trampoline); max.dim / min.dim: the values.
at::Tensor atenReduceLastDim(const at::Tensor& x, kernels::ReduceOp op);
// Every output of `op` in reduceSpec's order: {result}, or {values, indices}.
std::vector<at::Tensor> atenReduceLastDimOutputs(const at::Tensor& x, kernels::ReduceOp op);

// What tuneReduce searches for `variant` on `device`, and what a cached kernel of it is checked with
// (Note [A tuner's spec] in FamilyTuner.h); called with the tuner's guards in place.
FamilyTuneSpec reduceTuneSpec(const kernels::ReduceVariant& variant, int device, const TunerOptions& options);

// Run on the calling thread on `device` (own stream, relaxed capture mode).
// Throws Error when the variant cannot be tuned at all; failed candidates are
// logged in metrics. The outcome's family is reduceFamilyName(op) and its
// paramsJson a ReduceParams point (makePlan reads both back).
TuneOutcome tuneReduce(const kernels::ReduceVariant& variant, int device, const TunerOptions& options = {});

}  // namespace hotkernel
