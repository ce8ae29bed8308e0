// The descriptors of the last-dim reduction families, one per ReduceOp (Note [Family descriptors]).
#include "FamilyPlan.h"
#include "hotkernel/kernels/FamilyDescriptor.h"
#include "hotkernel/kernels/ReduceFamily.h"

namespace hotkernel::kernels {
namespace {

template <ReduceOp kOp>
bool servesKey(const VariantKey& key) {
  return key.options == 0 && ReduceFamily::guardVariant(reduceVariantOf(key, kOp));
}

template <ReduceOp kOp>
double bytesMoved(const VariantKey& key) {
  return ReduceFamily::bytesMoved(reduceVariantOf(key, kOp));
}

template <ReduceOp kOp>
Plan makePlan(const VariantKey& key, const nlohmann::json& params, const std::string& cubin, int device) {
  HOTKERNEL_CHECK(key.options == 0, "a reduction key has no options: ", variantString(key));
  return detail::familyPlan<ReduceFamily>(key, reduceVariantOf(key, kOp), ReduceParams::fromJson(params), cubin,
                                          device, reduceFamilyName(kOp));
}

template <ReduceOp kOp>
FamilyDescriptor descriptorOf() {
  return FamilyDescriptor{reduceFamilyName(kOp), reduceAtenOpName(kOp), ReduceFamily::kKernelName, 0,
                          &servesKey<kOp>, &bytesMoved<kOp>, &makePlan<kOp>};
}

}  // namespace

ReduceVariant reduceVariantOf(const VariantKey& key, ReduceOp op) {
  return ReduceVariant{static_cast<DType>(key.dtype), key.rows, key.cols, op};
}

const FamilyDescriptor& reduceDescriptor(ReduceOp op) {
  // Indexed by HK_OP, as reduceOpInfo's rows.
  static const FamilyDescriptor kDescriptors[] = {
      descriptorOf<ReduceOp::Sum>(),    descriptorOf<ReduceOp::Mean>(), descriptorOf<ReduceOp::Amax>(),
      descriptorOf<ReduceOp::Argmax>(), descriptorOf<ReduceOp::Amin>(), descriptorOf<ReduceOp::Argmin>()};
  static_assert(sizeof(kDescriptors) / sizeof(kDescriptors[0]) == kReduceOpCount, "one descriptor per ReduceOp");
  return kDescriptors[static_cast<size_t>(reduceOpInfo(op).op)];
}

}  // namespace hotkernel::kernels
