// The descriptors of the reduction families, one per ReduceOp (Note [Family descriptors]).
#include "FamilyPlan.h"
#include "hotkernel/kernels/FamilyDescriptor.h"
#include "hotkernel/kernels/ReduceDimFamily.h"
#include "hotkernel/kernels/ReduceFamily.h"

// Note [Two layouts, one family]
// An op has one family in the served-op table (the engine admits only its
// op's family's entries: Note [Entries a process loads]), and a reduction op
// has two templates: over the last dim(s) (reduce_lastdim.cu, ReduceFamily)
// and over one middle dim (reduce_dim.cu, ReduceDimFamily). So each op's
// descriptor, and its cache family ("sum_lastdim", a name kept from when it
// had one layout), serves both, by the key's inner extent: 0 is a last-dim
// key [rows, cols] with ReduceParams; >= 2 a middle-dim key [outer = rows,
// reduced = cols, inner] with ReduceDimParams. The layouts' params JSON share
// no required key (threads / vec / unroll against tx / ty / vec), so a cache
// entry of one layout never becomes a plan of the other. A middle-dim plan's
// description starts with "<op>_dim" (ReduceDimFamily::displayName), so the
// log and the benchmarks say which kernel serves.

namespace hotkernel::kernels {
namespace {

bool middleDim(const VariantKey& key) { return key.inner != 0; }

template <ReduceOp kOp>
bool servesKey(const VariantKey& key) {
  if (key.options != 0 || key.hasMore()) return false;
  return middleDim(key) ? ReduceDimFamily::guardVariant(reduceDimVariantOf(key, kOp))
                        : ReduceFamily::guardVariant(reduceVariantOf(key, kOp));
}

template <ReduceOp kOp>
double bytesMoved(const VariantKey& key) {
  return middleDim(key) ? ReduceDimFamily::bytesMoved(reduceDimVariantOf(key, kOp))
                        : ReduceFamily::bytesMoved(reduceVariantOf(key, kOp));
}

template <ReduceOp kOp>
Plan makePlan(const VariantKey& key, const nlohmann::json& params, const std::string& cubin, int device) {
  HOTKERNEL_CHECK(key.options == 0, "a reduction key has no options: ", variantString(key));
  if (middleDim(key)) {
    return detail::familyPlan<ReduceDimFamily>(key, reduceDimVariantOf(key, kOp), ReduceDimParams::fromJson(params),
                                               cubin, device, ReduceDimFamily::displayName(kOp));
  }
  return detail::familyPlan<ReduceFamily>(key, reduceVariantOf(key, kOp), ReduceParams::fromJson(params), cubin,
                                          device, reduceFamilyName(kOp));
}

template <ReduceOp kOp>
FamilyDescriptor descriptorOf() {
  return FamilyDescriptor{reduceFamilyName(kOp), reduceAtenOpName(kOp), ReduceFamily::kKernelName, 0,
                          &servesKey<kOp>,        &bytesMoved<kOp>,         &makePlan<kOp>,
                          ReduceDimFamily::kKernelName};
}

}  // namespace

ReduceVariant reduceVariantOf(const VariantKey& key, ReduceOp op) {
  return ReduceVariant{static_cast<DType>(key.dtype), key.rows, key.cols, op};
}

const FamilyDescriptor& reduceDescriptor(ReduceOp op) {
  // Indexed by HK_OP, as reduceOpInfo's rows.
  static const FamilyDescriptor kDescriptors[] = {
      descriptorOf<ReduceOp::Sum>(),    descriptorOf<ReduceOp::Mean>(), descriptorOf<ReduceOp::Amax>(),
      descriptorOf<ReduceOp::Argmax>(), descriptorOf<ReduceOp::Amin>(), descriptorOf<ReduceOp::Argmin>(),
      descriptorOf<ReduceOp::Max>(),    descriptorOf<ReduceOp::Min>()};
  static_assert(sizeof(kDescriptors) / sizeof(kDescriptors[0]) == kReduceOpCount, "one descriptor per ReduceOp");
  return kDescriptors[static_cast<size_t>(reduceOpInfo(op).op)];
}

}  // namespace hotkernel::kernels
