#include "hotkernel/optimizer/QueueRanker.h"

#include <algorithm>
#include <cmath>
#include <tuple>
#include <utility>

#include "hotkernel/kernels/VariantOptions.h"
#include "hotkernel/optimizer/TargetCost.h"
#include "hotkernel/runtime/Check.h"
#include "hotkernel/runtime/Logging.h"

namespace hotkernel {

QueueRanker::QueueRanker(TargetMeasurer& measurer, RankingOptions options, QueueRankerHooks hooks)
    : measurer_(measurer), options_(std::move(options)), hooks_(std::move(hooks)) {
  HOTKERNEL_CHECK(static_cast<bool>(hooks_.estimatedCalls), "QueueRanker needs hooks.estimatedCalls");
  // Validates the options once (rank() of nothing checks them).
  (void)hotkernel::rank({}, MachinePeaks{1, 0}, {}, "", options_);
  HOTKERNEL_CHECK(options_.budgetSeconds >= options_.minBudgetSeconds, "the budget (", options_.budgetSeconds,
                  " s) must cover at least one target's floor (", options_.minBudgetSeconds, " s)");
}

std::optional<MachinePeaks> QueueRanker::peaksFor(int device) {
  auto it = peaks_.find(device);
  if (it != peaks_.end()) return it->second;
  std::optional<MachinePeaks> peaks;
  try {
    peaks = measurer_.measurePeaks(device);
    HOTKERNEL_CHECK(std::isfinite(peaks->copyBytesPerSecond) && peaks->copyBytesPerSecond > 0,
                    "measured copy bandwidth ", peaks->copyBytesPerSecond, " is not > 0");
    HOTKERNEL_LOG(Info) << "device " << device << ": measured copy bandwidth "
                        << peaks->copyBytesPerSecond / 1e9 << " GB/s";
  } catch (const std::exception& e) {
    peaks.reset();
    HOTKERNEL_LOG(Warn) << "cannot measure the peaks of device " << device
                        << "; its optimizer queue is not ranked (arrival order): " << e.what();
  }
  peaks_[device] = peaks;
  return peaks;
}

std::optional<double> QueueRanker::secondsPerCall(const OptimizerJob& job) {
  const std::string id = jobId(job);
  auto it = seconds_.find(id);
  if (it != seconds_.end()) return it->second;
  std::optional<double> seconds;
  try {
    seconds = measurer_.measureSecondsPerCall(job.op, job.key);
    HOTKERNEL_CHECK(std::isfinite(*seconds) && *seconds > 0, "measured time ", *seconds, " s is not > 0");
  } catch (const std::exception& e) {
    seconds.reset();
    HOTKERNEL_LOG(Info) << "cannot time " << job.op << " " << kernels::variantString(job.key)
                        << "; it is served after the ranked targets: " << e.what();
  }
  seconds_[id] = seconds;
  return seconds;
}

QueueRanking QueueRanker::rank(const std::vector<OptimizerJob>& queued, std::optional<double> budgetSeconds) {
  QueueRanking out;
  if (queued.empty()) return out;
  const double budget = budgetSeconds.value_or(options_.budgetSeconds);
  HOTKERNEL_CHECK(std::isfinite(budget) && budget >= 0, "budget must be finite and >= 0, got ", budget);
  // A pass with less than the floor left gives it all to the top target.
  const double floor = std::min(options_.minBudgetSeconds, budget);

  // Rank per device (each has its own peaks), then merge by expected saving.
  std::map<int, std::vector<size_t>> byDevice;
  for (size_t i = 0; i < queued.size(); ++i) byDevice[queued[i].key.device].push_back(i);
  struct Placed {
    RankedTarget target;
    size_t job;
  };
  std::vector<Placed> ranked;
  std::vector<std::pair<SkippedTarget, size_t>> skipped;
  std::vector<bool> measured(queued.size(), false);
  for (const auto& [device, jobs] : byDevice) {
    const std::optional<MachinePeaks> peaks = peaksFor(device);
    if (!out.peaks && peaks) out.peaks = peaks;
    if (!peaks) continue;
    std::vector<TargetProfile> profiles;
    std::map<std::pair<std::string, std::string>, size_t> jobOf;
    for (size_t i : jobs) {
      const OptimizerJob& job = queued[i];
      if (hooks_.decided && hooks_.decided(job)) {
        // Note [Decided targets]: dropped before anything is measured.
        SkippedTarget s;
        s.target.op = job.op;
        s.target.variant = kernels::variantString(job.key);
        s.reason = TargetStop::Decided;
        skipped.emplace_back(std::move(s), i);
        continue;
      }
      const std::optional<CallCost> cost = callCost(job.op, job.key);
      if (!cost) {
        HOTKERNEL_LOG_ONCE(Info, "no-cost-model:" + job.op) << "no cost model for " << job.op
                                                             << "; its targets are not ranked";
        continue;
      }
      const std::optional<double> seconds = secondsPerCall(job);
      if (!seconds) continue;
      TargetProfile p;
      p.op = job.op;
      p.variant = kernels::variantString(job.key);
      const double calls = hooks_.estimatedCalls(job);
      p.gpuSeconds = std::isfinite(calls) && calls > 0 ? calls * *seconds : 0.0;
      p.bytesPerCall = cost->bytes;
      p.flopsPerCall = cost->flops;
      p.currentSecondsPerCall = *seconds;
      if (!jobOf.emplace(std::make_pair(p.op, p.variant), i).second) continue;  // same variant twice: once
      measured[i] = true;
      profiles.push_back(std::move(p));
    }
    RankingOptions noBudget = options_;
    noBudget.budgetSeconds = 0;  // shares are split over every device's targets below
    Ranking r = hotkernel::rank(profiles, *peaks, {}, "", noBudget);
    for (RankedTarget& t : r.ranked) {
      const size_t job = jobOf.at({t.target.op, t.target.variant});
      ranked.push_back({std::move(t), job});
    }
    for (SkippedTarget& s : r.skipped) {
      const size_t job = jobOf.at({s.target.op, s.target.variant});
      skipped.emplace_back(std::move(s), job);
    }
  }

  std::stable_sort(ranked.begin(), ranked.end(), [&](const Placed& a, const Placed& b) {
    return std::make_tuple(-a.target.expectedSavingSeconds, a.target.target.op, a.target.target.variant,
                           queued[a.job].key.device) <
           std::make_tuple(-b.target.expectedSavingSeconds, b.target.target.op, b.target.target.variant,
                           queued[b.job].key.device);
  });
  std::vector<double> savings;
  for (const Placed& p : ranked) savings.push_back(p.target.expectedSavingSeconds);
  const std::vector<double> shares = allocateBudget(savings, budget, floor);
  for (size_t i = 0; i < ranked.size(); ++i) {
    OptimizerJob job = queued[ranked[i].job];
    job.target = ranked[i].target;
    job.target->budgetSeconds = shares[i];
    job.target->stop = shares[i] > 0 ? TargetStop::None : TargetStop::NoBudget;
    out.order.queue.push_back(std::move(job));
  }
  std::vector<bool> dropped(queued.size(), false);
  for (auto& [s, i] : skipped) {
    dropped[i] = true;
    OptimizerJob job = queued[i];
    job.target.reset();
    if (hooks_.onSkipped) hooks_.onSkipped(job, s);
    out.order.dropped.push_back(job);
    out.skipped.push_back(std::move(s));
  }
  for (size_t i = 0; i < queued.size(); ++i) {
    if (measured[i] || dropped[i]) continue;
    OptimizerJob job = queued[i];
    job.target.reset();
    out.unmeasured.push_back(job);
    out.order.queue.push_back(std::move(job));
  }
  return out;
}

}  // namespace hotkernel
