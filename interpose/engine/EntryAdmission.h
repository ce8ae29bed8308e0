#pragma once
// Note [Entries a process loads]
// A cache entry becomes a plan of a served op only if the entry's family is
// the one that serves the op (the served-op table's row): an entry whose op
// and family disagree would put one family's kernel under another op's
// trampoline, so it is refused whatever its digests and signature say. The
// family's own makePlan then refuses parameters outside its whitelist (the
// launch geometry comes from them) and variants it does not serve. Agent
// kernels (family "agent") are code from outside the project's templates:
// they load only when HOTKERNEL_TRUST_AGENT_ENTRIES=1, only for the op the
// agent tunes (aten::_softmax, the softmax_lastdim family's), and then only
// after the optimizer thread checked them once (Note [Agent entries are
// checked again at load] in AgentEntryCheck.h); until then, and for good if
// the check fails, their variant runs ATen. A refused entry is
// logged once, its variant runs ATen and stays undecided, so the optimizer
// may tune it again (its result replaces the entry).

#include <string>

#include "hotkernel/kernels/FamilyDescriptor.h"

namespace hotkernel::engine {

// The family name of agent kernels in cache entries.
inline constexpr const char* kAgentFamily = "agent";

// Why an entry of `entryFamily` may not become a plan of an op served by
// `servedFamily`; "" when it may.
std::string entryRefusal(const std::string& entryFamily, const kernels::FamilyDescriptor& servedFamily,
                         bool trustAgentEntries);

// Whether an admitted entry of `entryFamily` is checked on the optimizer
// thread before it is published (an agent kernel's).
bool checkedBeforePublishing(const std::string& entryFamily);

}  // namespace hotkernel::engine
