// The runtime's side of the Amdahl ranking (Note [Amdahl ranking] in
// optimizer/Ranking.h): the background queue's ranker, and what happens to a
// target the ranking drops (Note [Ranking in the experiment log] in
// optimizer/RankingLog.h). Kept out of Engine.cpp; no torch headers here.

#include <utility>

#include "hotkernel/interpose/Recorder.h"
#include "hotkernel/interpose/Engine.h"
#include "hotkernel/interpose/FusionBypass.h"
#include "hotkernel/optimizer/ExperimentLog.h"
#include "hotkernel/optimizer/GpuTargetMeasurer.h"
#include "hotkernel/runtime/IdleGate.h"
#include "hotkernel/kernels/VariantOptions.h"
#include "hotkernel/optimizer/RankingLog.h"
#include "hotkernel/runtime/Logging.h"

namespace hotkernel {

RankingOptions Engine::rankingOptions() {
  // One pass of the background optimizer splits 10 minutes over what is
  // queued (re-split each time a job is picked), at least 30 s per target;
  // stop at 95% of the roofline or after 8 rounds without improvement.
  return RankingOptions{};
}

void Engine::installRanker() {
  GpuMeasurerOptions mo;
  mo.memoryCapBytes = config().optimizerMemoryMb > 0 ? config().optimizerMemoryMb << 20 : 0;
  mo.yieldPoint = [this] { return yieldToServing(); };
  measurer_ = std::make_unique<GpuTargetMeasurer>(std::move(mo));
  ranker_ = makeRanker(*measurer_, [](const OptimizerJob& job) {
    return Recorder::instance().estimatedCalls(job.op, job.key);
  });
  worker_->setRanker([this](const std::vector<OptimizerJob>& queued) {
    // On the worker thread: its GPU work never counts as serving activity, and flushes or learns no chain.
    IdleGate::ScopedOptimizerThread optimizerThread;
    fusion::FusionBypass own;
    // No GPU work while serving, capturing or over the utilization limit; stopping: rank nothing.
    if (!queued.empty() && !waitToStart(queued.front().key.device)) return JobOrder{queued, {}};
    UnitHold unit(*this);  // Note [Fork]
    for (const OptimizerJob& job : queued) ensureDevice(job.key.device);  // fingerprint and cached decisions
    // Chain jobs (Note [Fused chains in a serving process]) have no ATen target to measure: they run
    // first, in arrival order; the ranker orders the ops' variants.
    // Note [Variants fused chains took]: those are released, each logged and rearmed in the recorder.
    JobOrder order = orderServingQueue(
        queued, [this](const std::vector<OptimizerJob>& variants) { return (*ranker_)(variants); },
        [](const OptimizerJob& job) {
          return Recorder::takenByChains(Recorder::instance().callsSinceHot(job.op, job.key));
        });
    for (const OptimizerJob& job : order.released) releaseTakenVariant(job);
    return order;
  });
}

// Note [Variants fused chains took]
// An op variant turns hot on calls that ran (Note [Deferred calls in the
// recorder] in runtime/DeferredCalls.h), and a chain is learned from the
// same calls, so both are queued together; the chain jobs run first. Once
// the chains serve, they take the variant's calls: HF's RMSNorm mean, the
// attention softmax's amax and sum never run alone again, and tuning them
// would spend GPU time the serving process could use on kernels nothing
// calls. When the ranker comes to such a variant (Recorder::takenByChains:
// most of its sampled calls since it turned hot were deferred), the job is
// released instead: it leaves the queue without a decision, and the
// recorder rearms the variant, which turns hot and is queued again once
// hotCalls of its calls run outside chains (a chain refused later, a new
// caller). A variant ranked before the chains serve (no calls in between,
// as when the process compiles something else meanwhile) is tuned as
// before. The rearm happens before the worker forgets the job: a variant
// turning hot again within that instant finds it still queued and is not
// queued again (it keeps ATen's kernel, as any variant never tuned).
void Engine::releaseTakenVariant(const OptimizerJob& job) {
  const Recorder::CallsSinceHot calls = Recorder::instance().rearm(job.op, job.key).value_or(Recorder::CallsSinceHot{});
  HOTKERNEL_LOG(Info) << "not optimizing " << job.op << " " << kernels::variantString(job.key) << " now: "
                      << calls.deferred << " of its " << calls.sampled
                      << " sampled calls since it turned hot ran inside fused chains; queued again if "
                      << config().hotCalls << " of its calls run outside them";
}

std::unique_ptr<QueueRanker> Engine::makeRanker(TargetMeasurer& measurer,
                                                 std::function<double(const OptimizerJob&)> calls) {
  QueueRankerHooks hooks;
  hooks.estimatedCalls = std::move(calls);
  hooks.decided = [this](const OptimizerJob& job) {
    std::lock_guard<std::mutex> guard(mu_);
    return hasDecisionLocked(job.op, kernels::variantString(job.key));
  };
  hooks.onSkipped = [this](const OptimizerJob& job, const SkippedTarget& skipped) { onSkippedTarget(job, skipped); };
  return std::make_unique<QueueRanker>(measurer, rankingOptions(), std::move(hooks));
}

void Engine::onSkippedTarget(const OptimizerJob& job, const SkippedTarget& skipped) {
  if (skipped.reason == TargetStop::Decided) return;  // its entry and log line exist already
  // The device the target was measured on (Note [A fingerprint per device]).
  const std::optional<Fingerprint> f = fingerprints_.of(job.key.device);
  const std::string fingerprint = f ? f->key() : std::string();
  const std::string fingerprintJson = f ? f->canonicalJson() : std::string();
  const Experiment line = skippedTargetExperiment(skipped, fingerprint);
  ExperimentLog(config().cacheDir).append(line);
  HOTKERNEL_LOG(Info) << "not optimizing " << job.op << " " << skipped.target.variant << ": " << line.reason;
  if (skipped.reason != TargetStop::NearRoofline) return;

  // Near the roofline: "keep ATen" is the decision (Note [Ranking in the experiment log]).
  cache::Entry entry;
  entry.fingerprint = fingerprint;
  entry.fingerprintJson = fingerprintJson;
  entry.op = job.op;
  entry.variant = skipped.target.variant;
  entry.decision = "keep_aten";
  entry.params = "{}";
  entry.metrics = nlohmann::json({{"ranking", line.extra["ranking"]}, {"reason", line.reason}}).dump();
  {
    std::lock_guard<std::mutex> guard(mu_);
    addDecisionLocked(job.op, skipped.target.variant);
    tuneLog_.push_back({{"op", job.op},
                        {"variant", skipped.target.variant},
                        {"decision", "keep_aten"},
                        {"reason", line.reason}});
  }
  // cache_ is written once before the device is marked loaded (ensureDevice ran for this job).
  if (cache_ && !fingerprint.empty() && !forkedChild_.load()) {
    try {
      cache_->put(entry);
    } catch (const std::exception& e) {
      HOTKERNEL_LOG(Warn) << "cannot store the keep-ATen decision for " << entry.variant << " in the cache: "
                          << e.what();
    }
  }
}

}  // namespace hotkernel
