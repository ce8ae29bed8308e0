// The optimize job of a hot variant: the recorder's callback queues it
// (Note [Only served ops are tuned]), the optimizer thread waits for an idle
// GPU, then optimizeVariant looks in the own cache, a held entry and the
// shared tier before it tunes, and publishes and stores the decision. Also
// the external agent the tuner asks. Kept out of Engine.cpp.

#include <c10/cuda/CUDAGraphsC10Utils.h>
#include <cuda_runtime_api.h>

#include "HeldEntries.h"
#include "RemoteCache.h"
#include "hotkernel/interpose/Engine.h"
#include "hotkernel/interpose/FusionBypass.h"
#include "hotkernel/interpose/ServedOps.h"
#include "hotkernel/kernels/VariantOptions.h"
#include "hotkernel/optimizer/ExperimentLog.h"
#include "hotkernel/optimizer/ExternalAgent.h"
#include "hotkernel/optimizer/FamilyTuning.h"
#include "hotkernel/optimizer/PlanFactory.h"
#include "hotkernel/optimizer/ResultEntry.h"
#include "hotkernel/optimizer/TuneExperiments.h"
#include "hotkernel/runtime/Check.h"
#include "hotkernel/runtime/ExitGate.h"
#include "hotkernel/runtime/GpuUtilization.h"
#include "hotkernel/runtime/IdleGate.h"
#include "hotkernel/runtime/Logging.h"

namespace hotkernel {
namespace {

// One experiment line per candidate the tuner tried (Note: format in ExperimentLog.h).
void logExperiments(const std::string& dir, const std::string& fingerprint, const std::string& op,
                    const std::string& variant, const TuneOutcome& out) {
  ExperimentLog log(dir);
  for (const Experiment& e : tuneExperiments(fingerprint, op, variant, out)) log.append(e);
}

}  // namespace

void Engine::onHot(const std::string& op, const VariantKey& key) {
  if (key.device < 0) {
    HOTKERNEL_LOG_ONCE(Info, "needs-cuda") << op << " is hot on the CPU; optimization needs a CUDA device";
    return;
  }
  armExitHook();  // a CUDA variant is hot: CUDA is initialized
  // Note [Fork]: no optimizer in a forked child; none once the process exits.
  if (!config().optimize || !worker_ || forkedChild_.load() || ExitGate::process().exiting()) return;
  // Note [Only served ops are tuned]
  // The recorder sees every op it knows, served or not (sum & co run
  // everywhere): a hot variant of an op whose CUDA trampoline is not
  // installed (not in HOTKERNEL_OPS) would be tuned for a plan nothing reads.
  // hotkernel warmup still tunes what a profile names (Engine::optimizeVariant).
  const ServedOp* served = servedOpOf(op);
  if (!served || !servedOpInstalled(*served, c10::DispatchKey::CUDA)) {
    HOTKERNEL_LOG_ONCE(Info, "not-served:" + op)
        << op << " is hot but not served (not in HOTKERNEL_OPS); not optimized";
    return;
  }
  {
    std::lock_guard<std::mutex> guard(mu_);
    if (decisions_.count(decisionKey(op, kernels::variantString(key)))) return;
  }
  if (worker_->enqueue(OptimizerJob{op, key})) {
    HOTKERNEL_LOG(Info) << "queued " << op << " " << kernels::variantString(key) << " for optimization";
  }
}

bool Engine::waitToStart(int device) {
  ExitGate::process().parkIfExiting();  // Note [Ordered exit]
  IdleGate& gate = IdleGate::instance();
  const int maxUtil = config().idleMaxUtil;
  if (maxUtil >= 0 && device >= 0) {
    auto it = utilization_.find(device);
    if (it == utilization_.end()) {
      std::shared_ptr<GpuUtilization> source;
      char busId[64] = {0};
      std::string why;
      // A query, but never one that could disturb another thread's capture.
      c10::cuda::CUDAStreamCaptureModeGuard relaxed(cudaStreamCaptureModeRelaxed);
      const cudaError_t rc = cudaDeviceGetPCIBusId(busId, sizeof busId, device);
      if (rc != cudaSuccess) {
        (void)cudaGetLastError();
        why = std::string("cudaDeviceGetPCIBusId failed: ") + cudaGetErrorString(rc);
      } else {
        source = openNvmlUtilization(busId, &why);
      }
      if (!source) {
        HOTKERNEL_LOG_ONCE(Warn, "nvml-open") << "HOTKERNEL_IDLE_MAX_UTIL is set but the GPU utilization cannot be "
                                              << "read (" << why << "); the idle gate uses the dispatch signal alone";
      }
      it = utilization_.emplace(device, std::move(source)).first;
    }
    gate.setUtilizationLimit(it->second, maxUtil);
  }
  const bool idle = gate.waitUntilIdle(
      static_cast<double>(config().idleMs),
      [this] { return stopping_.load() || ExitGate::process().exiting(); }, 24 * 3600.0, /*starting=*/true);
  ExitGate::process().parkIfExiting();
  return idle;
}

void Engine::optimize(const OptimizerJob& job) {
  IdleGate::ScopedOptimizerThread optimizerThread;
  fusion::FusionBypass own;  // the optimizer's ATen work and CUDA commands flush and learn nothing
  // No GPU work (device start, cache loads, the tuner) while serving, capturing or over the utilization limit.
  if (!waitToStart(job.key.device)) return;
  {
    UnitHold unit(*this);  // Note [Fork]
    try {
      if (!job.chain.empty()) {
        optimizeChain(job);
        return;
      }
      optimizeVariant(job.op, job.key, [this] { return yieldToServing(); }, job.target);
    } catch (const std::exception& e) {
      // Shutting down: the tuner stopped at a yield point ("tuning interrupted",
      // Note [Interrupted tuning] in optimizer/search/FamilyTuner.cpp) and stored
      // nothing; a later process tunes the variant again. Not a failure.
      if (!stopping_.load()) throw;
      HOTKERNEL_LOG(Info) << "optimizing " << job.op << " " << kernels::variantString(job.key)
                          << " stopped: the process is shutting down (" << e.what() << "); nothing stored";
    }
  }
  if (remote_ && !forkedChild_.load()) runDeferredRemoteJobs();  // Note [Variants leased elsewhere]
}

nlohmann::json Engine::optimizeVariant(const std::string& op, const VariantKey& key,
                                        const std::function<bool()>& yieldPoint,
                                        const std::optional<RankedTarget>& target) {
  ensureDevice(key.device);
  const std::string variant = kernels::variantString(key);
  nlohmann::json summary = {{"op", op}, {"variant", variant}};
  {
    std::lock_guard<std::mutex> guard(mu_);
    if (decisions_.count(decisionKey(op, variant))) {
      summary["decision"] = "cached";
      return summary;
    }
  }
  // The device's fingerprint (Note [A fingerprint per device]): set by
  // ensureDevice() above unless the device could not be queried.
  const std::optional<Fingerprint> fingerprint = fingerprints_.of(key.device);
  HOTKERNEL_CHECK(fingerprint.has_value(), "device ", key.device, " has no fingerprint (it could not be queried)");
  const std::string fingerprintKey = fingerprint->key();
  const bool useCache = cache_ && !forkedChild_.load();
  // Note [Held entries]: a held entry is checked here; a refused one tuned over.
  bool heldEntryRefused = entryRefusedHere(op, variant);
  // Another process may have filled the cache since we started (not with the kernel refused here).
  if (useCache) {
    if (auto e = cache_->get(fingerprintKey, op, variant); e && !held_->isRefusedKernel(*e)) {
      if (publishEntry(*e, key.device) || !entryHeld(op, variant)) {
        summary["decision"] = "cached";
        return summary;
      }
    }
  }
  if (const HeldEntryStep step = checkHeldEntry(op, key, yieldPoint); step == HeldEntryStep::Published) {
    summary["decision"] = "cached";
    return summary;
  } else if (step == HeldEntryStep::Refused) {
    heldEntryRefused = true;
  }
  if (heldEntryRefused && !config().optimize) {
    summary["decision"] = "aten";  // HOTKERNEL_OPTIMIZE=0: nothing is tuned to replace the refused entry
    return summary;
  }
  // Note [The shared tier in a serving process]: then the shared tier, and its lease before tuning.
  engine::RemoteCache* remote = forkedChild_.load() ? nullptr : remote_.get();
  std::optional<cache::RemoteLease> lease;
  if (remote) {
    // Note [Held entries]: a kernel refused here is passed over, the lease taken (refused twice: none).
    const auto refusedHere = [this](const cache::Entry& e) { return held_->isRefusedKernel(e); };
    engine::RemoteCache::Step step = remote->beforeTuning(fingerprintKey, OptimizerJob{op, key}, refusedHere);
    for (int lookup = 0; step.entry && lookup < 2; ++lookup) {
      if (admitRemoteEntry(*step.entry, key, yieldPoint)) {
        summary["decision"] = "remote";
        return summary;
      }
      step = remote->beforeTuning(fingerprintKey, OptimizerJob{op, key}, refusedHere);
    }
    if (step.leasedElsewhere) {
      summary["decision"] = "leased";  // Note [Variants leased elsewhere]: ATen until it is published
      return summary;
    }
    if (!config().optimize) {
      if (step.lease) remote->finishTuning(step.lease, nullptr);
      summary["decision"] = "aten";  // HOTKERNEL_OPTIMIZE=0: the shared tier's entries only, no tuning here
      return summary;
    }
    lease = step.lease;
  }
  // Releases the lease however tuning ends (a decision below publishes first).
  struct LeaseRelease {
    engine::RemoteCache* remote;
    std::optional<cache::RemoteLease>& lease;
    ~LeaseRelease() {
      if (remote && lease) remote->finishTuning(lease, nullptr);
    }
  } leaseRelease{remote, lease};
  const ServedOp* served = servedOpOf(op);
  HOTKERNEL_CHECK(served != nullptr, "no kernel family serves ", op);
  TunerOptions options;
  // Note [Stopping a target's search]: the target's budget, waits for idle GPU time not charged.
  TargetClock clock(target ? TargetBudget::from(*target, rankingOptions()) : TargetBudget{});
  options.clock = &clock;
  options.yieldPoint = clock.wrapYield(yieldPoint);
  options.memoryCapBytes = optimizerMemoryCap(key.device);
  // HOTKERNEL_AGENT_CMD: an external agent proposes more candidates (tools/agent/PROTOCOL.md).
  options.agent = agent();
  TuneOutcome out = tuneVariant(served->family, key, options);
  const cache::Entry entry = resultEntry(fingerprints_, key.device, op, variant, served->family.name, out);
  if (out.accepted) {
    Plan plan = makePlan(out.family, key, out.paramsJson, out.kernelName, out.cubin, key.device);
    const std::string description = plan.description;
    plansOf(*served).publish(std::move(plan));
    HOTKERNEL_LOG(Info) << "swapped in " << op << " " << variant << ": " << description
                        << ", speed-up " << out.metrics.kernel->speedup << "x (95% CI "
                        << out.metrics.kernel->speedupCi.toJson().dump() << "), max abs error "
                        << out.metrics.kernel->maxAbsError;
    summary["speedup"] = out.metrics.kernel->speedup;
  } else {
    HOTKERNEL_LOG(Info) << "keeping the ATen kernel for " << op << " " << variant
                        << ": no candidate was correct and faster";
  }
  logExperiments(config().cacheDir, fingerprintKey, op, variant, out);
  summary["decision"] = entry.decision;
  summary["metrics"] = out.metrics.toJson();
  {
    std::lock_guard<std::mutex> guard(mu_);
    decisions_.insert(decisionKey(op, variant));
    tuneLog_.push_back({{"op", op}, {"variant", variant}, {"decision", entry.decision}, {"metrics", summary["metrics"]}});
  }
  if (useCache) {
    try {
      cache_->put(entry);
    } catch (const std::exception& e) {
      HOTKERNEL_LOG(Warn) << "cannot store the result for " << variant << " in the cache: " << e.what();
    }
  }
  if (remote) {
    remote->finishTuning(lease, &entry);  // publish the decision for the fleet, then release the lease
    lease.reset();
  }
  return summary;
}

bool Engine::waitIdle(double timeoutSeconds) { return worker_ ? worker_->waitIdle(timeoutSeconds) : true; }

const ExternalAgent* Engine::agent() {
  std::call_once(agentOnce_, [this] {
    // Note [A malformed agent configuration] (optimizer/ExternalAgent.h): never throws.
    std::string problem;
    agent_ = ExternalAgent::fromEnvironment(&problem);
    if (!problem.empty()) HOTKERNEL_LOG(Warn) << problem;
  });
  return agent_ ? &*agent_ : nullptr;
}

}  // namespace hotkernel
