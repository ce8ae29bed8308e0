#include "EntryAdmission.h"

namespace hotkernel::engine {

std::string entryRefusal(const std::string& entryFamily, const kernels::FamilyDescriptor& servedFamily,
                         bool trustAgentEntries) {
  if (entryFamily == kAgentFamily) {
    return trustAgentEntries ? std::string()
                             : std::string("an agent kernel, loaded only with HOTKERNEL_TRUST_AGENT_ENTRIES=1");
  }
  if (entryFamily != servedFamily.name) {
    return "its family '" + entryFamily + "' does not serve " + servedFamily.atenOp + " (" + servedFamily.name +
           " does)";
  }
  return "";
}

}  // namespace hotkernel::engine
