#pragma once
// The last-dim reduction tuner: for one recorded variant of a ReduceOp over
// dim -1 (dtype, rows, cols, op), the family search (FamilyTuner.h) over the
// reduction family's points, each candidate through the five-stage harness in
// its general form (one output per row: the input's dtype for sum, mean, amax
// and amin, int64 compared exactly for argmax and argmin: Note [Exact integer
// outputs] in Harness.h), and timed against ATen's CUDA kernel (at::cuda::<op>).

#include "hotkernel/kernels/ReduceFamily.h"
#include "hotkernel/optimizer/Harness.h"
#include "hotkernel/optimizer/SoftmaxTuner.h"  // TunerOptions, TuneOutcome

namespace hotkernel {

// What the op must compute (Note [Reduction harness] in src/ReduceTuner.cpp):
// output "out", [rows]. Reference: ATen's CUDA kernel called below the
// dispatcher. Kernel ABI: hk_reduce_lastdim's (in, out, rows, cols).
RowOpSpec reduceSpec(kernels::ReduceOp op);

// A compiled reduction point as a harness candidate (the family's guards).
HarnessCandidate reduceCandidate(const kernels::ReduceVariant& v, const kernels::ReduceParams& params,
                                 const std::string& cubin);

// ATen's result of `op` over the last dim of a 2-D CUDA tensor, [rows]
// (at::cuda::<op>: never a hotkernel trampoline).
at::Tensor atenReduceLastDim(const at::Tensor& x, kernels::ReduceOp op);

// Run on the calling thread on `device` (own stream, relaxed capture mode).
// Throws Error when the variant cannot be tuned at all; failed candidates are
// logged in metrics. The outcome's family is reduceFamilyName(op) and its
// paramsJson a ReduceParams point (makePlan reads both back).
TuneOutcome tuneReduce(const kernels::ReduceVariant& variant, int device, const TunerOptions& options = {});

}  // namespace hotkernel
