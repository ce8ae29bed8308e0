// The descriptor of group_norm (Note [Family descriptors]).
#include "FamilyPlan.h"
#include "hotkernel/kernels/FamilyDescriptor.h"
#include "hotkernel/kernels/GroupNormFamily.h"

namespace hotkernel::kernels {
namespace {

// Note [Group norm keys]
// A group_norm key is rows = N * G, cols = (C / G) * HxW, the weight and bias
// options, no inner extent, and more = {G, HxW, 1, 1}: the groups place a
// row's channels (row % G) and HxW maps a column to its channel, so both pick
// the kernel (HK_GROUPS, HK_GROUP_HW); the two trailing 1s fill the fields the
// variant string requires (Note [Variant options]). N is rows / G.
constexpr int32_t kFields = variant_options::kWeight | variant_options::kBias;

bool servesKey(const VariantKey& key) {
  return detail::optionsWithin(key, kFields) && key.inner == 0 && key.more[2] == 1 && key.more[3] == 1 &&
         GroupNormFamily::guardVariant(groupNormVariantOf(key));
}
double bytesMoved(const VariantKey& key) { return GroupNormFamily::bytesMoved(groupNormVariantOf(key)); }

Plan makePlan(const VariantKey& key, const nlohmann::json& params, const std::string& cubin, int device) {
  HOTKERNEL_CHECK(servesKey(key), "not a group_norm variant: ", variantString(key));
  const GroupNormVariant v = groupNormVariantOf(key);
  const NormParams p = NormParams::fromJson(params);
  Plan plan = detail::familyPlan<GroupNormFamily>(key, v, p, cubin, device, GroupNormFamily::kName);
  plan.workspaceFloats = GroupNormFamily::workspaceFloats(v, p);
  return plan;
}

const FamilyDescriptor kGroupNorm{GroupNormFamily::kName, "aten::native_group_norm", GroupNormFamily::kKernelName,
                                  kFields, &servesKey, &bytesMoved, &makePlan};

}  // namespace

GroupNormVariant groupNormVariantOf(const VariantKey& key) {
  return GroupNormVariant{static_cast<DType>(key.dtype), key.rows, key.cols, key.more[0], key.more[1],
                          hasWeight(key), hasBias(key)};
}

VariantKey groupNormKeyOf(const GroupNormVariant& v, int device) {
  VariantKey key;
  key.dtype = static_cast<int32_t>(v.dtype);
  key.device = device;
  key.rows = v.rows;
  key.cols = v.cols;
  key.options = weightBiasOptions(v.hasWeight, v.hasBias);
  key.more[0] = v.groups;
  key.more[1] = v.hw;
  key.more[2] = 1;
  key.more[3] = 1;
  return key;
}

const FamilyDescriptor& groupNormDescriptor() { return kGroupNorm; }

}  // namespace hotkernel::kernels
