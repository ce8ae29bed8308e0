#include "EntryAdmission.h"

#include "hotkernel/kernels/SoftmaxFamily.h"

namespace hotkernel::engine {

std::string entryRefusal(const std::string& entryFamily, const kernels::FamilyDescriptor& servedFamily,
                         bool trustAgentEntries) {
  if (entryFamily == kAgentFamily) {
    if (!trustAgentEntries) return "an agent kernel, loaded only with HOTKERNEL_TRUST_AGENT_ENTRIES=1";
    const kernels::FamilyDescriptor& agentServes = kernels::softmaxDescriptor(kernels::SoftmaxOp::Softmax);
    if (servedFamily.name != std::string(agentServes.name)) {
      return std::string("an agent kernel for ") + servedFamily.atenOp + ", which the agent does not tune (only " +
             agentServes.atenOp + ")";
    }
    return "";
  }
  if (entryFamily != servedFamily.name) {
    return "its family '" + entryFamily + "' does not serve " + servedFamily.atenOp + " (" + servedFamily.name +
           " does)";
  }
  return "";
}

bool checkedBeforePublishing(const std::string& entryFamily) { return entryFamily == kAgentFamily; }

}  // namespace hotkernel::engine
