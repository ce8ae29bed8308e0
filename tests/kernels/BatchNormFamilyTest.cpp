// The batch_norm family's descriptor (Note [Batch norm of one sample]): layer_norm's kernel under its own cache
// family, serving option-free [C, K] keys only; plans refuse anything else before loading a cubin.
#include "hotkernel/kernels/BatchNormFamily.h"

#include <gtest/gtest.h>

#include "hotkernel/kernels/FamilyDescriptor.h"
#include "hotkernel/kernels/VariantOptions.h"
#include "hotkernel/runtime/Check.h"
#include "hotkernel/runtime/PlanTable.h"

namespace hotkernel::kernels {
namespace {

TEST(BatchNormFamilyTest, GivenTheDescriptorWhenLookedUpThenItIsBatchNormsOwnFamilyOnLayerNormsKernel) {
  const FamilyDescriptor& d = batchNormDescriptor();
  EXPECT_STREQ(d.name, "batch_norm");
  EXPECT_STREQ(d.atenOp, "aten::native_batch_norm");
  EXPECT_STREQ(d.kernelName, LayerNormFamily::kKernelName);
  EXPECT_EQ(d.optionFields, 0);
  EXPECT_EQ(familyNamed("batch_norm"), &d);
  EXPECT_EQ(familyForOp("aten::native_batch_norm"), &d);
  EXPECT_EQ(familyForOp("aten::native_layer_norm"), &layerNormDescriptor());
}

TEST(BatchNormFamilyTest, GivenKeysWhenAskedThenOnlyOptionFreeLayerNormShapesAreServed) {
  const FamilyDescriptor& d = batchNormDescriptor();
  const VariantKey key{static_cast<int32_t>(DType::BFloat16), 0, 512, 4608};
  EXPECT_TRUE(d.servesKey(key));
  EXPECT_EQ(variantString(key), "dtype=bfloat16;rows=512;cols=4608");
  EXPECT_DOUBLE_EQ(d.bytesMoved(key), layerNormDescriptor().bytesMoved(key));
  VariantKey weighted = key;
  weighted.options = variant_options::kWeight;  // an affine batch norm (one scale a row) is not layer_norm's weight
  EXPECT_FALSE(d.servesKey(weighted));
  VariantKey inner = key;
  inner.inner = 4;
  EXPECT_FALSE(d.servesKey(inner));
  VariantKey more = key;
  more.more[0] = 32;
  EXPECT_FALSE(d.servesKey(more));
  VariantKey huge = key;
  huge.cols = LayerNormFamily::kMaxCols + 1;
  EXPECT_FALSE(d.servesKey(huge));
  // Refused before any cubin is loaded.
  EXPECT_THROW(d.makePlan(weighted, nlohmann::json::object(), "not a cubin", 0), Error);
}

}  // namespace
}  // namespace hotkernel::kernels
