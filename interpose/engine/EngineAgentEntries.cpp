// The engine's side of Note [Agent entries are checked again at load]
// (optimizer/agent/include/hotkernel/optimizer/AgentEntryCheck.h): an admitted
// agent entry is held, not published; the optimizer thread checks it once and
// publishes it, or refuses it for this process. Kept out of Engine.cpp.

#include "hotkernel/interpose/Engine.h"
#include "hotkernel/kernels/VariantOptions.h"
#include "hotkernel/optimizer/AgentEntryCheck.h"
#include "hotkernel/runtime/Logging.h"

namespace hotkernel {

// Precondition: mu_ NOT held. Called from publishEntry (a serving thread's first CUDA call, or the optimizer's).
void Engine::holdAgentEntry(const cache::Entry& e, int device) {
  bool fresh = false;
  {
    std::lock_guard<std::mutex> guard(mu_);
    auto [it, inserted] = agentEntriesToCheck_.emplace(decisionKey(e.op, e.variant), e);
    if (!inserted && !it->second) return;  // checked already in this process
    it->second = e;                       // the newest copy seen (the cache may have been rewritten)
    fresh = inserted;
  }
  if (!fresh || !worker_ || forkedChild_.load()) return;
  const std::optional<VariantKey> key = kernels::parseVariantString(e.variant, device);
  if (key && worker_->enqueue(OptimizerJob{e.op, *key})) {
    HOTKERNEL_LOG(Info) << "cached agent kernel for " << e.op << " " << e.variant
                        << " held for its check on the optimizer thread; the ATen kernel until it passes";
  }
}

bool Engine::agentEntryHeld(const std::string& op, const std::string& variant) const {
  std::lock_guard<std::mutex> guard(mu_);
  auto it = agentEntriesToCheck_.find(decisionKey(op, variant));
  return it != agentEntriesToCheck_.end() && it->second.has_value();
}

bool Engine::agentEntryRefusedHere(const std::string& op, const std::string& variant) const {
  std::lock_guard<std::mutex> guard(mu_);
  auto it = agentEntriesToCheck_.find(decisionKey(op, variant));
  return it != agentEntriesToCheck_.end() && !it->second && !decisions_.count(decisionKey(op, variant));
}

// On the optimizer thread, with the unit lock (Engine::optimize); mu_ NOT held.
Engine::AgentEntryStep Engine::checkHeldAgentEntry(const std::string& op, const VariantKey& key,
                                                   const std::function<bool()>& yieldPoint) {
  const std::string variant = kernels::variantString(key);
  std::optional<cache::Entry> entry;
  {
    std::lock_guard<std::mutex> guard(mu_);
    auto it = agentEntriesToCheck_.find(decisionKey(op, variant));
    if (it == agentEntriesToCheck_.end() || !it->second) return AgentEntryStep::None;
    entry.swap(it->second);  // checked once, whatever the outcome (an interrupted check included)
  }
  const std::string why = checkAgentEntry({entry->cubin, entry->kernelName, entry->params}, key, yieldPoint);
  if (why.empty() && publishEntry(*entry, key.device, /*agentChecked=*/true)) {
    HOTKERNEL_LOG(Info) << "cached agent kernel for " << op << " " << variant << " passed its check; serving it";
    return AgentEntryStep::Published;
  }
  HOTKERNEL_LOG(Warn) << "cached agent kernel for " << op << " " << variant << " refused ("
                      << (why.empty() ? "no plan could be made of it" : why) << "); using the ATen kernel";
  return AgentEntryStep::Refused;
}

}  // namespace hotkernel
