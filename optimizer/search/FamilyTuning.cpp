#include "hotkernel/optimizer/FamilyTuning.h"

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

// One row per family: its descriptor and its tuner.
struct FamilyTuner {
  const kernels::FamilyDescriptor& family;
  TuneOutcome (*tune)(const VariantKey& key, const TunerOptions& options);
};

template <SoftmaxOp kOp>
TuneOutcome softmaxTuner(const VariantKey& key, const TunerOptions& options) {
  return tuneSoftmax(kernels::softmaxVariantOf(key), key.device, options, kOp);
}

template <ReduceOp kOp>
TuneOutcome reduceTuner(const VariantKey& key, const TunerOptions& options) {
  return tuneReduce(kernels::reduceVariantOf(key, kOp), key.device, options);
}

TuneOutcome rmsNormTuner(const VariantKey& key, const TunerOptions& options) {
  return tuneRmsNorm(kernels::rmsNormVariantOf(key), key.device, options);
}

TuneOutcome layerNormTuner(const VariantKey& key, const TunerOptions& options) {
  return tuneLayerNorm(kernels::layerNormVariantOf(key), key.device, options);
}

TuneOutcome crossEntropyTuner(const VariantKey& key, const TunerOptions& options) {
  return tuneCrossEntropy(kernels::crossEntropyVariantOf(key), key.device, options);
}

const std::vector<FamilyTuner>& tuners() {
  static const std::vector<FamilyTuner> kTuners = {
      {kernels::softmaxDescriptor(SoftmaxOp::Softmax), &softmaxTuner<SoftmaxOp::Softmax>},
      {kernels::softmaxDescriptor(SoftmaxOp::LogSoftmax), &softmaxTuner<SoftmaxOp::LogSoftmax>},
      {kernels::rmsNormDescriptor(), &rmsNormTuner},
      {kernels::layerNormDescriptor(), &layerNormTuner},
      {kernels::crossEntropyDescriptor(), &crossEntropyTuner},
      {kernels::reduceDescriptor(ReduceOp::Sum), &reduceTuner<ReduceOp::Sum>},
      {kernels::reduceDescriptor(ReduceOp::Mean), &reduceTuner<ReduceOp::Mean>},
      {kernels::reduceDescriptor(ReduceOp::Amax), &reduceTuner<ReduceOp::Amax>},
      {kernels::reduceDescriptor(ReduceOp::Argmax), &reduceTuner<ReduceOp::Argmax>},
  };
  return kTuners;
}

}  // namespace

TuneOutcome tuneVariant(const kernels::FamilyDescriptor& family, const VariantKey& key, const TunerOptions& options) {
  HOTKERNEL_CHECK((key.options & ~family.optionFields) == 0, family.name, " takes no such variant: ",
                  kernels::variantString(key));
  HOTKERNEL_CHECK(family.optionFields != kernels::variant_options::kReductionMask || kernels::reductionOf(key) >= 0,
                  family.name, " needs a reduction: ", kernels::variantString(key));
  for (const FamilyTuner& t : tuners()) {
    if (&t.family == &family) return t.tune(key, options);
  }
  HOTKERNEL_THROW("no tuner for family ", family.name);
}

}  // namespace hotkernel
