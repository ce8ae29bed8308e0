#include "hotkernel/optimizer/TargetCost.h"

#include "hotkernel/kernels/CrossEntropyFamily.h"
#include "hotkernel/kernels/LayerNormFamily.h"
#include "hotkernel/kernels/ReduceFamily.h"
#include "hotkernel/kernels/RmsNormFamily.h"
#include "hotkernel/kernels/SoftmaxFamily.h"

namespace hotkernel {

std::optional<CallCost> callCost(const std::string& op, const VariantKey& key) {
  const auto dtype = static_cast<kernels::DType>(key.dtype);
  if (op == "aten::_softmax" || op == "aten::_log_softmax") {
    const kernels::SoftmaxVariant v{dtype, key.rows, key.cols};
    if (key.flags != 0 || !kernels::SoftmaxFamily::guardVariant(v)) return std::nullopt;
    return CallCost{kernels::SoftmaxFamily::bytesMoved(v), 0.0};
  }
  // The norms: x read, out written, weight / bias read once, the float32
  // statistics written (the families' bytesMoved).
  if (op == "aten::_fused_rms_norm") {
    const kernels::RmsNormVariant v{dtype, key.rows, key.cols, key.hasWeight()};
    if (key.hasBias() || !kernels::RmsNormFamily::guardVariant(v)) return std::nullopt;
    return CallCost{kernels::RmsNormFamily::bytesMoved(v), 0.0};
  }
  if (op == "aten::native_layer_norm") {
    const kernels::LayerNormVariant v{dtype, key.rows, key.cols, key.hasWeight(), key.hasBias()};
    if (!kernels::LayerNormFamily::guardVariant(v)) return std::nullopt;
    return CallCost{kernels::LayerNormFamily::bytesMoved(v), 0.0};
  }
  // cross_entropy: the logits read once, targets, output and workspace (the family's bytesMoved).
  if (op == "aten::cross_entropy_loss") {
    if (key.reduction() < 0 || key.hasWeight() || key.hasBias()) return std::nullopt;
    const kernels::CrossEntropyVariant v{dtype, key.rows, key.cols,
                                         static_cast<kernels::CrossEntropyReduction>(key.reduction())};
    if (!kernels::CrossEntropyFamily::guardVariant(v)) return std::nullopt;
    return CallCost{kernels::CrossEntropyFamily::bytesMoved(v), 0.0};
  }
  // The last-dim reductions: the input read once, one result per row (the family's bytesMoved).
  for (kernels::ReduceOp r : kernels::kAllReduceOps) {
    if (op != kernels::reduceAtenOpName(r)) continue;
    const kernels::ReduceVariant v{dtype, key.rows, key.cols, r};
    if (key.flags != 0 || !kernels::ReduceFamily::guardVariant(v)) return std::nullopt;
    return CallCost{kernels::ReduceFamily::bytesMoved(v), 0.0};
  }
  return std::nullopt;
}

}  // namespace hotkernel
