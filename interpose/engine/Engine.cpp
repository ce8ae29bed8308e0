// The engine's start (the HOTKERNEL_OPS trampolines, the worker, the
// recorder), a device's fingerprint and its cached entries published as plans
// (Note [Lazy GPU start] in Engine.h), the decisions made, the status. The
// optimize job is in EngineOptimize.cpp.

#include "hotkernel/interpose/Engine.h"

#include <ATen/Context.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <c10/cuda/CUDAGraphsC10Utils.h>
#include <torch/headeronly/version.h>

#include "EntryAdmission.h"
#include "HeldEntries.h"
#include "RemoteCache.h"
#include "StatusDocument.h"
#include "TorchCheck.h"
#include "hotkernel/interpose/Recorder.h"
#include "hotkernel/Config.h"
#include "hotkernel/interpose/ServedOps.h"
#include "hotkernel/cache/CacheTiers.h"
#include "hotkernel/kernels/KernelSource.h"
#include "hotkernel/kernels/VariantOptions.h"
#include "hotkernel/optimizer/PlanFactory.h"
#include "hotkernel/runtime/Check.h"
#include "hotkernel/runtime/Hash.h"
#include "hotkernel/runtime/CudaDriver.h"
#include "hotkernel/runtime/Logging.h"
#include "hotkernel/runtime/Nvrtc.h"

namespace hotkernel {
namespace {

bool onDeviceUse(int device) { return Engine::instance().ensureDevice(device); }

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
  // A choice among ATen's own implementations (the attention family) runs no code of the cache: admitted by its
  // family, published without a check of a kernel.
  const bool plan = e.decision == cache::kDecisionKernel || e.decision == cache::kDecisionAtenBackend;
  if (plan) {
    if (const std::string why = engine::entryRefusal(e.family, served->family, config().trustAgentEntries);
        !why.empty()) {
      HOTKERNEL_LOG_ONCE(Warn, "refused-entry:" + e.op + ":" + e.variant)
          << "cached kernel for " << e.op << " " << e.variant << " refused (" << why << "); using the ATen kernel";
      return false;
    }
    // Note [Held entries]: an agent kernel, or any kernel of the shared tier, is checked by the optimizer
    // thread first; ATen until then.
    const bool held = origin == EntryOrigin::Remote ||
                      (origin == EntryOrigin::Cache && engine::checkedBeforePublishing(e.family));
    if (e.decision == cache::kDecisionKernel && held) {
      holdEntry(e, device, origin);
      return false;
    }
  }
  {
    std::lock_guard<std::mutex> guard(mu_);
    decisions_.insert(decisionKey(e.op, e.variant));
  }
  if (!plan) return false;
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

// The status document: Note [Status document, version 2] (StatusDocument.h).
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
  return {{"format", engine::kStatusFormat},
          {"version", engine::kStatusVersion},
          {"started", startResult_ == 0},
          {"enabled", servedOpsEnabled()},
          {"fingerprint", firstFingerprint},  // the lowest device's
          {"fingerprints", fingerprints},     // by device
          {"optimizer", optimizer},
          {"forked_child", forkedChild_.load()},
          {"cache", cache_ ? cache_->databasePath() : std::string()},
          {"plans", plans},
          {"hits", hits},
          {"misses", misses},
          {"tuned", tuneLog_},
          {"profile", Recorder::instance().profile()},
          {"fusion", fusionStatus()}};
}

}  // namespace hotkernel
