#include "hotkernel/optimizer/Ranking.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>
#include <tuple>
#include <utility>

#include "hotkernel/runtime/Check.h"

namespace hotkernel {
namespace {

bool finiteNonNegative(double x) { return std::isfinite(x) && x >= 0; }

void checkOptions(const RankingOptions& o) {
  HOTKERNEL_CHECK(finiteNonNegative(o.budgetSeconds), "budgetSeconds must be finite and >= 0, got ", o.budgetSeconds);
  HOTKERNEL_CHECK(finiteNonNegative(o.minBudgetSeconds), "minBudgetSeconds must be finite and >= 0, got ",
                  o.minBudgetSeconds);
  HOTKERNEL_CHECK(o.doneRooflineFraction > 0 && o.doneRooflineFraction <= 1,
                  "doneRooflineFraction must be in (0, 1], got ", o.doneRooflineFraction);
  HOTKERNEL_CHECK(o.maxRoundsWithoutImprovement >= 1, "maxRoundsWithoutImprovement must be >= 1, got ",
                  o.maxRoundsWithoutImprovement);
}

}  // namespace

const char* toString(TargetStop stop) {
  switch (stop) {
    case TargetStop::None:
      return "none";
    case TargetStop::Decided:
      return "decided";
    case TargetStop::NearRoofline:
      return "near_roofline";
    case TargetStop::NoGpuTime:
      return "no_gpu_time";
    case TargetStop::NoImprovement:
      return "no_improvement";
    case TargetStop::BudgetSpent:
      return "budget_spent";
    case TargetStop::NoBudget:
      return "no_budget";
  }
  return "unknown";
}

const char* toString(TargetOutcome outcome) {
  switch (outcome) {
    case TargetOutcome::KernelAccepted:
      return "kernel_accepted";
    case TargetOutcome::KeptAten:
      return "kept_aten";
  }
  return "unknown";
}

double rooflineSeconds(double bytesPerCall, double flopsPerCall, const MachinePeaks& peaks) {
  HOTKERNEL_CHECK(finiteNonNegative(bytesPerCall), "bytesPerCall must be finite and >= 0, got ", bytesPerCall);
  HOTKERNEL_CHECK(finiteNonNegative(flopsPerCall), "flopsPerCall must be finite and >= 0, got ", flopsPerCall);
  HOTKERNEL_CHECK(std::isfinite(peaks.copyBytesPerSecond) && peaks.copyBytesPerSecond > 0,
                  "the measured copy bandwidth must be > 0, got ", peaks.copyBytesPerSecond);
  HOTKERNEL_CHECK(finiteNonNegative(peaks.flopsPerSecond), "the measured FLOP/s peak must be finite and >= 0, got ",
                  peaks.flopsPerSecond);
  HOTKERNEL_CHECK(flopsPerCall == 0 || peaks.flopsPerSecond > 0, "a target with ", flopsPerCall,
                  " flops per call needs a measured FLOP/s peak");
  const double memory = bytesPerCall / peaks.copyBytesPerSecond;
  const double compute = flopsPerCall > 0 ? flopsPerCall / peaks.flopsPerSecond : 0.0;
  return std::max(memory, compute);
}

double headroom(const TargetProfile& t, const MachinePeaks& peaks) {
  HOTKERNEL_CHECK(std::isfinite(t.currentSecondsPerCall) && t.currentSecondsPerCall > 0, "target ", t.op, " ",
                  t.variant, ": currentSecondsPerCall must be > 0, got ", t.currentSecondsPerCall);
  const double roofline = rooflineSeconds(t.bytesPerCall, t.flopsPerCall, peaks);
  return std::clamp(1.0 - roofline / t.currentSecondsPerCall, 0.0, 1.0);
}

double expectedSavingSeconds(const TargetProfile& t, const MachinePeaks& peaks) {
  HOTKERNEL_CHECK(finiteNonNegative(t.gpuSeconds), "target ", t.op, " ", t.variant,
                  ": gpuSeconds must be finite and >= 0, got ", t.gpuSeconds);
  return t.gpuSeconds * headroom(t, peaks);
}

std::vector<double> allocateBudget(const std::vector<double>& savings, double budget, double minimum) {
  HOTKERNEL_CHECK(finiteNonNegative(budget), "budget must be finite and >= 0, got ", budget);
  HOTKERNEL_CHECK(finiteNonNegative(minimum), "minimum must be finite and >= 0, got ", minimum);
  for (size_t i = 0; i < savings.size(); ++i) {
    HOTKERNEL_CHECK(std::isfinite(savings[i]) && savings[i] > 0, "saving ", i, " must be > 0, got ", savings[i]);
    HOTKERNEL_CHECK(i == 0 || savings[i] <= savings[i - 1], "savings must be sorted largest first (index ", i, ")");
  }
  std::vector<double> shares(savings.size(), 0.0);
  if (savings.empty() || budget == 0) return shares;

  // Targets the budget can give the floor to (Note [Budget allocation]); the
  // small tolerance keeps 3 x 10 s out of a 30 s budget from losing one to rounding.
  size_t reached = savings.size();
  if (minimum > 0) {
    reached = std::min(reached, static_cast<size_t>(std::floor(budget / minimum * (1 + 1e-12))));
  }
  if (reached == 0) return shares;

  // Water-filling. Savings are sorted, so the targets raised to the floor are
  // always a suffix of the reached ones: grow that suffix until the
  // proportional shares of the prefix all clear the floor.
  size_t proportional = reached;  // targets [0, proportional) get a proportional share
  while (true) {
    const double floors = minimum * static_cast<double>(reached - proportional);
    const double remaining = budget - floors;
    const double total = std::accumulate(savings.begin(), savings.begin() + proportional, 0.0);
    if (proportional > 0 && remaining * savings[proportional - 1] / total < minimum) {
      --proportional;
      continue;
    }
    for (size_t i = 0; i < proportional; ++i) shares[i] = remaining * savings[i] / total;
    for (size_t i = proportional; i < reached; ++i) shares[i] = minimum;
    break;
  }
  return shares;
}

Ranking rank(const std::vector<TargetProfile>& targets, const MachinePeaks& peaks,
             const std::vector<TargetDecision>& decisions, const std::string& fingerprint,
             const RankingOptions& options) {
  checkOptions(options);
  std::set<std::pair<std::string, std::string>> decided;
  for (const TargetDecision& d : decisions) {
    if (d.fingerprint == fingerprint) decided.emplace(d.op, d.variant);
  }

  Ranking out;
  std::set<std::pair<std::string, std::string>> seen;
  for (const TargetProfile& t : targets) {
    HOTKERNEL_CHECK(seen.emplace(t.op, t.variant).second, "target ", t.op, " ", t.variant, " is listed twice");
    RankedTarget r;
    r.target = t;
    r.rooflineSecondsPerCall = rooflineSeconds(t.bytesPerCall, t.flopsPerCall, peaks);
    r.headroom = headroom(t, peaks);
    r.rooflineFraction = r.rooflineSecondsPerCall / t.currentSecondsPerCall;
    r.expectedSavingSeconds = expectedSavingSeconds(t, peaks);
    if (decided.count({t.op, t.variant})) {
      out.skipped.push_back({t, TargetStop::Decided, r.rooflineSecondsPerCall, r.rooflineFraction});
    } else if (r.rooflineFraction >= options.doneRooflineFraction) {
      out.skipped.push_back({t, TargetStop::NearRoofline, r.rooflineSecondsPerCall, r.rooflineFraction});
    } else if (r.expectedSavingSeconds <= 0) {
      // Not near the roofline, so headroom > 0: the saving is zero because no time was recorded.
      out.skipped.push_back({t, TargetStop::NoGpuTime, r.rooflineSecondsPerCall, r.rooflineFraction});
    } else {
      out.ranked.push_back(std::move(r));
    }
  }

  std::sort(out.ranked.begin(), out.ranked.end(), [](const RankedTarget& a, const RankedTarget& b) {
    return std::make_tuple(-a.expectedSavingSeconds, a.target.op, a.target.variant) <
           std::make_tuple(-b.expectedSavingSeconds, b.target.op, b.target.variant);
  });
  std::vector<double> savings;
  savings.reserve(out.ranked.size());
  for (const RankedTarget& r : out.ranked) savings.push_back(r.expectedSavingSeconds);
  std::vector<double> shares = allocateBudget(savings, options.budgetSeconds, options.minBudgetSeconds);
  for (size_t i = 0; i < out.ranked.size(); ++i) {
    out.ranked[i].budgetSeconds = shares[i];
    out.ranked[i].stop = shares[i] > 0 ? TargetStop::None : TargetStop::NoBudget;
  }
  return out;
}

TargetStop stopRule(const RankedTarget& target, const TargetProgress& progress, const RankingOptions& options) {
  checkOptions(options);
  HOTKERNEL_CHECK(finiteNonNegative(progress.bestSecondsPerCall), "bestSecondsPerCall must be finite and >= 0, got ",
                  progress.bestSecondsPerCall);
  HOTKERNEL_CHECK(finiteNonNegative(progress.spentSeconds), "spentSeconds must be finite and >= 0, got ",
                  progress.spentSeconds);
  if (progress.bestSecondsPerCall > 0 &&
      target.rooflineSecondsPerCall / progress.bestSecondsPerCall >= options.doneRooflineFraction) {
    return TargetStop::NearRoofline;
  }
  if (progress.spentSeconds >= target.budgetSeconds) return TargetStop::BudgetSpent;
  if (progress.roundsWithoutImprovement >= options.maxRoundsWithoutImprovement) return TargetStop::NoImprovement;
  return TargetStop::None;
}

}  // namespace hotkernel
