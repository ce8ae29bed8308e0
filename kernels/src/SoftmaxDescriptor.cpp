// The descriptors of softmax_lastdim and log_softmax_lastdim (Note [Family descriptors]).
#include "FamilyPlan.h"
#include "hotkernel/kernels/FamilyDescriptor.h"
#include "hotkernel/kernels/SoftmaxFamily.h"

namespace hotkernel::kernels {
namespace {

template <SoftmaxOp kOp>
Plan softmaxPlan(const VariantKey& key, const nlohmann::json& params, const std::string& cubin, int device) {
  HOTKERNEL_CHECK(key.options == 0, "a softmax variant has no options: ", variantString(key));
  return detail::familyPlan<SoftmaxFamily>(key, softmaxVariantOf(key), SoftmaxParams::fromJson(params), cubin, device,
                                           softmaxFamilyName(kOp));
}

bool servesKey(const VariantKey& key) {
  return key.options == 0 && key.inner == 0 && SoftmaxFamily::guardVariant(softmaxVariantOf(key));
}
double bytesMoved(const VariantKey& key) { return SoftmaxFamily::bytesMoved(softmaxVariantOf(key)); }

const FamilyDescriptor kSoftmax{"softmax_lastdim", "aten::_softmax", SoftmaxFamily::kKernelName, 0,
                                &servesKey, &bytesMoved, &softmaxPlan<SoftmaxOp::Softmax>};
const FamilyDescriptor kLogSoftmax{"log_softmax_lastdim", "aten::_log_softmax", SoftmaxFamily::kKernelName, 0,
                                   &servesKey, &bytesMoved, &softmaxPlan<SoftmaxOp::LogSoftmax>};

}  // namespace

SoftmaxVariant softmaxVariantOf(const VariantKey& key) {
  return SoftmaxVariant{static_cast<DType>(key.dtype), key.rows, key.cols};
}

const FamilyDescriptor& softmaxDescriptor(SoftmaxOp op) { return op == SoftmaxOp::LogSoftmax ? kLogSoftmax : kSoftmax; }

}  // namespace hotkernel::kernels
