#pragma once
// Amdahl ranking of optimization targets: which (op, variant) to spend the
// optimizer's time on, how much time each gets, and when to stop on one.
// Pure functions over small structs; no torch, no GPU.
//
// Note [Amdahl ranking]
// A target's worth is the GPU time it could give back, not how slow it looks:
//   rooflineSeconds = max(bytesPerCall / copyBandwidth, flopsPerCall / peakFlops)
//   headroom        = 1 - rooflineSeconds / currentSecondsPerCall     (clamped to [0, 1])
//   expectedSaving  = gpuSeconds * headroom
// where gpuSeconds is the recorded GPU time attributed to the target. A 2x
// slow op that takes 0.1% of the time is worth less than a 10% slow op that
// takes half of it. The peaks are the machine's, measured on it (copy
// bandwidth by a device-to-device copy, FLOP/s by a GEMM) and passed in,
// never looked up in a table: a table is wrong for clocks, power caps, MIG
// slices and the next GPU. A current time below the roofline (noise, or a
// peak measured low) reads as zero headroom, not as a negative saving.
//
// Note [Budget allocation]
// The search budget (seconds of optimizer time) is split in proportion to the
// expected saving, with a floor per target: below some minimum a search
// cannot even compile and time its first population, so a smaller share is
// wasted. When the budget cannot give every target the floor, the
// lowest-ranked targets get nothing this pass (they stay ranked and are
// served by a later pass); the rest are split by water-filling: targets whose
// proportional share falls below the floor are raised to it and the
// remainder is re-split among the others, until every share is >= the floor.
// The shares always add up to the budget (or to nothing when there is none).
//
// Note [Done near the roofline]
// A target whose ATen kernel runs at >= doneRooflineFraction (0.95) of its
// roofline is not searched, and a search stops once a candidate gets there.
// The roofline is a copy's bandwidth, measured on a 1 GiB buffer (Note [Copy
// bandwidth peak]); an op that only reads (the reductions, cross_entropy's
// logits) reads a few percent faster than that on the multi-GB inputs where
// it matters, so ATen at 90-94% of the copy roofline can still leave 5-10% to
// a kernel that reads at the device's peak (docs/design/optimizer.md). Below
// 0.95 the search is worth its optimizer time; above it what is left is
// within the benchmark's noise.
//
// Note [Decided targets]
// "Keep ATen" is a result, not a failure: once a target has a decision
// (a kernel accepted, or ATen kept) under an environment fingerprint, it is
// not ranked again under that fingerprint. A new driver, NVRTC, torch, GPU or
// hotkernel version changes the fingerprint, and every target is ranked anew.

#include <string>
#include <vector>

namespace hotkernel {

// Peaks of this machine, measured on it (Note [Amdahl ranking]).
struct MachinePeaks {
  double copyBytesPerSecond = 0;  // device copy bandwidth (bytes read + written per second); must be > 0
  double flopsPerSecond = 0;      // peak FLOP/s for the target's dtype; 0: unknown (then flopsPerCall must be 0)
};

// One (op, variant) as recorded in the serving process.
struct TargetProfile {
  std::string op;                    // e.g. "aten::_softmax"
  std::string variant;               // the cache's variant string, e.g. "dtype=bfloat16;rows=4096;cols=32000"
  double gpuSeconds = 0;             // recorded GPU time attributed to this target (all calls)
  double bytesPerCall = 0;           // ideal DRAM traffic of one call (the family's bytes model)
  double flopsPerCall = 0;           // floating-point operations of one call (0 for memory-bound ops)
  double currentSecondsPerCall = 0;  // measured time of one call of what runs now (ATen or a kernel); > 0
};

// Roofline time of one call: max(bytes / copy bandwidth, flops / peak FLOP/s).
// Throws Error on a negative size, a non-positive bandwidth, or flops without a FLOP/s peak.
double rooflineSeconds(double bytesPerCall, double flopsPerCall, const MachinePeaks& peaks);

// 1 - roofline / current, clamped to [0, 1]. Throws Error unless current > 0 (and as rooflineSeconds).
double headroom(const TargetProfile& target, const MachinePeaks& peaks);

// gpuSeconds * headroom. Throws Error on negative gpuSeconds (and as headroom).
double expectedSavingSeconds(const TargetProfile& target, const MachinePeaks& peaks);

struct RankingOptions {
  double budgetSeconds = 600;           // optimizer time to split over the ranked targets
  double minBudgetSeconds = 30;         // floor per target (Note [Budget allocation])
  // At >= this fraction of its roofline a target is done (Note [Done near the roofline]).
  double doneRooflineFraction = 0.95;
  // Search rounds without a better candidate before a target is done; the
  // search's default (SearchOptions), so every tier is tried once after the last improvement.
  int maxRoundsWithoutImprovement = 8;
};

// Why a target is not (or no longer) worth optimizing.
enum class TargetStop {
  None,           // keep going
  Decided,        // has a decision under the current fingerprint (Note [Decided targets])
  NearRoofline,   // runs at >= doneRooflineFraction of its roofline
  NoGpuTime,      // nothing recorded: saving would be zero
  NoImprovement,  // maxRoundsWithoutImprovement rounds in a row found nothing faster
  BudgetSpent,    // spent its share of the budget
  NoBudget,       // ranked, but the budget could not cover its floor this pass
};
const char* toString(TargetStop stop);

// A recorded outcome for a target under one environment fingerprint.
enum class TargetOutcome { KernelAccepted, KeptAten };
const char* toString(TargetOutcome outcome);

struct TargetDecision {
  std::string op;
  std::string variant;
  std::string fingerprint;  // Fingerprint::key() of the environment the decision was made in
  TargetOutcome outcome = TargetOutcome::KeptAten;
};

struct RankedTarget {
  TargetProfile target;
  double rooflineSecondsPerCall = 0;
  double rooflineFraction = 0;  // roofline / current: 1 = at the roofline (may exceed 1 with noise)
  double headroom = 0;
  double expectedSavingSeconds = 0;
  double budgetSeconds = 0;            // share of RankingOptions::budgetSeconds; 0 with stop == NoBudget
  TargetStop stop = TargetStop::None;  // None or NoBudget
};

struct SkippedTarget {
  TargetProfile target;
  TargetStop reason = TargetStop::None;  // Decided, NearRoofline or NoGpuTime
  double rooflineSecondsPerCall = 0;
  double rooflineFraction = 0;  // roofline / current
};

struct Ranking {
  std::vector<RankedTarget> ranked;    // largest expected saving first (ties: op, then variant)
  std::vector<SkippedTarget> skipped;  // in input order
};

// Ranks `targets` (Note [Amdahl ranking]) and splits options.budgetSeconds over
// them (Note [Budget allocation]). Targets with a decision under
// `fingerprint` are skipped (Note [Decided targets]), as are targets already
// near their roofline or with no recorded GPU time. Throws Error on invalid
// numbers or options, or when an (op, variant) appears twice in `targets`.
Ranking rank(const std::vector<TargetProfile>& targets, const MachinePeaks& peaks,
             const std::vector<TargetDecision>& decisions, const std::string& fingerprint,
             const RankingOptions& options = {});

// Splits `budget` over `savings` (sorted largest first, every one > 0) with a
// floor of `minimum` per share (Note [Budget allocation]). Shares are in the
// order of `savings`; trailing zeros for targets the budget cannot reach.
// Throws Error on a negative budget or minimum, or savings not sorted or not > 0.
std::vector<double> allocateBudget(const std::vector<double>& savings, double budget, double minimum);

// Progress of the search on one target, kept by the caller.
struct TargetProgress {
  double bestSecondsPerCall = 0;     // fastest correct time found so far (0: none yet)
  int roundsWithoutImprovement = 0;  // consecutive search rounds that found nothing faster
  double spentSeconds = 0;           // optimizer time spent on the target
};

// The stop rules, in this order: NearRoofline (best time within
// doneRooflineFraction of the roofline), BudgetSpent, NoImprovement; else None.
TargetStop stopRule(const RankedTarget& target, const TargetProgress& progress, const RankingOptions& options);

}  // namespace hotkernel
