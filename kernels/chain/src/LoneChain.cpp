// The lone calls that are chains of their own (ChainBuilder.h): Note [Relayout copies], Note [Lone normalizations].

#include <vector>

#include "OpRules.h"
#include "hotkernel/chain/ChainBuilder.h"
#include "hotkernel/chain/ChainLayout.h"

namespace hotkernel::chain {

bool isRelayoutCopy(const ChainBuild& build) {
  return build.ok() && !build.layout.contiguous() && isLoneCast(build.chain);
}

bool isLoneChain(const std::vector<RecordedCall>& calls, const ChainBuild& build) {
  if (calls.size() != 1 || !build.ok()) return false;
  if (isRelayoutCopy(build)) return true;
  const rules::OpRule* rule = rules::ruleOf(calls.front().op);  // Note [Lone normalizations]
  return rule != nullptr && (rule->form == rules::Form::GroupNorm || rule->form == rules::Form::BatchNorm);
}

}  // namespace hotkernel::chain
