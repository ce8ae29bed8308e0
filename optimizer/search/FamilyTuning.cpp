#include "hotkernel/optimizer/FamilyTuning.h"

#include <optional>

#include "hotkernel/kernels/VariantOptions.h"
#include "hotkernel/optimizer/CrossEntropyTuner.h"
#include "hotkernel/optimizer/NormTuner.h"
#include "hotkernel/optimizer/ReduceTuner.h"
#include "hotkernel/optimizer/SoftmaxTuner.h"
#include "hotkernel/runtime/Check.h"

namespace hotkernel {
namespace {

using kernels::ReduceOp;
using kernels::SoftmaxOp;

// One row per family: its descriptor and its tuner (given the descriptor, so
// that one tuner serves the families of several ops).
struct FamilyTuner {
  const kernels::FamilyDescriptor& family;
  TuneOutcome (*tune)(const kernels::FamilyDescriptor& family, const VariantKey& key, const TunerOptions& options);
};

template <SoftmaxOp kOp>
TuneOutcome softmaxTuner(const kernels::FamilyDescriptor&, const VariantKey& key, const TunerOptions& options) {
  return tuneSoftmax(kernels::softmaxVariantOf(key), key.device, options, kOp);
}

TuneOutcome reduceTuner(const kernels::FamilyDescriptor& family, const VariantKey& key, const TunerOptions& options) {
  const std::optional<ReduceOp> op = kernels::reduceOpOfFamily(family.name);
  HOTKERNEL_INTERNAL_ASSERT(op.has_value(), family.name, " is not a reduction family");
  return tuneReduce(kernels::reduceVariantOf(key, *op), key.device, options);
}

TuneOutcome rmsNormTuner(const kernels::FamilyDescriptor&, const VariantKey& key, const TunerOptions& options) {
  return tuneRmsNorm(kernels::rmsNormVariantOf(key), key.device, options);
}

TuneOutcome layerNormTuner(const kernels::FamilyDescriptor&, const VariantKey& key, const TunerOptions& options) {
  return tuneLayerNorm(kernels::layerNormVariantOf(key), key.device, options);
}

TuneOutcome crossEntropyTuner(const kernels::FamilyDescriptor&, const VariantKey& key,
                              const TunerOptions& options) {
  return tuneCrossEntropy(kernels::crossEntropyVariantOf(key), key.device, options);
}

const std::vector<FamilyTuner>& tuners() {
  static const std::vector<FamilyTuner> kTuners = [] {
    std::vector<FamilyTuner> t = {
        {kernels::softmaxDescriptor(SoftmaxOp::Softmax), &softmaxTuner<SoftmaxOp::Softmax>},
        {kernels::softmaxDescriptor(SoftmaxOp::LogSoftmax), &softmaxTuner<SoftmaxOp::LogSoftmax>},
        {kernels::rmsNormDescriptor(), &rmsNormTuner},
        {kernels::layerNormDescriptor(), &layerNormTuner},
        {kernels::crossEntropyDescriptor(), &crossEntropyTuner},
    };
    for (ReduceOp op : kernels::kAllReduceOps) t.push_back({kernels::reduceDescriptor(op), &reduceTuner});
    return t;
  }();
  return kTuners;
}

}  // namespace

TuneOutcome tuneVariant(const kernels::FamilyDescriptor& family, const VariantKey& key, const TunerOptions& options) {
  HOTKERNEL_CHECK(family.servesKey(key), family.name, " does not serve the variant ", kernels::variantString(key));
  for (const FamilyTuner& t : tuners()) {
    if (&t.family == &family) return t.tune(family, key, options);
  }
  HOTKERNEL_THROW("no tuner for family ", family.name);
}

}  // namespace hotkernel
