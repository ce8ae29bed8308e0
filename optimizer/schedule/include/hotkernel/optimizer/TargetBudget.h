#pragma once
// The stop rules of one target's search, applied while it runs: its share of
// the optimizer's time, ~95% of its roofline, N rounds without improvement.
// No torch, no GPU.
//
// Note [Stopping a target's search]
// The ranking (Note [Amdahl ranking] in Ranking.h) gives each target a budget
// and a roofline time per call. A tuner turns them into a TargetClock and
//   - wraps its yield point with it: time spent waiting there for the GPU to
//     go idle is serving time, not optimizer time, and is not charged to the
//     target's budget;
//   - hands the search goodEnoughCost() (the roofline time / doneRooflineFraction, in the
//     search's unit, microseconds per call) and outOfTime() (budget spent),
//     and maxRoundsWithoutImprovement, so the search stops at the first of:
//     a candidate within 95% of the roofline, the budget, N rounds in a row
//     without a better candidate (SearchStop GoodEnough, OutOfTime,
//     NoImprovement);
//   - asks stop(bestUs, ...) before each further round of work (external
//     agent rounds), which applies stopRule() (Ranking.h) in its order;
//   - records summary() in the outcome's metrics ("target"): budget, spent
//     time, roofline, best time, and the stop reason, which the experiment
//     log carries (`hotkernel log`).
// A TargetBudget with no budget and no roofline (an unranked target: the
// ranking could not measure it) imposes nothing: the search keeps its own
// evaluation limit.

#include <nlohmann/json.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>

#include "hotkernel/optimizer/Ranking.h"
#include "hotkernel/optimizer/Search.h"

namespace hotkernel {

struct TargetBudget {
  double budgetSeconds = 0;           // optimizer time for the target, waits excluded; 0: no limit
  double rooflineSecondsPerCall = 0;  // 0: unknown, no near-roofline stop
  double doneRooflineFraction = 0.95;  // best time within this fraction of the roofline: done (Ranking.h)
  int maxRoundsWithoutImprovement = 0;  // 0: the search's own default

  // The budget and roofline the ranking gave `target`, with the options' stop rules.
  static TargetBudget from(const RankedTarget& target, const RankingOptions& options);
  bool limited() const { return budgetSeconds > 0 || rooflineSecondsPerCall > 0; }
};

// The stop reason of a target whose search ended with `stop`.
TargetStop targetStopOf(SearchStop stop);

// Time spent on one target (Note [Stopping a target's search]). Thread-safe.
class TargetClock {
 public:
  using Now = std::function<double()>;  // seconds on a monotonic clock
  static double steadyNow();

  explicit TargetClock(TargetBudget budget, Now now = &TargetClock::steadyNow);

  // `yieldPoint` (may be empty) with the time spent inside it not charged.
  // The returned function refers to this clock: it must not outlive it.
  std::function<bool()> wrapYield(std::function<bool()> yieldPoint);

  double spentSeconds() const;
  double waitedSeconds() const;
  bool budgetSpent() const;
  // Microseconds per call at or below which a candidate is near the roofline; 0: no such stop.
  double goodEnoughUs() const;
  // Sets the search's stops from the budget (keeps the options' other fields).
  void applyTo(SearchOptions& options) const;
  // stopRule() for the best time so far (microseconds; 0: none yet).
  TargetStop stop(double bestUs, int roundsWithoutImprovement) const;
  // {"budgetSeconds","spentSeconds","waitedSeconds","rooflineUs","bestUs","rooflineFraction","stop"}.
  nlohmann::json summary(double bestUs, TargetStop stop) const;

  const TargetBudget& budget() const { return budget_; }

 private:
  const TargetBudget budget_;
  const Now now_;
  const double start_;
  mutable std::mutex mu_;
  double waited_ = 0;  // Guarded by mu_.
};

}  // namespace hotkernel
