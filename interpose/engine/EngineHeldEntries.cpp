// The engine's side of Note [Held entries] (HeldEntries.h): an admitted agent
// kernel of the cache (Note [Agent entries are checked again at load]) or any
// kernel of the shared tier (Note [Cached kernels checked before first use])
// is held, not published; the optimizer thread checks it once and publishes
// it, or refuses it for this process. Kept out of Engine.cpp.

#include <ATen/cuda/CUDAContext.h>

#include "EntryAdmission.h"
#include "HeldEntries.h"
#include "hotkernel/interpose/Engine.h"
#include "hotkernel/interpose/ServedOps.h"
#include "hotkernel/kernels/VariantOptions.h"
#include "hotkernel/optimizer/AgentEntryCheck.h"
#include "hotkernel/optimizer/CachedKernelCheck.h"
#include "hotkernel/runtime/Logging.h"

namespace hotkernel {

int64_t Engine::optimizerMemoryCap(int device) {
  return config().optimizerMemoryMb > 0
             ? config().optimizerMemoryMb << 20
             : static_cast<int64_t>(at::cuda::getDeviceProperties(device)->totalGlobalMem / 4);
}

// Precondition: mu_ NOT held. Called from publishEntry (a serving thread's first CUDA call, or the optimizer's).
void Engine::holdEntry(const cache::Entry& e, int device, EntryOrigin origin) {
  const engine::HoldReason reason = origin == EntryOrigin::Remote ? engine::HoldReason::Remote : engine::HoldReason::Agent;
  const bool fresh = held_->hold(e, reason);
  // A shared tier's entry is checked at once by the optimizer thread that admitted it (admitRemoteEntry).
  if (!fresh || origin != EntryOrigin::Cache || !worker_ || forkedChild_.load()) return;
  const std::optional<VariantKey> key = kernels::parseVariantString(e.variant, device);
  if (key && worker_->enqueue(OptimizerJob{e.op, *key})) {
    HOTKERNEL_LOG(Info) << "cached agent kernel for " << e.op << " " << e.variant
                        << " held for its check on the optimizer thread; the ATen kernel until it passes";
  }
}

bool Engine::entryHeld(const std::string& op, const std::string& variant) const { return held_->held(op, variant); }

bool Engine::entryRefusedHere(const std::string& op, const std::string& variant) const {
  return held_->refusedHere(op, variant);
}

// On the optimizer thread, with the unit lock (Engine::optimize); mu_ NOT held.
Engine::HeldEntryStep Engine::checkHeldEntry(const std::string& op, const VariantKey& key,
                                             const std::function<bool()>& yieldPoint) {
  const std::string variant = kernels::variantString(key);
  const ServedOp* served = servedOpOf(op);
  auto check = [&](const engine::HeldEntries::Held& h) -> std::string {
    const cache::Entry& e = h.entry;
    if (e.family == engine::kAgentFamily) return checkAgentEntry({e.cubin, e.kernelName, e.params}, key, yieldPoint);
    if (served == nullptr) return "no kernel family serves " + op;
    TunerOptions options;
    options.yieldPoint = yieldPoint;
    options.memoryCapBytes = optimizerMemoryCap(key.device);
    return checkCachedKernel(served->family, key, e.params, e.cubin, options);
  };
  auto publish = [&](const engine::HeldEntries::Held& h) {
    if (!publishEntry(h.entry, key.device, EntryOrigin::Checked)) return false;
    if (h.reason == engine::HoldReason::Remote && cache_ && !forkedChild_.load()) {
      try {
        cache_->put(h.entry);  // the local copy, signed with this host's key: later processes load it unchecked
      } catch (const std::exception& ex) {
        HOTKERNEL_LOG(Warn) << "cannot store the shared tier's entry for " << variant << " in the cache: " << ex.what();
      }
    }
    return true;
  };
  switch (held_->checkOnce(op, variant, check, publish)) {
    case engine::HeldEntries::Step::Published:
      return HeldEntryStep::Published;
    case engine::HeldEntries::Step::Refused:
      return HeldEntryStep::Refused;
    case engine::HeldEntries::Step::None:
      break;
  }
  return HeldEntryStep::None;
}

}  // namespace hotkernel
