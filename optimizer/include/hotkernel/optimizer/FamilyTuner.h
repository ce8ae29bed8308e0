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
#include <string>
#include <vector>

#include "hotkernel/kernels/DType.h"
#include "hotkernel/optimizer/Harness.h"
#include "hotkernel/optimizer/Search.h"
#include "hotkernel/optimizer/TunerOptions.h"

namespace hotkernel {

// A family's parameter point as the search sees it: threads, rowsPerCta, vec,
// items (the axes the softmax and norm families share) and cluster (CTAs of a
// thread-block cluster per row; 1 for families without clusters).
struct FamilyPoint {
  int threads = 0, rowsPerCta = 1, vec = 1, items = 0, cluster = 1;
  // 1: the family's other kernel at the same geometry (the architecture tier's flag): softmax's slice
  // staged in shared memory (SoftmaxParams::smem); 0 for cross_entropy, the norms and reductions.
  int variant = 0;
  SearchPoint toSearchPoint() const;
  static FamilyPoint fromSearchPoint(const SearchPoint& p);
};

struct FamilyTuneSpec {
  std::string family;      // the cache's family name: "softmax_lastdim", "rms_norm", "layer_norm"
  std::string kernelName;  // the template's entry point
  std::string source;      // the template
  std::string program;     // NVRTC's program name: "softmax_lastdim.cu"
  kernels::DType dtype = kernels::DType::Float32;
  int64_t rows = 0, cols = 0;
  std::vector<FamilyPoint> validPoints;  // every point that fits the variant (the guard's whitelist)
  std::vector<FamilyPoint> seeds;        // the family's best guesses, best first
  std::function<std::vector<std::string>(const FamilyPoint&)> compileOptions;
  std::function<nlohmann::json(const FamilyPoint&)> paramsJson;  // what the cache stores
  std::function<HarnessCandidate(const FamilyPoint&, const std::string& cubin)> candidate;
  RowOpSpec harnessSpec;
  // The plan the trampoline would run (its launcher is what gets timed).
  std::function<Plan(const FamilyPoint&, const std::string& cubin)> makePlan;
  // One call of the original kernel, and one of a plan's launcher, each
  // allocating its outputs like a dispatcher call would; on the current stream.
  std::function<void()> atenCall;
  std::function<bool(const KernelLauncher&)> candidateCall;
  // When set, timed instead of candidateCall: one call of the whole plan, as
  // its trampoline makes it (cross_entropy zeroes the workspace counter only
  // when the plan says so).
  std::function<bool(const Plan&)> planCall;
};

// Runs the search on `device` (the caller sets the device, stream and
// capture-mode guards). The outcome's metrics hold "candidates" (one entry per
// evaluated point, with lineage, harness stages and timings), "search", and
// with options.clock "target" (budget, stop reason: Note [Stopping a target's
// search]); `bestSpeedup` is the accepted candidate's median speed-up (0 if
// none), `*bestUsOut` (when given) the fastest correct candidate's time in us
// (0 if none). Throws Error "tuning interrupted" when options.yieldPoint says stop.
TuneOutcome tuneFamily(const FamilyTuneSpec& spec, int device, const std::string& arch, const TunerOptions& options,
                       double& bestSpeedup, double* bestUsOut = nullptr);

}  // namespace hotkernel
