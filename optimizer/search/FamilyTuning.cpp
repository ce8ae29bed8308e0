#include "hotkernel/optimizer/FamilyTuning.h"

#include <optional>

#include "hotkernel/kernels/VariantOptions.h"
#include "hotkernel/optimizer/CrossEntropyTuner.h"
#include "hotkernel/optimizer/FamilyTuner.h"
#include "hotkernel/optimizer/BatchNormTuner.h"
#include "hotkernel/optimizer/GroupNormTuner.h"
#include "hotkernel/optimizer/MmPadTuner.h"
#include "hotkernel/optimizer/NormTuner.h"
#include "hotkernel/optimizer/ReduceDimTuner.h"
#include "hotkernel/optimizer/ReduceTuner.h"
#include "hotkernel/optimizer/SdpaTuner.h"
#include "hotkernel/optimizer/SoftmaxDimTuner.h"
#include "hotkernel/optimizer/SoftmaxTuner.h"
#include "hotkernel/runtime/Check.h"

namespace hotkernel {
namespace {

using kernels::ReduceOp;
using kernels::SoftmaxOp;

// One row per family: its descriptor, its tuner, its ATen reference (Note
// [The ATen reference]) and its tuner's spec (Note [A tuner's spec]), each
// given the descriptor, so that one function serves the families of several ops.
// A family that is not a row op (the padded GEMMs: mm_pad_n, addmm_pad_n; the
// attention backends: sdpa_backend) has no spec and its own check of a cached
// kernel instead.
struct FamilyTuner {
  const kernels::FamilyDescriptor& family;
  TuneOutcome (*tune)(const kernels::FamilyDescriptor& family, const VariantKey& key, const TunerOptions& options);
  AtenReference (*reference)(const kernels::FamilyDescriptor& family, const VariantKey& key);
  FamilyTuneSpec (*spec)(const kernels::FamilyDescriptor& family, const VariantKey& key, const TunerOptions& options);
  OwnCachedCheck ownCheck = nullptr;
};

// Both layouts of a softmax op (Note [Two softmax layouts] in kernels/src/SoftmaxDescriptor.cpp).
template <SoftmaxOp kOp>
TuneOutcome softmaxTuner(const kernels::FamilyDescriptor&, const VariantKey& key, const TunerOptions& options) {
  if (key.inner != 0) return tuneSoftmaxDim(kernels::softmaxDimVariantOf(key), key.device, options, kOp);
  return tuneSoftmax(kernels::softmaxVariantOf(key), key.device, options, kOp);
}

// Both layouts of a reduction op (Note [Two layouts, one family] in kernels/src/ReduceDescriptor.cpp).
TuneOutcome reduceTuner(const kernels::FamilyDescriptor& family, const VariantKey& key, const TunerOptions& options) {
  const std::optional<ReduceOp> op = kernels::reduceOpOfFamily(family.name);
  HOTKERNEL_INTERNAL_ASSERT(op.has_value(), family.name, " is not a reduction family");
  if (key.inner != 0) return tuneReduceDim(kernels::reduceDimVariantOf(key, *op), key.device, options);
  return tuneReduce(kernels::reduceVariantOf(key, *op), key.device, options);
}

TuneOutcome rmsNormTuner(const kernels::FamilyDescriptor&, const VariantKey& key, const TunerOptions& options) {
  return tuneRmsNorm(kernels::rmsNormVariantOf(key), key.device, options);
}

TuneOutcome layerNormTuner(const kernels::FamilyDescriptor&, const VariantKey& key, const TunerOptions& options) {
  return tuneLayerNorm(kernels::layerNormVariantOf(key), key.device, options);
}

TuneOutcome groupNormTuner(const kernels::FamilyDescriptor&, const VariantKey& key, const TunerOptions& options) {
  return tuneGroupNorm(kernels::groupNormVariantOf(key), key.device, options);
}

TuneOutcome batchNormTuner(const kernels::FamilyDescriptor&, const VariantKey& key, const TunerOptions& options) {
  return tuneBatchNorm(kernels::layerNormVariantOf(key), key.device, options);
}

TuneOutcome crossEntropyTuner(const kernels::FamilyDescriptor&, const VariantKey& key,
                              const TunerOptions& options) {
  return tuneCrossEntropy(kernels::crossEntropyVariantOf(key), key.device, options);
}

template <SoftmaxOp kOp>
FamilyTuneSpec softmaxTuneSpecOf(const kernels::FamilyDescriptor&, const VariantKey& key,
                                 const TunerOptions& options) {
  if (key.inner != 0) return softmaxDimTuneSpec(kernels::softmaxDimVariantOf(key), key.device, options, kOp);
  return softmaxTuneSpec(kernels::softmaxVariantOf(key), key.device, options, kOp);
}

FamilyTuneSpec reduceTuneSpecOf(const kernels::FamilyDescriptor& family, const VariantKey& key,
                                const TunerOptions& options) {
  const std::optional<ReduceOp> op = kernels::reduceOpOfFamily(family.name);
  HOTKERNEL_INTERNAL_ASSERT(op.has_value(), family.name, " is not a reduction family");
  if (key.inner != 0) return reduceDimTuneSpec(kernels::reduceDimVariantOf(key, *op), key.device, options);
  return reduceTuneSpec(kernels::reduceVariantOf(key, *op), key.device, options);
}

FamilyTuneSpec rmsNormTuneSpecOf(const kernels::FamilyDescriptor&, const VariantKey& key,
                                 const TunerOptions& options) {
  return rmsNormTuneSpec(kernels::rmsNormVariantOf(key), key.device, options);
}

FamilyTuneSpec layerNormTuneSpecOf(const kernels::FamilyDescriptor&, const VariantKey& key,
                                   const TunerOptions& options) {
  return layerNormTuneSpec(kernels::layerNormVariantOf(key), key.device, options);
}

FamilyTuneSpec groupNormTuneSpecOf(const kernels::FamilyDescriptor&, const VariantKey& key,
                                   const TunerOptions& options) {
  return groupNormTuneSpec(kernels::groupNormVariantOf(key), key.device, options);
}

FamilyTuneSpec batchNormTuneSpecOf(const kernels::FamilyDescriptor&, const VariantKey& key,
                                   const TunerOptions& options) {
  return batchNormTuneSpec(kernels::layerNormVariantOf(key), key.device, options);
}

FamilyTuneSpec crossEntropyTuneSpecOf(const kernels::FamilyDescriptor&, const VariantKey& key,
                                      const TunerOptions& options) {
  return crossEntropyTuneSpec(kernels::crossEntropyVariantOf(key), key.device, options);
}

template <SoftmaxOp kOp>
AtenReference softmaxReference(const kernels::FamilyDescriptor&, const VariantKey& key) {
  // A middle-dim key's timed input is [rows, cols * inner] (kernels::rowLength).
  if (key.inner != 0) return atenReferenceOfSpec(softmaxDimSpec(kOp, key.inner));
  return atenReferenceOfSpec(softmaxSpec(kOp));
}

AtenReference reduceReference(const kernels::FamilyDescriptor& family, const VariantKey& key) {
  const std::optional<ReduceOp> op = kernels::reduceOpOfFamily(family.name);
  HOTKERNEL_INTERNAL_ASSERT(op.has_value(), family.name, " is not a reduction family");
  // A middle-dim key's timed input is [rows, cols * inner] (kernels::rowLength).
  if (key.inner != 0) return atenReferenceOfSpec(reduceDimSpec(*op, key.inner));
  return atenReferenceOfSpec(reduceSpec(*op));
}

AtenReference rmsNormReference(const kernels::FamilyDescriptor&, const VariantKey& key) {
  return atenReferenceOfSpec(rmsNormSpec(kernels::hasWeight(key)));
}

AtenReference layerNormReference(const kernels::FamilyDescriptor&, const VariantKey& key) {
  return atenReferenceOfSpec(layerNormSpec(kernels::hasWeight(key), kernels::hasBias(key)));
}

AtenReference groupNormReference(const kernels::FamilyDescriptor&, const VariantKey& key) {
  const kernels::GroupNormVariant v = kernels::groupNormVariantOf(key);
  return atenReferenceOfSpec(groupNormSpec(v.groups, v.hw, v.hasWeight, v.hasBias));
}

AtenReference batchNormReference(const kernels::FamilyDescriptor&, const VariantKey&) {
  return atenReferenceOfSpec(batchNormSpec());
}

TuneOutcome mmPadTuner(const kernels::FamilyDescriptor&, const VariantKey& key, const TunerOptions& options) {
  return tuneMmPad(kernels::mmPadVariantOf(key), key.device, options);
}

AtenReference mmPadReference(const kernels::FamilyDescriptor&, const VariantKey& key) {
  return mmPadAtenReference(kernels::mmPadVariantOf(key));
}

TuneOutcome sdpaTuner(const kernels::FamilyDescriptor&, const VariantKey& key, const TunerOptions& options) {
  return tuneSdpa(kernels::sdpaVariantOf(key), key.device, options);
}

AtenReference sdpaOriginal(const kernels::FamilyDescriptor&, const VariantKey& key) {
  return sdpaAtenReference(kernels::sdpaVariantOf(key));
}

AtenReference crossEntropyReference(const kernels::FamilyDescriptor&, const VariantKey& key) {
  return crossEntropyAtenReference(kernels::crossEntropyVariantOf(key).reduction);
}

const std::vector<FamilyTuner>& tuners() {
  static const std::vector<FamilyTuner> kTuners = [] {
    std::vector<FamilyTuner> t = {
        {kernels::softmaxDescriptor(SoftmaxOp::Softmax), &softmaxTuner<SoftmaxOp::Softmax>,
         &softmaxReference<SoftmaxOp::Softmax>, &softmaxTuneSpecOf<SoftmaxOp::Softmax>},
        {kernels::softmaxDescriptor(SoftmaxOp::LogSoftmax), &softmaxTuner<SoftmaxOp::LogSoftmax>,
         &softmaxReference<SoftmaxOp::LogSoftmax>, &softmaxTuneSpecOf<SoftmaxOp::LogSoftmax>},
        {kernels::rmsNormDescriptor(), &rmsNormTuner, &rmsNormReference, &rmsNormTuneSpecOf},
        {kernels::layerNormDescriptor(), &layerNormTuner, &layerNormReference, &layerNormTuneSpecOf},
        {kernels::crossEntropyDescriptor(), &crossEntropyTuner, &crossEntropyReference, &crossEntropyTuneSpecOf},
        {kernels::groupNormDescriptor(), &groupNormTuner, &groupNormReference, &groupNormTuneSpecOf},
        {kernels::batchNormDescriptor(), &batchNormTuner, &batchNormReference, &batchNormTuneSpecOf},
    };
    for (ReduceOp op : kernels::kAllReduceOps) {
      t.push_back({kernels::reduceDescriptor(op), &reduceTuner, &reduceReference, &reduceTuneSpecOf});
    }
    t.push_back({kernels::mmPadDescriptor(), &mmPadTuner, &mmPadReference, nullptr, &checkCachedMmPad});
    t.push_back({kernels::addmmPadDescriptor(), &mmPadTuner, &mmPadReference, nullptr, &checkCachedMmPad});
    t.push_back({kernels::sdpaDescriptor(), &sdpaTuner, &sdpaOriginal, nullptr, &checkCachedSdpa});
    return t;
  }();
  return kTuners;
}

const FamilyTuner& rowOf(const kernels::FamilyDescriptor& family) {
  for (const FamilyTuner& t : tuners()) {
    if (&t.family == &family) return t;
  }
  HOTKERNEL_THROW("no tuner for family ", family.name);
}

}  // namespace

TuneOutcome tuneVariant(const kernels::FamilyDescriptor& family, const VariantKey& key, const TunerOptions& options) {
  HOTKERNEL_CHECK(family.servesKey(key), family.name, " does not serve the variant ", kernels::variantString(key));
  return rowOf(family).tune(family, key, options);
}

AtenReference atenReferenceOf(const kernels::FamilyDescriptor& family, const VariantKey& key) {
  HOTKERNEL_CHECK(family.servesKey(key), family.name, " does not serve the variant ", kernels::variantString(key));
  return rowOf(family).reference(family, key);
}

FamilyTuneSpec familyTuneSpecOf(const kernels::FamilyDescriptor& family, const VariantKey& key,
                                const TunerOptions& options) {
  HOTKERNEL_CHECK(family.servesKey(key), family.name, " does not serve the variant ", kernels::variantString(key));
  const FamilyTuner& row = rowOf(family);
  HOTKERNEL_CHECK(row.spec != nullptr, family.name, " is not a row op: it has no tune spec");
  return row.spec(family, key, options);
}

OwnCachedCheck ownCachedCheckOf(const kernels::FamilyDescriptor& family) { return rowOf(family).ownCheck; }

}  // namespace hotkernel
