#pragma once
// Ranks queued optimizer jobs by Amdahl (Note [Amdahl ranking] in Ranking.h):
// measures what the ranking needs (the machine's peaks once per device, each
// target's current time per call once), takes the recorded call counts, and
// returns the jobs largest expected saving first with their budget shares.
// The worker's ranker (Note [Ranked queue] in OptimizerWorker.h) and the
// order of `hotkernel warmup`. No torch: the GPU is behind TargetMeasurer.
//
// Note [Ranking measurements]
//   gpuSeconds            = estimatedCalls (recorder or profile) x currentSecondsPerCall
//   currentSecondsPerCall = the ATen kernel timed by the measurer (the benchmark
//                           method), once per target and process: it does not
//                           change while the target is queued
//   bytesPerCall, flops   = the family's model (callCost, TargetCost.h)
//   peaks                 = measured once per device and process
// A target whose measurement fails (an op the measurer cannot time, over the
// memory cap) is not ranked: it keeps its place after the ranked ones,
// without a target (the tuner's own limits), and the failure is logged once.
// When the peaks cannot be measured, nothing is ranked and the queue keeps
// its arrival order. A failed measurement is not retried in this process.
//
// Not thread-safe: one caller at a time (the worker thread, or warm-up's main).

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "hotkernel/optimizer/OptimizerWorker.h"
#include "hotkernel/optimizer/Ranking.h"
#include "hotkernel/optimizer/TargetMeasurer.h"

namespace hotkernel {

struct QueueRankerHooks {
  // Calls of the target recorded so far (the recorder's estimate, or the profile's). Required.
  std::function<double(const OptimizerJob& job)> estimatedCalls;
  // Whether the target has a decision (kernel or keep ATen) under the current
  // environment fingerprint (Note [Decided targets]); empty: none has.
  std::function<bool(const OptimizerJob& job)> decided;
  // Told about every job the ranking drops (decided, near its roofline, no
  // recorded time), to record "keep ATen" and log it. May be empty.
  std::function<void(const OptimizerJob& job, const SkippedTarget& skipped)> onSkipped;
};

// What the last ranking measured and decided, for logs and the CLI.
struct QueueRanking {
  JobOrder order;                    // ranked (budget > 0), then NoBudget, then unmeasured
  std::vector<SkippedTarget> skipped;
  std::vector<OptimizerJob> unmeasured;  // no measurement: kept, unranked
  std::optional<MachinePeaks> peaks;     // of the first job's device
};

class QueueRanker {
 public:
  QueueRanker(TargetMeasurer& measurer, RankingOptions options, QueueRankerHooks hooks);

  // Ranks `queued` (Note [Ranking measurements]) and splits `budgetSeconds`
  // (default: options().budgetSeconds) over it, with a floor of
  // min(minBudgetSeconds, budget); decided jobs are dropped before anything is
  // measured. Calls hooks.onSkipped for the dropped ones.
  QueueRanking rank(const std::vector<OptimizerJob>& queued, std::optional<double> budgetSeconds = std::nullopt);
  // rank(queued).order: the worker's RankFn.
  JobOrder operator()(const std::vector<OptimizerJob>& queued) { return rank(queued).order; }

  const RankingOptions& options() const { return options_; }

 private:
  std::optional<MachinePeaks> peaksFor(int device);
  std::optional<double> secondsPerCall(const OptimizerJob& job);

  TargetMeasurer& measurer_;
  const RankingOptions options_;
  const QueueRankerHooks hooks_;
  std::map<int, std::optional<MachinePeaks>> peaks_;       // nullopt: measuring failed
  std::map<std::string, std::optional<double>> seconds_;   // jobId -> seconds per call; nullopt: failed
};

}  // namespace hotkernel
