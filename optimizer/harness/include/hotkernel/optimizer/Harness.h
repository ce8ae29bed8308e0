#pragma once
// The five-stage correctness harness: every candidate passes all five stages
// before any of its timings counts, and its timed launches are checked too.
//
//  1. smoke        launches on the recorded variant, finishes within the
//                  watchdog, writes every output element (the output view
//                  lies at a random offset in a buffer pre-filled per launch
//                  with NaN or random bit patterns, alternating: Note
//                  [Randomized pre-fill and guards]), leaves the input
//                  untouched, writes nothing before or after the output
//                  (guard regions of random length and random contents),
//                  matches the reference elementwise (|out - ref| <= atol +
//                  rtol |ref|, each family's bound) and, against a float64
//                  reference, the family's invariant (softmax rows sum to 1,
//                  log_softmax's logsumexp is 0: Note [Family invariants]);
//  2. sweep        the variant's neighbours the candidate's guard accepts
//                  (1 row, rows +/- 1, cols +/- one vector, short rows);
//  3. stability    inputs x3, x0.01, negated, near the dtype's max, tiny
//                  magnitudes, all zeros, all-equal rows, a shifted copy,
//                  +inf / -inf entries and rows and a NaN (infinities only
//                  where the reference defines a result: Note [Stress inputs]);
//                  a float64 reference where cheap;
//  4. determinism  3 runs, each pre-filled differently (NaN, random bits),
//                  bitwise identical: an element a run leaves unwritten
//                  differs;
//  5. edge cases   misaligned pointers refused by the candidate's guard (when it
//                  needs alignment), non-contiguous inputs never reach it (the
//                  variant key refuses them), output never aliases the input.
// Inputs are fresh random data from a seed drawn per run and recorded; the
// pre-fills, guard lengths and offsets derive from the same seed.
// After the harness, the tuner checks the candidate's timed launches
// (checkOutputs: Note [Timed outputs are checked] in src/FamilyTuner.cpp).
//
// Note [Harness runs in-process]
// The harness launches candidates in the calling process, on its own stream.
// A candidate that never finishes trips the watchdog and is rejected, but the
// kernel keeps its SMs until the process ends; one that faults (an illegal
// address) is rejected with the CUDA error, but the sticky error ruins the
// process's CUDA context. Untrusted sources (external agents) therefore pass
// their first runs in a sandbox process first, on the variant's rows and on
// one row (Note [External agent rounds] in src/SoftmaxTuner.cpp).

#include <ATen/core/Tensor.h>

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "hotkernel/kernels/DType.h"
#include "hotkernel/runtime/CudaKernelLauncher.h"

namespace hotkernel {

// Note [Row ops with extra inputs and several outputs]
// One harness serves every row op. A single-output op of the (in, out, rows,
// cols) ABI (softmax) sets reference, reference64 and tolerance. An op with
// per-column inputs, scalars or several outputs (rms_norm: weight, eps ->
// out, rstd; layer_norm: weight, bias, eps -> out, mean, rstd) also sets
// outputs, makeArgs, references and kernelArgs: the harness then draws fresh
// extra arguments (weights of both signs, eps) for every check, so that a
// candidate ignoring one of them cannot hide behind a lucky value (a weight
// of ones), launches the candidate with the full argument list, and compares
// every output against the reference under that output's own bound. Both
// forms run the same five stages (runHarness normalizes the first into the
// second).
//
// Note [Row ops with per-row inputs, scalar outputs and a workspace]
// cross_entropy adds three things to the general form: a per-row input (the
// int64 targets, drawn per check with some ignore_index rows, ignore_index
// itself re-drawn: RowOpArgs::rowInputs and scalars), an output that is 0-dim
// (mean, sum) or [rows] in the input's dtype (none), and float32 scratch
// (per-row losses and a counter the kernel must leave at 0). The harness
// checks that the candidate leaves the per-row inputs untouched and the
// counter at 0, so a kernel that only works on a freshly zeroed workspace fails.

// The extra arguments of one call of a row op, drawn by RowOpSpec::makeArgs
// for every check (the determinism stage reuses one draw).
struct RowOpArgs {
  std::vector<at::Tensor> columns;             // per-column inputs ([cols]: weight, bias); undefined = absent
  std::vector<std::optional<double>> scalars;  // e.g. eps; nullopt = the op's default
  // Per-row inputs ([rows], any dtype: cross_entropy's int64 targets); the
  // candidate must not write them.
  std::vector<at::Tensor> rowInputs;
};

// One output the candidate writes.
struct RowOpOutput {
  std::string name;     // "out", "mean", "rstd"
  bool perRow = false;  // false: [rows, cols] in the input's dtype; true: [rows] float32
  // The largest |got - ref| allowed, per element (or a scalar), given the
  // input and every output's reference (in `outputs` order). NaN must meet
  // NaN and infinities must be equal regardless.
  std::function<at::Tensor(const at::Tensor& in, const std::vector<at::Tensor>& refs, kernels::DType dtype)> bound;
  // When set, used instead of `bound` in every check: a bound that also needs
  // the check's extra arguments (layer_norm's rstd allows ATen's own error
  // against a float64 reference, which needs eps: Note [Norm harness bounds]).
  // The float64 check of output 0 always uses `bound`.
  std::function<at::Tensor(const at::Tensor& in, const RowOpArgs& args, const std::vector<at::Tensor>& refs,
                           kernels::DType dtype)>
      boundWithArgs;
  // A 0-dim output in the input's dtype (cross_entropy's mean and sum); perRow is then ignored.
  bool scalar = false;
  // The bound of rows [b, b + n) of a [rows, cols] or [rows] output depends
  // on those rows alone (of the input, the references and the per-row
  // inputs): the harness then computes it per row slice, with the input,
  // references and per-row inputs narrowed to the slice (Note [Bounded units
  // of background GPU work] in WorkSlices.h). False: computed once on the
  // whole check.
  bool rowLocalBound = false;
  // With perRow: [rows] in the input's dtype instead of float32 (cross_entropy's reduction none).
  bool perRowInInputDtype = false;
  // With perRow: [rows] int64 (argmax's indices) instead of float32, compared
  // for equality (`bound` is not called; Note [Exact integer outputs]).
  bool exactInt64 = false;
  // With perRow and perRowInInputDtype: compared bit for bit with the
  // reference (`bound` is not called; Note [Bit-exact outputs]).
  bool exactBits = false;
  // With perRow: k elements a row, [rows, k] (a middle-dim reduction of an
  // [outer, reduced * inner] input: its inner results of each outer row:
  // Note [Middle-dim reduction harness] in src/ReduceDimTuner.cpp) when
  // k > 1; [rows] when 1. Its bound is then [rows, k] too (or broadcasts).
  int64_t perRowElements = 1;
};

// Note [Exact integer outputs]
// An index output (argmax) has no tolerance: every element must equal the
// reference's. Its buffer is pre-filled with INT64_MIN or random negative
// values instead of NaN or random bits (no index is negative, so an element
// the candidate never writes fails the comparison), its guards hold random
// values, and the determinism stage compares it with at::equal. There is no
// float64 check for it.

// Note [Bit-exact outputs]
// An output that copies input elements (max.dim's values: the element at the
// index, Note [Value and index pairs] in kernels/src/ReduceFamily.cpp) must
// equal the reference bit for bit: a NaN with its payload, a zero with its
// sign. Compared as integers of the element's width, like an exact int64
// output; pre-filled as any output in the input's dtype (NaN or random bits).
// One exception: two bfloat16 NaNs are equal whatever their payloads. ATen's
// own bfloat16 NaN bits are not a property of the input: its reduction moves
// values between lanes through float (a NaN becomes 0x7FFF) or not,
// depending on which thread read the element, so the same call keeps a
// payload at one shape and not at another.


// What the candidate must compute, for one row op.
struct RowOpSpec {
  std::string op;                                                    // "aten::_softmax"
  // The single-output form.
  std::function<at::Tensor(const at::Tensor&)> reference;            // the original ATen kernel
  std::function<at::Tensor(const at::Tensor&)> reference64;          // float64 reference, or empty
  std::function<double(kernels::DType, int64_t cols)> tolerance;     // max abs error vs reference

  // The general form (Note [Row ops with extra inputs and several outputs]);
  // `outputs` empty: the single-output form above.
  std::vector<RowOpOutput> outputs;
  std::function<RowOpArgs(int64_t rows, int64_t cols, kernels::DType dtype, at::Generator& gen)> makeArgs;
  // The original kernel's outputs, in `outputs` order, shaped [rows, cols] or [rows].
  std::function<std::vector<at::Tensor>(const at::Tensor& in, const RowOpArgs& args)> references;
  // Output 0 computed in float64 from a float64 input, or empty.
  std::function<at::Tensor(const at::Tensor& in64, const RowOpArgs& args)> references64;
  // The candidate's argument list, in its kernel's parameter order.
  std::function<KernelArgs(const at::Tensor& in, const RowOpArgs& args, const std::vector<at::Tensor>& outs)>
      kernelArgs;
  // Whether the reference's result for inputs holding infinities is defined
  // (the stability stage feeds +inf and -inf only then; NaN always). False
  // for the norms: ATen's two CUDA paths disagree on a row holding an
  // infinity (Note [Stress inputs] in src/Harness.cpp).
  bool infinitiesDefined = true;
  // Note [Family invariants]
  // A property output 0 has against exact arithmetic, checked on the rows of
  // the float64 check (up to 256): softmax's rows sum to 1, log_softmax's
  // logsumexp is 0. Given those rows of the input (float64), of the
  // candidate's output 0 (as float64) and of the float64 reference, returns
  // "" or what is violated (with the row and the bound). Rows the float64
  // reference makes NaN carry no invariant. The elementwise bound allows
  // every element its own rounding in any direction; an invariant catches a
  // bias that stays within it on every element (a kernel that scales every
  // probability by 1 + 2^-8 in bfloat16). Empty: none.
  std::function<std::string(const at::Tensor& in64, const at::Tensor& out64, const at::Tensor& ref64,
                            kernels::DType dtype)>
      invariant;
  // The magnitude of the stability stage's "near max" inputs; empty: a
  // quarter of the dtype's max. Sums set it lower (Note [Near-max inputs of
  // sums] in src/Harness.cpp).
  std::function<double(kernels::DType, int64_t cols)> nearMaxMagnitude;
  // Float32 scratch the candidate needs, when set and > 0 for a shape: passed
  // to kernelArgs after the outputs (the last entry of its `outs`), fresh per
  // launch, NaN but for the trailing `workspaceZeroTail` floats, which are 0
  // and must still be 0 after the launch (Note [Row ops with per-row inputs,
  // scalar outputs and a workspace]).
  std::function<int64_t(int64_t rows, int64_t cols)> workspaceFloats;
  int64_t workspaceZeroTail = 0;
};

// A compiled candidate and its guard.
struct HarnessCandidate {
  std::string cubin;
  std::string kernelName;
  std::string description;
  std::function<LaunchGeometry(int64_t rows, int64_t cols)> geometry;
  std::function<bool(int64_t rows, int64_t cols)> acceptsShape;
  std::function<bool(const void* in, const void* out)> acceptsPointers;
  size_t alignment = 16;
  // What the guard needs of the output pointer when less than `alignment`
  // (cross_entropy: one element); 0: `alignment`.
  size_t outputAlignment = 0;
};

enum class HarnessStage { Smoke = 0, Sweep = 1, Stability = 2, Determinism = 3, EdgeCases = 4 };
const char* toString(HarnessStage stage);

struct StageResult {
  HarnessStage stage;
  bool passed = false;
  std::string detail;  // what failed, or what was covered
};

struct HarnessReport {
  bool passed = false;
  std::vector<StageResult> stages;  // in order, up to and including the first failure
  uint64_t seed = 0;
  double maxAbsError = 0;  // worst error of output 0 vs the reference over all passing checks
  // The first failing stage, or nullptr.
  const StageResult* failure() const;
};

struct HarnessOptions {
  double watchdogSeconds = 10.0;
  uint64_t seed = 0;  // 0: draw a fresh one
  // Called between bounded units of GPU work, with none of the harness's work
  // in flight (Note [Bounded units of background GPU work] in WorkSlices.h:
  // before each candidate launch, reference, input slice and comparison
  // slice); see TunerOptions::yieldPoint. Returning false abandons the run:
  // the stage running fails with "interrupted" and nothing of the run counts.
  std::function<bool()> yieldPoint;
};

// The torch dtype of a family dtype.
at::ScalarType scalarTypeOf(kernels::DType dtype);

// The family dtype of a float32, float16 or bfloat16 tensor (Error otherwise).
kernels::DType dtypeOfTensor(const at::Tensor& t);

// Output `o` of a check on a [rows, cols] input, as a view of the first
// elements of `flat` (the harness's buffer, a canary after them): 0-dim for a
// scalar output, [rows] per row ([rows, k] with k = perRowElements > 1),
// else [rows, cols].
at::Tensor outputView(const at::Tensor& flat, const RowOpOutput& o, int64_t rows, int64_t cols);

// Elements of an exact output (RowOpOutput::exactInt64) that differ from the
// reference (compared as int64, same shape): empty when none, else how many
// and the first one.
std::string exactOutputMismatch(const at::Tensor& out, const at::Tensor& ref);

// `spec` in its general form (outputs, makeArgs, references, kernelArgs set):
// a single-output spec turned into it (Note [Row ops with extra inputs and
// several outputs]). Throws Error when a form is incomplete.
RowOpSpec generalForm(const RowOpSpec& spec);

// Fresh, uninitialized outputs of one call of `spec` (general form) on the
// [rows, cols] input `in`, in `spec.outputs` order, shaped as outputView
// shapes them: what a dispatcher call allocates.
std::vector<at::Tensor> allocateOutputs(const RowOpSpec& spec, const at::Tensor& in);

// Outputs a candidate wrote elsewhere (the tuner's timed launches: Note
// [Timed outputs are checked] in src/FamilyTuner.cpp) compared with the
// reference for `in` and `args`, each under its output's bound, as a check of
// the harness compares them (NaN positions, infinities, the elementwise
// bound, the family invariant against float64). "" when they pass, else why;
// "interrupted" when `yieldPoint` (called between bounded units of work, may
// be empty) said stop.
std::string checkOutputs(const RowOpSpec& spec, kernels::DType dtype, const at::Tensor& in, const RowOpArgs& args,
                         const std::vector<at::Tensor>& outs, const std::function<bool()>& yieldPoint = {});

// Runs the five stages on `device` for the recorded variant (dtype, rows, cols).
// Never throws for a bad candidate (that is a failed stage); throws Error for
// a broken environment (no driver).
HarnessReport runHarness(const RowOpSpec& spec, const HarnessCandidate& candidate, kernels::DType dtype,
                         int64_t rows, int64_t cols, int device, const HarnessOptions& options = {});

}  // namespace hotkernel
