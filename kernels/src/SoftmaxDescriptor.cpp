// The descriptors of softmax_lastdim and log_softmax_lastdim (Note [Family descriptors]).
#include "FamilyPlan.h"
#include "hotkernel/kernels/FamilyDescriptor.h"
#include "hotkernel/kernels/SoftmaxDimFamily.h"
#include "hotkernel/kernels/SoftmaxFamily.h"

// Note [Two softmax layouts]
// As the reductions' (Note [Two layouts, one family] in ReduceDescriptor.cpp):
// an op has one family in the served-op table, and softmax has two templates,
// over the last dim (softmax_lastdim.cu, SoftmaxFamily) and over one middle
// dim (softmax_dim.cu, SoftmaxDimFamily). Each op's descriptor, and its cache
// family ("softmax_lastdim", a name kept from when it had one layout), serves
// both, by the key's inner extent: 0 is a last-dim key [rows, cols] with
// SoftmaxParams; >= 2 a middle-dim key [outer = rows, dim = cols, inner] with
// SoftmaxDimParams. The layouts' params JSON share no required key (threads /
// vec / items against tx / ty / vec), so a cache entry of one layout never
// becomes a plan of the other.

namespace hotkernel::kernels {
namespace {

bool middleDim(const VariantKey& key) { return key.inner != 0; }

template <SoftmaxOp kOp>
Plan softmaxPlan(const VariantKey& key, const nlohmann::json& params, const std::string& cubin, int device) {
  HOTKERNEL_CHECK(key.options == 0, "a softmax variant has no options: ", variantString(key));
  if (middleDim(key)) {
    // The description names the middle-dim kernel; the cache family stays the last-dim one's.
    const char* name = kOp == SoftmaxOp::Softmax ? "softmax_dim" : "log_softmax_dim";
    return detail::familyPlan<SoftmaxDimFamily>(key, softmaxDimVariantOf(key), SoftmaxDimParams::fromJson(params),
                                                cubin, device, name);
  }
  return detail::familyPlan<SoftmaxFamily>(key, softmaxVariantOf(key), SoftmaxParams::fromJson(params), cubin, device,
                                           softmaxFamilyName(kOp));
}

bool servesKey(const VariantKey& key) {
  if (key.options != 0 || key.hasMore()) return false;
  return middleDim(key) ? SoftmaxDimFamily::guardVariant(softmaxDimVariantOf(key))
                        : SoftmaxFamily::guardVariant(softmaxVariantOf(key));
}
double bytesMoved(const VariantKey& key) {
  return middleDim(key) ? SoftmaxDimFamily::bytesMoved(softmaxDimVariantOf(key))
                        : SoftmaxFamily::bytesMoved(softmaxVariantOf(key));
}

const FamilyDescriptor kSoftmax{"softmax_lastdim", "aten::_softmax", SoftmaxFamily::kKernelName, 0,
                                &servesKey,        &bytesMoved,      &softmaxPlan<SoftmaxOp::Softmax>,
                                SoftmaxDimFamily::kKernelName};
const FamilyDescriptor kLogSoftmax{"log_softmax_lastdim", "aten::_log_softmax", SoftmaxFamily::kKernelName, 0,
                                   &servesKey,            &bytesMoved,          &softmaxPlan<SoftmaxOp::LogSoftmax>,
                                   SoftmaxDimFamily::kKernelName};

}  // namespace

SoftmaxVariant softmaxVariantOf(const VariantKey& key) {
  return SoftmaxVariant{static_cast<DType>(key.dtype), key.rows, key.cols};
}

const FamilyDescriptor& softmaxDescriptor(SoftmaxOp op) { return op == SoftmaxOp::LogSoftmax ? kLogSoftmax : kSoftmax; }

}  // namespace hotkernel::kernels
