#include "hotkernel/optimizer/TargetBudget.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "hotkernel/runtime/Check.h"

namespace hotkernel {

TargetBudget TargetBudget::from(const RankedTarget& target, const RankingOptions& options) {
  TargetBudget b;
  b.budgetSeconds = target.budgetSeconds;
  b.rooflineSecondsPerCall = target.rooflineSecondsPerCall;
  b.doneRooflineFraction = options.doneRooflineFraction;
  b.maxRoundsWithoutImprovement = options.maxRoundsWithoutImprovement;
  return b;
}

TargetStop targetStopOf(SearchStop stop) {
  switch (stop) {
    case SearchStop::GoodEnough:
      return TargetStop::NearRoofline;
    case SearchStop::OutOfTime:
      return TargetStop::BudgetSpent;
    case SearchStop::NoImprovement:
      return TargetStop::NoImprovement;
    case SearchStop::EvaluationBudget:
    case SearchStop::Exhausted:
      return TargetStop::None;  // the search's own limits, not a target stop rule
  }
  return TargetStop::None;
}

double TargetClock::steadyNow() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

TargetClock::TargetClock(TargetBudget budget, Now now) : budget_(budget), now_(std::move(now)), start_(now_()) {
  HOTKERNEL_CHECK(std::isfinite(budget_.budgetSeconds) && budget_.budgetSeconds >= 0,
                  "budgetSeconds must be finite and >= 0, got ", budget_.budgetSeconds);
  HOTKERNEL_CHECK(std::isfinite(budget_.rooflineSecondsPerCall) && budget_.rooflineSecondsPerCall >= 0,
                  "rooflineSecondsPerCall must be finite and >= 0, got ", budget_.rooflineSecondsPerCall);
  HOTKERNEL_CHECK(budget_.doneRooflineFraction > 0 && budget_.doneRooflineFraction <= 1,
                  "doneRooflineFraction must be in (0, 1], got ", budget_.doneRooflineFraction);
  HOTKERNEL_CHECK(budget_.maxRoundsWithoutImprovement >= 0, "maxRoundsWithoutImprovement must be >= 0, got ",
                  budget_.maxRoundsWithoutImprovement);
}

std::function<bool()> TargetClock::wrapYield(std::function<bool()> yieldPoint) {
  if (!yieldPoint) return {};
  return [this, inner = std::move(yieldPoint)] {
    const double t0 = now_();
    const bool go = inner();
    const double waited = std::max(0.0, now_() - t0);
    std::lock_guard<std::mutex> guard(mu_);
    waited_ += waited;
    return go;
  };
}

double TargetClock::waitedSeconds() const {
  std::lock_guard<std::mutex> guard(mu_);
  return waited_;
}

double TargetClock::spentSeconds() const { return std::max(0.0, now_() - start_ - waitedSeconds()); }

bool TargetClock::budgetSpent() const { return budget_.budgetSeconds > 0 && spentSeconds() >= budget_.budgetSeconds; }

double TargetClock::goodEnoughUs() const {
  return budget_.rooflineSecondsPerCall > 0 ? budget_.rooflineSecondsPerCall * 1e6 / budget_.doneRooflineFraction
                                            : 0.0;
}

void TargetClock::applyTo(SearchOptions& options) const {
  options.goodEnoughCost = goodEnoughUs();
  if (budget_.budgetSeconds > 0) options.outOfTime = [this] { return budgetSpent(); };
  if (budget_.maxRoundsWithoutImprovement > 0) options.maxRoundsWithoutImprovement = budget_.maxRoundsWithoutImprovement;
}

TargetStop TargetClock::stop(double bestUs, int roundsWithoutImprovement) const {
  HOTKERNEL_CHECK(std::isfinite(bestUs) && bestUs >= 0, "bestUs must be finite and >= 0, got ", bestUs);
  if (budget_.rooflineSecondsPerCall > 0 && bestUs > 0 && bestUs <= goodEnoughUs()) return TargetStop::NearRoofline;
  if (budgetSpent()) return TargetStop::BudgetSpent;
  if (budget_.maxRoundsWithoutImprovement > 0 && roundsWithoutImprovement >= budget_.maxRoundsWithoutImprovement) {
    return TargetStop::NoImprovement;
  }
  return TargetStop::None;
}

nlohmann::json TargetClock::summary(double bestUs, TargetStop stop) const {
  nlohmann::json j = {{"budgetSeconds", budget_.budgetSeconds},
                      {"spentSeconds", spentSeconds()},
                      {"waitedSeconds", waitedSeconds()},
                      {"stop", toString(stop)}};
  if (budget_.rooflineSecondsPerCall > 0) j["rooflineUs"] = budget_.rooflineSecondsPerCall * 1e6;
  if (bestUs > 0) {
    j["bestUs"] = bestUs;
    if (budget_.rooflineSecondsPerCall > 0) j["rooflineFraction"] = budget_.rooflineSecondsPerCall * 1e6 / bestUs;
  }
  return j;
}

}  // namespace hotkernel
