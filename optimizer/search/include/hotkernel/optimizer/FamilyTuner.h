#pragma once
// The family search every row-op tuner runs (Note [Family search] in
// src/FamilyTuner.cpp): the family's valid parameter points for one variant
// as a tiered search space, seeded with the family's best guesses; each
// candidate compiled with NVRTC (TBB, in parallel), passed once through the
// five-stage harness against the original kernel, then timed against it with
// the benchmark method, more interleaved pairs per budget level; the fastest
// whose speed-up CI clears the threshold is accepted. The softmax tuner
// (SoftmaxTuner.h) and the norm tuners (NormTuner.h) describe their family
// in a FamilyTuneSpec and call tuneFamily; nothing family-specific lives here.

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "hotkernel/kernels/DType.h"
#include "hotkernel/optimizer/Benchmark.h"
#include "hotkernel/optimizer/Harness.h"
#include "hotkernel/optimizer/Search.h"
#include "hotkernel/optimizer/TunerOptions.h"
#include "hotkernel/runtime/PlanTable.h"

namespace hotkernel {

// A family's parameter point as the search sees it: threads, rowsPerCta, vec,
// items (the axes the softmax and norm families share) and cluster (CTAs of a
// thread-block cluster per row; 1 for families without clusters).
struct FamilyPoint {
  int threads = 0, rowsPerCta = 1, vec = 1, items = 0, cluster = 1;
  // 1: the family's other kernel at the same geometry (the architecture tier's flag): softmax's slice
  // staged in shared memory (SoftmaxParams::smem), and k > 1 staged and pipelined over k rows a cluster
  // (SoftmaxParams::clusterRows); the norms' row split over a cooperative grid of `cluster` CTAs a
  // row (NormParams::split); 0 for cross_entropy and reductions.
  int variant = 0;
  SearchPoint toSearchPoint() const;
  static FamilyPoint fromSearchPoint(const SearchPoint& p);
};

// One input of the timed calls: a [rows, cols] tensor of the variant and the
// extra arguments of a call on it.
struct TimedInput {
  at::Tensor in;
  RowOpArgs args;
};

// Note [The ATen reference]
// A family's original kernel as the optimizer times it, defined once per family (FamilyTuning.cpp's table) and used by
// the family's tuner for the timed calls and by the target measurer
// (GpuTargetMeasurer) for the ranking's ATen time, so that both time the same
// call. `timedArgs` draws the extra arguments of a timed call on an input
// (labels, weights, eps) from `gen`; `call` is one call of the original
// kernel on the current stream, allocating its outputs like a dispatcher call.
struct AtenReference {
  std::function<RowOpArgs(const at::Tensor& in, at::Generator& gen)> timedArgs;
  std::function<void(const TimedInput&)> call;
  // When set, the timed input itself, drawn on `device` (then timedArgs is not
  // used): for a family whose input is not one [rows, cols] tensor (mm_pad_n:
  // self and the weight).
  std::function<TimedInput(int device, at::Generator& gen)> input;
};

// The reference of a family whose harness reference is also its timed call:
// `spec`'s makeArgs for the timed arguments, its references for the call.
AtenReference atenReferenceOfSpec(const RowOpSpec& spec);

// A generator for the optimizer's draws on `device`: a clone of the device's
// default generator, seeded at random (the serving process's stays untouched).
at::Generator timingGenerator(int device);

// Note [A tuner's spec]
// Each family tuner builds its FamilyTuneSpec in one function of its own
// (softmaxTuneSpec, rmsNormTuneSpec, ...; familyTuneSpecOf in FamilyTuning.h
// by descriptor) and hands it to tuneFamily. The check of a cached kernel
// before first use (Note [Cached kernels checked before first use] in
// CachedKernelCheck.h) builds the same spec, so that a kernel is checked with
// the candidate, harness spec, plan and timed inputs it was tuned with: one
// description per family, nothing copied.
struct FamilyTuneSpec {
  std::string family;      // the cache's family name: "softmax_lastdim", "rms_norm", "layer_norm"
  std::string kernelName;  // the template's entry point
  std::string source;      // the template
  std::string program;     // NVRTC's program name: "softmax_lastdim.cu"
  kernels::DType dtype = kernels::DType::Float32;
  int64_t rows = 0, cols = 0;  // the variant's shape, or the rows tuned on (chooseTuningRows)
  // With `rows` a row subset (Note [Tuning on a row subset] in TuningRows.cpp):
  // the variant's own rows, which the outcome's tunedRows and the target's
  // roofline refer to; 0: `rows` are all of them.
  int64_t variantRows = 0;
  // The five-stage harness's rows when fewer than `rows` (Note [A harness on
  // fewer rows] in TuningRows.cpp); 0: `rows`.
  int64_t harnessRows = 0;
  int64_t harnessRowCount() const { return harnessRows > 0 ? harnessRows : rows; }
  std::vector<FamilyPoint> validPoints;  // every point that fits the variant (the guard's whitelist)
  std::vector<FamilyPoint> seeds;        // the family's best guesses, best first
  std::function<std::vector<std::string>(const FamilyPoint&)> compileOptions;
  std::function<nlohmann::json(const FamilyPoint&)> paramsJson;  // what the cache stores
  std::function<HarnessCandidate(const FamilyPoint&, const std::string& cubin)> candidate;
  RowOpSpec harnessSpec;
  // The plan the trampoline would run (its launcher is what gets timed).
  std::function<Plan(const FamilyPoint&, const std::string& cubin)> makePlan;
  // The inputs the timed calls rotate over (Note [Timed outputs are checked]
  // in src/FamilyTuner.cpp): at least two draws of the variant with distinct
  // contents, each with its extra arguments (harnessSpec.makeArgs).
  std::vector<TimedInput> timedInputs;
  // One call of the original kernel on an input, allocating its outputs like
  // a dispatcher call would; on the current stream.
  std::function<void(const TimedInput&)> atenCall;
  // When set, timed instead of the plan's launcher with harnessSpec's
  // kernelArgs: one call of the whole plan on an input, as its trampoline
  // makes it, writing `outs` (harnessSpec's outputs, allocated by the
  // caller; cross_entropy zeroes the workspace counter only when the plan
  // says so). False: the launch failed.
  std::function<bool(const Plan&, const TimedInput&, const std::vector<at::Tensor>& outs)> planCall;
};

// A harness-validated candidate timed against the original kernel and its
// timed outputs checked (Note [Timed outputs are checked] in
// src/FamilyTuner.cpp): `pairs` interleaved pairs, the candidate's calls
// rotating over spec.timedInputs, the outputs of its first and last call
// compared with the reference for their inputs. `failure` is "" with a
// comparison, else "launch: ..." (a launch failed) or "timed: ..." (an output
// was wrong); Error "tuning interrupted" when `yieldPoint` said stop.
struct TimedCandidate {
  std::optional<Comparison> comparison;
  std::string failure;
};
TimedCandidate timeAndCheckCandidate(const FamilyTuneSpec& spec, const Plan& plan, int device, int pairs,
                                     const std::function<bool()>& yieldPoint = {});

// The inputs the timed calls rotate over: `count` (at least 2) [rows, cols]
// tensors of `dtype` on `device`, each drawn by `draw(k)` in row slices (a
// float32 [k, cols] slice: Note [Bounded units of background GPU work]) with
// a yield point before each, plus its extra arguments from spec.makeArgs.
// Error "tuning interrupted" when the yield point said stop.
std::vector<TimedInput> drawTimedInputs(const RowOpSpec& spec, kernels::DType dtype, int64_t rows, int64_t cols,
                                        int device, const std::function<at::Tensor(int64_t k)>& draw,
                                        const std::function<bool()>& yieldPoint, int count = 2);

// Sets spec.rows to the rows to tune on within options.memoryCapBytes (Note
// [Tuning on a row subset] in TuningRows.cpp), spec.variantRows to the
// variant's when they are fewer. Before: spec.rows all of the variant's rows,
// spec.validPoints set. Each row takes `rowBuffers` row-sized buffers of
// spec.dtype, the flush buffer twice the device's L2; the rows that fill the
// GPU come from its SMs and the most rows a CTA among spec.validPoints.
// `timedBuffers` > 0: a timed row alone takes that many row-sized buffers, and
// a variant the cap refuses otherwise may run its harness on fewer rows than
// its timed calls (spec.harnessRows: Note [A harness on fewer rows] in
// TuningRows.cpp). Error when not even those fit.
void chooseTuningRows(FamilyTuneSpec& spec, int device, int rowBuffers, const TunerOptions& options,
                      int timedBuffers = 0);
// The same with the rows that fill the GPU given (the middle-dim families, whose CTAs tile an outer row).
void chooseTuningRows(FamilyTuneSpec& spec, int device, int rowBuffers, int64_t fillRows,
                      const TunerOptions& options, int timedBuffers = 0);

// The middle-dim families' points on the search's axes: threads = tx * ty
// (the CTA), rows per CTA = ty (the dim's rows a CTA reads at once), vec; no
// items. The fewest outer rows of an [outer, dim, inner] variant that fill
// the GPU (Note [Tuning on a row subset] in TuningRows.cpp): for the valid
// point with the widest tile (tx * vec inner elements), which gives an outer
// row the fewest CTAs.
int64_t middleDimFillRows(int64_t inner, const std::vector<FamilyPoint>& valid, int smCount);

// Runs the search on `device` (the caller sets the device, stream and
// capture-mode guards). The outcome's metrics hold the candidates (one record
// per evaluated point, with lineage, harness stages and timings), the
// search's summary, the arch, and with options.clock the target's summary
// (budget, stop reason: Note [Stopping a target's search]); `bestSpeedup` is the accepted candidate's median speed-up (0 if
// none), `*bestUsOut` (when given) the fastest correct candidate's time in us
// (0 if none) for all of the variant's rows (a row subset's scaled by
// variantRows / rows, as the target's roofline is the variant's); with
// spec.variantRows the metrics record tunedRows. Throws Error "tuning
// interrupted" when options.yieldPoint says stop.
TuneOutcome tuneFamily(const FamilyTuneSpec& spec, int device, const std::string& arch, const TunerOptions& options,
                       double& bestSpeedup, double* bestUsOut = nullptr);

}  // namespace hotkernel
