#pragma once
// The check of a cached agent kernel before a process serves it (torch).
//
// Note [Agent entries are checked again at load]
// With HOTKERNEL_TRUST_AGENT_ENTRIES=1 a cached agent kernel may become a
// plan, but not straight from the cache: an entry that passed on the machine
// and in the process that tuned it is code from outside the project's
// templates, run now on another process's data, possibly under another
// driver's loader. So the loading process checks it once, on the optimizer
// thread (an idle GPU, yield points, never the serving path; the variant runs
// ATen until then): the cubin's sections (Note [Agent kernels hold no state]),
// then its first run and the five harness stages in hotkernel-sandbox-run (a
// fault or hang there cannot touch this process's CUDA context: Note [The
// harness stages in the sandbox process]), then the harness against ATen in
// this process. The harness runs its five stages as one run (they share their
// inputs, HarnessRun), so the check is all five with the smoke stage first,
// not the smoke stage alone: once per entry and process, bounded and
// interruptible like a tuning's. A kernel that fails is not served; the
// variant is tuned again (its result replaces the entry).

#include <functional>
#include <string>

#include "hotkernel/runtime/PlanTable.h"

namespace hotkernel {

// A cached agent kernel: what an `agent` entry holds.
struct AgentEntryKernel {
  std::string cubin;
  std::string kernelName;
  std::string paramsJson;  // {"launch": AgentLaunch}
};

// "" when the agent kernel may serve `key` (aten::_softmax, the only op the
// agent tunes: Note [External agent rounds]); otherwise why not. "interrupted"
// is never returned: an interrupted check throws Error("tuning interrupted")
// as an interrupted tuning does. Never throws for a bad kernel.
std::string checkAgentEntry(const AgentEntryKernel& kernel, const VariantKey& key,
                            const std::function<bool()>& yieldPoint);

}  // namespace hotkernel
