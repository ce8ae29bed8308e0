#include "hotkernel/interpose/Engine.h"

#include <ATen/Context.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <c10/cuda/CUDAGraphsC10Utils.h>
#include <torch/headeronly/version.h>

#include <cstdlib>
#include <ctime>
#include <sstream>

#include "EntryAdmission.h"
#include "HeldEntries.h"
#include "RemoteCache.h"
#include "TorchCheck.h"
#include "hotkernel/interpose/Recorder.h"
#include "hotkernel/Config.h"
#include "hotkernel/interpose/FusionEngine.h"
#include "hotkernel/interpose/ServedOps.h"
#include "hotkernel/cache/CacheTiers.h"
#include "hotkernel/kernels/KernelSource.h"
#include "hotkernel/kernels/VariantOptions.h"
#include "hotkernel/optimizer/ExperimentLog.h"
#include "hotkernel/optimizer/ExternalAgent.h"
#include "hotkernel/optimizer/FamilyTuning.h"
#include "hotkernel/optimizer/PlanFactory.h"
#include "hotkernel/optimizer/RankingLog.h"
#include "hotkernel/optimizer/ResultEntry.h"
#include "hotkernel/optimizer/TuneExperiments.h"
#include "hotkernel/runtime/Check.h"
#include "hotkernel/runtime/Hash.h"
#include "hotkernel/runtime/CudaDriver.h"
#include "hotkernel/runtime/ExitGate.h"
#include "hotkernel/runtime/GpuUtilization.h"
#include "hotkernel/runtime/IdleGate.h"
#include "hotkernel/runtime/Logging.h"
#include "hotkernel/runtime/Nvrtc.h"

namespace hotkernel {
namespace {

bool onDeviceUse(int device) { return Engine::instance().ensureDevice(device); }

// One experiment line per candidate the tuner tried (Note: format in ExperimentLog.h).
void logExperiments(const std::string& dir, const std::string& fingerprint, const std::string& op,
                    const std::string& variant, const TuneOutcome& out) {
  ExperimentLog log(dir);
  for (const Experiment& e : tuneExperiments(fingerprint, op, variant, out)) log.append(e);
}

}  // namespace

Engine::Engine() : held_(std::make_unique<engine::HeldEntries>()) {}

Engine& Engine::instance() {
  static Engine* r = new Engine();  // leaked: used by callbacks during exit
  return *r;
}

int Engine::start() {
  std::lock_guard<std::mutex> guard(mu_);
  if (startResult_ != -2) return startResult_;
  const Config& c = config();
  if (!c.enabled) {
    startResult_ = 1;
    return startResult_;
  }
  try {
    // Note [The process's torch]: another torch than the build's, and hotkernel stays off.
    if (const std::string mismatch = processTorchMismatch(); !mismatch.empty()) {
      HOTKERNEL_LOG(Warn) << "hotkernel is off: " << mismatch << "; rebuild it against this torch";
      startResult_ = 1;
      return startResult_;
    }
    for (const std::string& op : c.ops) {
      const auto served = servedOpOf(op);
      if (served) {
        installServedOp(*served, c10::DispatchKey::CUDA, &onDeviceUse);
      } else {
        HOTKERNEL_LOG(Warn) << "HOTKERNEL_OPS: no kernel family serves '" << op << "'; ignored";
      }
    }
    agent();  // a malformed HOTKERNEL_AGENT_CMD / _TIMEOUT is reported now, at start
    worker_ = std::make_unique<OptimizerWorker>([this](const OptimizerJob& job) { optimize(job); });
    installRanker();  // Note [Ranked queue]
    if (c.fusion) startFusion();  // after the served ops: their trampolines are the fused ops' originals
    Recorder::instance().start(c.samplingProb, c.hotCalls,
                               [this](const std::string& op, const VariantKey& key) { onHot(op, key); });
    installExitHandlers();  // Note [Ordered exit], Note [Fork] (EngineExit.cpp)
    startResult_ = 0;
    HOTKERNEL_LOG(Info) << "hotkernel " << HOTKERNEL_VERSION << " active; cache " << c.cacheDir;
  } catch (const std::exception& e) {
    HOTKERNEL_LOG(Warn) << "hotkernel failed to start; every op runs its ATen kernel: " << e.what();
    startResult_ = -1;
  }
  return startResult_;
}

Fingerprint Engine::fingerprintFor(int device) const {
  const DeviceInfo info = queryDevice(device);
  Fingerprint f;
  f.gpuName = info.name;
  f.computeCapability = std::to_string(info.ccMajor) + "." + std::to_string(info.ccMinor);
  f.driverVersion = info.driverVersion;
  f.nvrtcVersion = nvrtcAvailable() ? nvrtcVersion() : 0;
  f.torchVersion = std::string(TORCH_VERSION) + "+cudart" +
                   std::to_string(at::detail::getCUDAHooks().versionCUDART());
  f.hotkernelVersion = HOTKERNEL_VERSION;
  std::string sources;
  for (const kernels::KernelSource& k : kernels::allKernelSources()) sources += k.sha256();
  f.kernelSources = sha256Hex(sources);
  return f;
}

bool Engine::ensureDevice(int device) noexcept {
  armExitHook();  // a CUDA op of this process ran: CUDA is initialized
  try {
    {
      std::lock_guard<std::mutex> guard(mu_);
      if (devicesLoaded_.count(device)) return true;
    }
    // Never load modules while the caller's stream captures a graph.
    if (c10::cuda::currentStreamCaptureStatusMayInitCtx() != c10::cuda::CaptureStatus::None) return false;
    loadDevice(device);
  } catch (const std::exception& e) {
    HOTKERNEL_LOG_ONCE(Warn, "ensure-device") << "cannot use cached kernels; using ATen kernels: " << e.what();
  } catch (...) {
    HOTKERNEL_LOG_ONCE(Warn, "ensure-device") << "cannot use cached kernels (unknown error); using ATen kernels";
  }
  return true;
}

void Engine::loadDevice(int device) {
  std::lock_guard<std::mutex> loading(loadMu_);
  {
    std::lock_guard<std::mutex> guard(mu_);
    if (devicesLoaded_.count(device)) return;
  }
  // One attempt per device, even if it fails: the hot path must not retry forever.
  struct MarkLoaded {
    Engine* r;
    int device;
    ~MarkLoaded() {
      std::lock_guard<std::mutex> guard(r->mu_);
      r->devicesLoaded_.insert(device);
    }
  } mark{this, device};
  Fingerprint f = fingerprintFor(device);
  fingerprints_.set(device, f);  // Note [A fingerprint per device]
  std::unique_ptr<cache::CacheStore> store;
  bool openCache = false;
  {
    std::lock_guard<std::mutex> guard(mu_);
    // Note [Fork]: a forked child opens no cache (and uses no inherited one).
    openCache = !cacheTried_ && !forkedChild_.load();
    cacheTried_ = true;
  }
  if (openCache) {
    try {
      store = cache::CacheStore::open(config().cacheDir);
    } catch (const std::exception& e) {
      HOTKERNEL_LOG(Warn) << "kernel cache refused (" << e.what() << "); running without a persistent cache";
    }
    std::vector<std::unique_ptr<cache::CacheStore>> tiers = cache::openReadOnlyTiers(config().cachePath);
    std::unique_ptr<engine::RemoteCache> remote = engine::RemoteCache::fromConfig(config().cacheDir);
    std::lock_guard<std::mutex> guard(mu_);
    cache_ = std::move(store);
    readTiers_ = std::move(tiers);
    remote_ = std::move(remote);
  }
  // Note [The shared tier in a serving process]: the poller learns of this fingerprint's remote entries.
  if (remote_ && !forkedChild_.load()) watchRemote(f.key());
  if ((!cache_ && readTiers_.empty()) || forkedChild_.load()) return;
  // Note [Cache tiers]: the own cache's entry of a variant first, then HOTKERNEL_CACHE_PATH's.
  std::vector<cache::Entry> entries = cache::entriesOverTiers(cache_.get(), readTiers_, f.key());
  int loaded = 0;
  for (const cache::Entry& e : entries) {
    if (publishEntry(e, device)) ++loaded;
  }
  HOTKERNEL_LOG(Info) << "device " << device << " (" << f.gpuName << "): " << loaded
                      << " cached kernel(s) loaded for fingerprint " << f.key();
}

// Precondition: mu_ NOT held.
bool Engine::publishEntry(const cache::Entry& e, int device, EntryOrigin origin) {
  const auto served = servedOpOf(e.op);
  if (!served) return false;
  // Note [Entries a process loads]: a refused entry leaves its variant undecided, so the optimizer may tune it
  // again and replace the entry.
  if (e.decision == "kernel") {
    if (const std::string why = engine::entryRefusal(e.family, served->family, config().trustAgentEntries);
        !why.empty()) {
      HOTKERNEL_LOG_ONCE(Warn, "refused-entry:" + e.op + ":" + e.variant)
          << "cached kernel for " << e.op << " " << e.variant << " refused (" << why << "); using the ATen kernel";
      return false;
    }
    // Note [Held entries]: an agent kernel, or any kernel of the shared tier, is checked by the optimizer
    // thread first; ATen until then.
    if (origin == EntryOrigin::Remote || (origin == EntryOrigin::Cache && engine::checkedBeforePublishing(e.family))) {
      holdEntry(e, device, origin);
      return false;
    }
  }
  {
    std::lock_guard<std::mutex> guard(mu_);
    decisions_.insert(decisionKey(e.op, e.variant));
  }
  if (e.decision != "kernel") return false;
  try {
    // The variant string carries the norm ops' weight / bias flags: the plan
    // lands under the key their trampolines look up.
    std::optional<VariantKey> key = kernels::parseVariantString(e.variant, device);
    HOTKERNEL_CHECK(key.has_value(), "malformed variant '", e.variant, "'");
    plansOf(*served).publish(
        makePlan(e.family, *key, nlohmann::json::parse(e.params), e.kernelName, e.cubin, device));
    return true;
  } catch (const std::exception& ex) {
    HOTKERNEL_LOG_ONCE(Warn, "bad-entry:" + e.variant)
        << "cached kernel for " << e.op << " " << e.variant << " refused (" << ex.what()
        << "); using the ATen kernel";
    return false;
  }
}

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

// Precondition: mu_ held.
bool Engine::hasDecisionLocked(const std::string& op, const std::string& variant) const {
  return decisions_.count(decisionKey(op, variant)) > 0;
}

// Precondition: mu_ held.
void Engine::addDecisionLocked(const std::string& op, const std::string& variant) {
  decisions_.insert(decisionKey(op, variant));
}

std::set<std::string> Engine::decisions() const {
  std::lock_guard<std::mutex> guard(mu_);
  return decisions_;
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

nlohmann::json Engine::status() const {
  nlohmann::json plans = nlohmann::json::array();
  uint64_t hits = 0, misses = 0;
  for (const ServedOp& op : servedOps()) {
    for (const Plan* p : plansOf(op).load()->all()) {
      plans.push_back({{"op", op.name}, {"variant", kernels::variantString(p->key)},
                       {"device", p->key.device}, {"kernel", p->description}});
    }
    hits += hitsOf(op);
    misses += missesOf(op);
  }
  nlohmann::json fingerprints = nlohmann::json::object();
  std::string firstFingerprint;
  for (const auto& [device, key] : fingerprints_.keys()) {
    fingerprints[std::to_string(device)] = key;
    if (firstFingerprint.empty()) firstFingerprint = key;
  }
  nlohmann::json optimizer = {{"running", false}, {"queued", 0}, {"done", 0}, {"failed", 0}};
  if (worker_ && !forkedChild_.load()) {
    optimizer = {{"running", worker_->jobRunning()},
                 {"queued", worker_->jobsQueued()},
                 {"done", worker_->jobsDone()},
                 {"failed", worker_->jobsFailed()}};
  }
  std::lock_guard<std::mutex> guard(mu_);
  return {{"started", startResult_ == 0},
          {"enabled", servedOpsEnabled()},
          {"fingerprint", firstFingerprint},  // the lowest device's
          {"fingerprints", fingerprints},     // by device
          {"optimizer", optimizer},
          {"forkedChild", forkedChild_.load()},
          {"cache", cache_ ? cache_->databasePath() : std::string()},
          {"plans", plans},
          {"hits", hits},
          {"misses", misses},
          {"tuned", tuneLog_},
          {"profile", Recorder::instance().profile()},
          {"fusion", fusionStatus()}};
}

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
