#include "hotkernel/optimizer/TargetCost.h"

#include "hotkernel/kernels/SoftmaxFamily.h"

namespace hotkernel {

std::optional<CallCost> callCost(const std::string& op, const VariantKey& key) {
  const auto dtype = static_cast<kernels::DType>(key.dtype);
  if (op == "aten::_softmax" || op == "aten::_log_softmax") {
    const kernels::SoftmaxVariant v{dtype, key.rows, key.cols};
    if (!kernels::SoftmaxFamily::guardVariant(v)) return std::nullopt;
    return CallCost{kernels::SoftmaxFamily::bytesMoved(v), 0.0};
  }
  return std::nullopt;
}

}  // namespace hotkernel
