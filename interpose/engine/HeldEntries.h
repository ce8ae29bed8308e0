#pragma once
// Entries a process holds back until the optimizer thread checked them once
// (no torch): an agent kernel of the cache (Note [Agent entries are checked
// again at load] in AgentEntryCheck.h) and any kernel of the shared tier
// (Note [Cached kernels checked before first use] in CachedKernelCheck.h).
//
// Note [Held entries]
// An admitted entry that needs a check is held under its (op, variant), not
// published; its variant runs ATen. The optimizer thread takes it once
// (checkOnce): the check passes and the entry is published, or it is
// refused for the rest of the process, whatever stopped the check (an
// interruption included). A refused variant is tuned again like one without
// an entry; the refused kernel itself is remembered (isRefusedKernel), so
// that a lookup finding the same kernel again (in the shared tier, which
// still holds it) passes over it instead of checking it a second time. A
// variant checked once is never held again in this process; the newest copy
// of an entry held but not yet checked replaces the older one.

#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "hotkernel/cache/Entry.h"

namespace hotkernel::engine {

// Why an entry is held.
enum class HoldReason { Agent, Remote };

class HeldEntries {
 public:
  struct Held {
    cache::Entry entry;
    HoldReason reason = HoldReason::Agent;
  };
  enum class Step { None, Published, Refused };
  // "" when the held entry may be published, else why not. May throw (an interrupted check): the entry
  // stays refused and the exception reaches checkOnce's caller.
  using Check = std::function<std::string(const Held&)>;
  // Publishes a checked entry; false when no plan could be made of it.
  using Publish = std::function<bool(const Held&)>;

  // Holds `entry` (kernel entries only) until checkOnce; true when its
  // variant was not held or checked before in this process (the caller
  // queues its job). A variant checked already is left as it is.
  bool hold(const cache::Entry& entry, HoldReason reason);
  // Whether an entry of (op, variant) waits for its check.
  bool held(const std::string& op, const std::string& variant) const;
  // Whether (op, variant)'s held entry was checked and refused (or its check stopped) in this process.
  bool refusedHere(const std::string& op, const std::string& variant) const;
  // Whether `entry` holds the same kernel as the one refused for its (op, variant).
  bool isRefusedKernel(const cache::Entry& entry) const;
  // The held entry of (op, variant), checked once: None when none is held.
  // Never holds the lock while `check` or `publish` runs.
  Step checkOnce(const std::string& op, const std::string& variant, const Check& check, const Publish& publish);

 private:
  enum class State { Held, Published, Refused };
  struct Slot {
    State state = State::Held;
    std::optional<Held> held;            // set while State::Held
    std::optional<cache::Entry> refused;  // the kernel refused (State::Refused)
  };
  static std::string keyOf(const std::string& op, const std::string& variant) { return op + "|" + variant; }

  mutable std::mutex mu_;
  std::map<std::string, Slot> slots_;  // by keyOf(op, variant); guarded by mu_
};

const char* toString(HoldReason reason);

}  // namespace hotkernel::engine
