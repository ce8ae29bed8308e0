#pragma once
// The correctness check of a fused chain kernel against the chain run
// unfused by ATen (runChainWithAten), before any of its timings counts.
//
// Note [Chain harness]
// A candidate is checked as the deferral engine runs it: loaded as a
// ChainPlan from the entry params it would be cached with, launched through
// the plan's guard, on fresh random inputs of every chain input (Full,
// Column and Row tensors, Scalar inputs exact in float32) drawn from a seed
// recorded in the report. The five stages of Harness.h, as they apply:
// A variant with a layout runs every stage on memory laid out as its calls
// had it (Note [Chain values in a layout]); an output's buffer is its span.
//  1. smoke        one launch on the variant, outputs at a random offset in a
//                  buffer pre-filled with NaN, guard regions of random
//                  length and bits before and after each output left
//                  untouched, inputs untouched, every output within the
//                  bound of Note [Chain harness tolerance] of ATen's;
//  2. sweep        a chain variant fixes rows and cols (its plan serves no
//                  other shape), so there is no shape to sweep: the stage
//                  draws three more inputs instead (uniform, normal, uniform
//                  again under another pre-fill of random bits);
//  3. stability    inputs x3, x0.01, negated, all zeros, and NaN, +inf and
//                  -inf at random elements of every tensor input (NaN only
//                  in the broadcast inputs of a chain with reductions: Note
//                  [Infinite broadcast inputs] in ChainHarness.cpp): NaN exactly
//                  where ATen's output is NaN, infinities equal, the rest
//                  within the bound; every op of the vocabulary is defined on
//                  infinities (IEEE float32, the same in both), so none is
//                  left out. Near-max magnitudes are not drawn: a 16-bit
//                  intermediate that overflows in eager order stays finite in
//                  float32, which is a legitimate difference, not a fault;
//  4. determinism  three launches on one input, pre-filled NaN and two
//                  random bit patterns, bitwise equal;
//  5. edge cases   the plan's guard refuses a misaligned input and output
//                  (when the kernel's accesses need more than one byte of
//                  alignment: one element off, else one byte), an output over
//                  an input, and a wrong count of inputs (nothing launched).
// A launch that fails, faults or does not finish within the watchdog fails
// its stage. The yield point runs before every launch and reference, with
// none of the harness's work in flight; false abandons the run
// ("interrupted").
//
// Note [Chain harness tolerance]
// |out - ref| <= b (1 + |ref|) per element, ref ATen's output: b = 2^-4 for
// a chain with any 16-bit value (Note [Interpreter modes tolerance]: eager
// rounds every intermediate, the kernel only its outputs and casts; float32
// outputs of such a chain inherit its 16-bit roundings); for a float32 chain
// b = 2^-12 with reductions (the sum order differs from ATen's) and 2^-20
// without (the same float32 functions in the same order: a few ulps at most),
// but 2^-17 for one that scales by the rsqrt of a value plus a constant (an
// eval batch norm's invstd): ATen runs a float32 eval batch norm on CUDA as
// cuDNN's, whose result is not computed in the chain's order (x - mean) *
// invstd * w + b (ATen's own kernel's) and is a few float32 units of its
// terms (|x * invstd * w|, |b|) from it, more than of its result where the
// terms cancel.

#include <cstdint>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "hotkernel/chain/ChainLayout.h"
#include "hotkernel/chain/ChainPlan.h"
#include "hotkernel/optimizer/ChainReference.h"
#include "hotkernel/optimizer/Harness.h"

namespace hotkernel {

// b of Note [Chain harness tolerance] for `ir`.
double chainTolerance(const chain::ChainIR& ir);

// How the values of a draw are distributed.
enum class ChainDraw { Uniform, Normal };

// Fresh inputs of `ir` over [rows, cols] in `layout` on the current CUDA
// device and stream, from `gen`: each tensor input's memory (a 1-d buffer of
// chainArgumentElements: Note [Chain values in a layout]) uniform in [-2, 2)
// or normal (mean 0.5, std 2), rounded to its dtype; Scalar inputs uniform in
// [0.5, 2), exact in float32. The kernel reads the memory; ATen computes on
// chainInputViews of it.
std::vector<ChainReferenceInput> drawChainMemory(const chain::ChainIR& ir, const chain::ChainLayout& layout,
                                                 int64_t rows, int64_t cols, ChainDraw draw, at::Generator& gen);

// The same draw in the contiguous layout, as the values ([rows, extent],
// [extent], [rows, 1]) themselves.
std::vector<ChainReferenceInput> drawChainInputs(const chain::ChainIR& ir, int64_t rows, int64_t cols,
                                                 ChainDraw draw, at::Generator& gen);

// The plan's call arguments for `inputs` (a tensor's pointer, a Scalar's value).
std::vector<chain::ChainInputValue> chainInputValues(const std::vector<ChainReferenceInput>& inputs);

// "" when every output of `got` is within `bound` (Note [Chain harness
// tolerance]) of `ref` (same shapes, ir.outputs() order), NaN exactly where
// ref has NaN and infinities equal; else the first output that is not, with
// its worst element. `maxAbsError` (when given) is raised to output 0's
// largest finite |got - ref|.
std::string compareChainOutputs(const std::vector<at::Tensor>& got, const std::vector<at::Tensor>& ref, double bound,
                                double* maxAbsError = nullptr);

// The five stages (Note [Chain harness]) of `plan` on its variant's device.
// Never throws for a bad candidate (a failed stage); throws Error for a
// broken environment.
HarnessReport runChainHarness(const chain::ChainPlan& plan, const HarnessOptions& options = {});

}  // namespace hotkernel
