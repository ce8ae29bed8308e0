#pragma once
// Note [Entries a process loads]
// A cache entry becomes a plan of a served op only if the entry's family is
// the one that serves the op (the served-op table's row): an entry whose op
// and family disagree would put one family's kernel under another op's
// trampoline, so it is refused whatever its digests and signature say. The
// family's own makePlan then refuses parameters outside its whitelist (the
// launch geometry comes from them) and variants it does not serve. Agent
// kernels (family "agent") are code from outside the project's templates:
// they load only when HOTKERNEL_TRUST_AGENT_ENTRIES=1. A refused entry is
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

}  // namespace hotkernel::engine
