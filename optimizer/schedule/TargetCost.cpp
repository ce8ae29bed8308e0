#include "hotkernel/optimizer/TargetCost.h"

#include "hotkernel/kernels/FamilyDescriptor.h"

namespace hotkernel {

std::optional<CallCost> callCost(const std::string& op, const VariantKey& key) {
  const kernels::FamilyDescriptor* family = kernels::familyForOp(op);
  if (!family || !family->servesKey(key)) return std::nullopt;
  return CallCost{family->bytesMoved(key), 0.0};
}

}  // namespace hotkernel
