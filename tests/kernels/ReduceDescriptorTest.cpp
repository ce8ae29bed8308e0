// The reduction descriptors' two layouts (Note [Two layouts, one family] in
// kernels/src/ReduceDescriptor.cpp): a key without an inner extent is a
// last-dim variant, one with an inner extent a middle-dim variant; which keys
// each serves, the bytes it names, the kernel it runs, and the plans it
// refuses before any cubin is loaded. The other families serve no key with an
// inner extent.

#include <gtest/gtest.h>

#include <string>

#include "hotkernel/kernels/CrossEntropyFamily.h"
#include "hotkernel/kernels/FamilyDescriptor.h"
#include "hotkernel/kernels/GroupNormFamily.h"
#include "hotkernel/kernels/LayerNormFamily.h"
#include "hotkernel/kernels/MmPadFamily.h"
#include "hotkernel/kernels/ReduceDimFamily.h"
#include "hotkernel/kernels/ReduceFamily.h"
#include "hotkernel/kernels/RmsNormFamily.h"
#include "hotkernel/kernels/SdpaFamily.h"
#include "hotkernel/kernels/SoftmaxFamily.h"
#include "hotkernel/kernels/VariantOptions.h"
#include "hotkernel/runtime/Check.h"

namespace hotkernel::kernels {
namespace {

// x.amax(dim=1) on a contiguous float32 [32, 4096, 1024].
VariantKey middleKey(int64_t inner = 1024) {
  VariantKey key{static_cast<int32_t>(DType::Float32), 0, 32, 4096};
  key.inner = inner;
  return key;
}

// The message of the Error `make` throws ("" when it throws none).
template <typename F>
std::string errorOf(F make) {
  try {
    make();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(ReduceDescriptorTest, GivenKeysWithAndWithoutAnInnerExtentWhenAskedThenEachLayoutServesItsOwn) {
  for (ReduceOp op : kAllReduceOps) {
    const FamilyDescriptor& d = reduceDescriptor(op);
    EXPECT_TRUE(d.servesKey(middleKey())) << reduceOpName(op);
    EXPECT_TRUE(d.servesKey(VariantKey{static_cast<int32_t>(DType::Float32), 0, 32, 4096})) << reduceOpName(op);
    EXPECT_FALSE(d.servesKey(middleKey(1))) << "inner 1 is no middle dim";
    EXPECT_FALSE(d.servesKey(middleKey(-4)));
    VariantKey tooLong = middleKey();
    tooLong.cols = ReduceDimFamily::kMaxReduced + 1;
    EXPECT_FALSE(d.servesKey(tooLong));
    VariantKey flagged = middleKey();
    flagged.options = variant_options::kWeight;
    EXPECT_FALSE(d.servesKey(flagged));
    // A middle-dim reduced extent past the last-dim layout's column limit is still the middle-dim layout's.
    VariantKey longReduced = middleKey(2);
    longReduced.rows = 1;
    longReduced.cols = ReduceFamily::kMaxCols + 1;
    EXPECT_TRUE(d.servesKey(longReduced));
  }
}

TEST(ReduceDescriptorTest, GivenAMiddleDimKeyWhenAskedForBytesAndKernelThenTheMiddleDimFamilys) {
  for (ReduceOp op : kAllReduceOps) {
    const FamilyDescriptor& d = reduceDescriptor(op);
    EXPECT_DOUBLE_EQ(d.bytesMoved(middleKey()), ReduceDimFamily::bytesMoved(reduceDimVariantOf(middleKey(), op)));
    const VariantKey last{static_cast<int32_t>(DType::Float32), 0, 32, 4096};
    EXPECT_DOUBLE_EQ(d.bytesMoved(last), ReduceFamily::bytesMoved(reduceVariantOf(last, op)));
    EXPECT_STREQ(kernelNameFor(d, middleKey()), ReduceDimFamily::kKernelName);
    EXPECT_STREQ(kernelNameFor(d, last), ReduceFamily::kKernelName);
    EXPECT_STREQ(d.name, reduceFamilyName(op));  // the cache family is the op's, whatever the layout
  }
}

TEST(ReduceDescriptorTest, GivenParamsOfTheOtherLayoutOrThatDoNotFitWhenMakingPlansThenRefusedBeforeAnyLoad) {
  const ReduceParams lastDimPoint{256, 1, 4, 1};
  const ReduceDimParams middlePoint{32, 8, 1};
  for (ReduceOp op : kAllReduceOps) {
    const FamilyDescriptor& d = reduceDescriptor(op);
    // Each layout's params JSON lacks the other's required keys.
    EXPECT_NE(errorOf([&] { d.makePlan(middleKey(), lastDimPoint.toJson(), "not a cubin", 0); }).find("misses \"tx\""),
              std::string::npos);
    EXPECT_NE(errorOf([&] {
                d.makePlan(VariantKey{static_cast<int32_t>(DType::Float32), 0, 32, 4096}, middlePoint.toJson(),
                           "not a cubin", 0);
              }).find("'threads'"),
              std::string::npos);
    // A vector of 4 does not divide an inner extent of 1023: the guard refuses, naming the op's middle-dim
    // kernel ("argmax_dim": ReduceDimFamily::displayName).
    const std::string what =
        errorOf([&] { d.makePlan(middleKey(1023), ReduceDimParams{32, 8, 4}.toJson(), "not a cubin", 0); });
    EXPECT_NE(what.find(std::string("do not fit ") + reduceOpName(op) + "_dim "), std::string::npos) << what;
    EXPECT_NE(what.find(";inner=1023"), std::string::npos) << what;
    VariantKey flagged = middleKey();
    flagged.options = variant_options::kBias;
    EXPECT_THROW(d.makePlan(flagged, middlePoint.toJson(), "not a cubin", 0), Error);
  }
}

TEST(ReduceDescriptorTest, GivenAKeyWithAnInnerExtentWhenAskedOfAnotherFamilyThenNotServed) {
  VariantKey key = middleKey();
  for (const FamilyDescriptor* f : allFamilies()) {
    if (reduceOpOfFamily(f->name)) continue;
    // The softmax ops have a middle-dim layout of their own (SoftmaxDimFamilyTest).
    if (f == &softmaxDescriptor(SoftmaxOp::Softmax) || f == &softmaxDescriptor(SoftmaxOp::LogSoftmax)) continue;
    // The padded GEMMs' inner extent is their k: they serve only keys with one (MmPadFamilyTest).
    if (f == &mmPadDescriptor() || f == &addmmPadDescriptor()) continue;
    // Attention keys have an inner extent (the keys) and four more (SdpaFamilyTest).
    if (f == &sdpaDescriptor()) continue;
    // group_norm keys carry their groups and HxW in `more` (GroupNormFamilyTest).
    if (f == &groupNormDescriptor()) continue;
    VariantKey k = key;
    if (f == &crossEntropyDescriptor()) k.options = reductionOptions(1);
    if (f == &rmsNormDescriptor() || f == &layerNormDescriptor()) k.options = variant_options::kWeight;
    VariantKey twoExtents = k;
    twoExtents.inner = 0;
    EXPECT_TRUE(f->servesKey(twoExtents)) << f->name;
    EXPECT_FALSE(f->servesKey(k)) << f->name;
    EXPECT_EQ(f->innerKernelName, nullptr) << f->name;
    EXPECT_STREQ(kernelNameFor(*f, k), f->kernelName);
  }
}

}  // namespace
}  // namespace hotkernel::kernels
