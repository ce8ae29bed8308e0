#include "HeldEntries.h"

#include "hotkernel/runtime/Logging.h"

namespace hotkernel::engine {
namespace {

bool sameKernel(const cache::Entry& a, const cache::Entry& b) {
  return a.family == b.family && a.kernelName == b.kernelName && a.params == b.params && a.cubin == b.cubin;
}

// How a log line names a held entry.
std::string describe(const HeldEntries::Held& h) {
  const std::string what = h.reason == HoldReason::Agent ? "cached agent kernel" : "kernel from the shared tier";
  return what + " for " + h.entry.op + " " + h.entry.variant;
}

}  // namespace

const char* toString(HoldReason reason) { return reason == HoldReason::Agent ? "agent" : "remote"; }

bool HeldEntries::hold(const cache::Entry& entry, HoldReason reason) {
  std::lock_guard<std::mutex> guard(mu_);
  auto [it, inserted] = slots_.try_emplace(keyOf(entry.op, entry.variant));
  if (!inserted && it->second.state != State::Held) return false;  // checked already in this process
  it->second.held = Held{entry, reason};                              // the newest copy seen
  return inserted;
}

bool HeldEntries::held(const std::string& op, const std::string& variant) const {
  std::lock_guard<std::mutex> guard(mu_);
  auto it = slots_.find(keyOf(op, variant));
  return it != slots_.end() && it->second.state == State::Held;
}

bool HeldEntries::refusedHere(const std::string& op, const std::string& variant) const {
  std::lock_guard<std::mutex> guard(mu_);
  auto it = slots_.find(keyOf(op, variant));
  return it != slots_.end() && it->second.state == State::Refused;
}

bool HeldEntries::isRefusedKernel(const cache::Entry& entry) const {
  std::lock_guard<std::mutex> guard(mu_);
  auto it = slots_.find(keyOf(entry.op, entry.variant));
  return it != slots_.end() && it->second.refused && sameKernel(*it->second.refused, entry);
}

HeldEntries::Step HeldEntries::checkOnce(const std::string& op, const std::string& variant, const Check& check,
                                         const Publish& publish) {
  Held taken;
  {
    std::lock_guard<std::mutex> guard(mu_);
    auto it = slots_.find(keyOf(op, variant));
    if (it == slots_.end() || it->second.state != State::Held || !it->second.held) return Step::None;
    // Checked once, whatever the outcome (an interrupted check included): refused until it passes.
    taken = std::move(*it->second.held);
    it->second.held.reset();
    it->second.state = State::Refused;
    it->second.refused = taken.entry;
  }
  const std::string why = check(taken);
  if (why.empty() && publish(taken)) {
    std::lock_guard<std::mutex> guard(mu_);
    Slot& slot = slots_[keyOf(op, variant)];
    slot.state = State::Published;
    slot.refused.reset();
    HOTKERNEL_LOG(Info) << describe(taken) << " passed its check; serving it";
    return Step::Published;
  }
  HOTKERNEL_LOG(Warn) << describe(taken) << " refused (" << (why.empty() ? "no plan could be made of it" : why)
                      << "); using the ATen kernel";
  return Step::Refused;
}

}  // namespace hotkernel::engine
