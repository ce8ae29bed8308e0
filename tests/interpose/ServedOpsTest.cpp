// The one list of served ops: names in both spellings, each op's plan table
// and switch are its override's, the C API's plan count and switch cover all.
#include <gtest/gtest.h>

#include "CrossEntropyOverride.h"
#include "LayerNormOverride.h"
#include "ReduceOverride.h"
#include "RmsNormOverride.h"
#include "ServedOps.h"
#include "SoftmaxOverride.h"
#include "hotkernel/optimizer/PlanFactory.h"

namespace hotkernel {
namespace {

TEST(ServedOpsTest, GivenOpNamesWithOrWithoutNamespaceWhenLookedUpThenTheServedOpAndItsFamily) {
  EXPECT_EQ(servedOpOf("_fused_rms_norm"), ServedOp::RmsNorm);
  EXPECT_EQ(servedOpOf("aten::_fused_rms_norm"), ServedOp::RmsNorm);
  EXPECT_EQ(servedOpOf("native_layer_norm"), ServedOp::LayerNorm);
  EXPECT_EQ(servedOpOf("aten::native_layer_norm"), ServedOp::LayerNorm);
  EXPECT_EQ(servedOpOf("_softmax"), ServedOp::Softmax);
  EXPECT_EQ(servedOpOf("aten::_log_softmax"), ServedOp::LogSoftmax);
  EXPECT_FALSE(servedOpOf("layer_norm").has_value());  // the composite: its leaf is served
  EXPECT_FALSE(servedOpOf("aten::rms_norm").has_value());
  EXPECT_FALSE(servedOpOf("aten::mm").has_value());
  EXPECT_STREQ(servedOpName(ServedOp::RmsNorm), "aten::_fused_rms_norm");
  EXPECT_STREQ(servedOpName(ServedOp::LayerNorm), "aten::native_layer_norm");
  EXPECT_STREQ(servedOpFamily(ServedOp::RmsNorm), "rms_norm");
  EXPECT_STREQ(servedOpFamily(ServedOp::LayerNorm), "layer_norm");
  EXPECT_STREQ(servedOpFamily(ServedOp::LogSoftmax), "log_softmax_lastdim");
  for (ServedOp op : kServedOps) EXPECT_EQ(servedOpOf(servedOpName(op)), op);
}

TEST(ServedOpsTest, GivenServedOpsWhenPlanTablesAndSwitchesAskedForThenTheOverridesOwn) {
  EXPECT_EQ(&plansOf(ServedOp::RmsNorm), &RmsNormOverride::plans());
  EXPECT_EQ(&plansOf(ServedOp::LayerNorm), &LayerNormOverride::plans());
  EXPECT_EQ(&plansOf(ServedOp::LogSoftmax), &SoftmaxOverride::plans(SoftmaxOverride::Op::LogSoftmax));

  const bool before = setServedOpsEnabled(false);
  EXPECT_FALSE(RmsNormOverride::enabled());
  EXPECT_FALSE(LayerNormOverride::enabled());
  EXPECT_FALSE(SoftmaxOverride::enabled());
  EXPECT_FALSE(servedOpsEnabled());
  EXPECT_FALSE(setServedOpsEnabled(true));
  EXPECT_TRUE(RmsNormOverride::enabled());
  EXPECT_TRUE(LayerNormOverride::enabled());
  setServedOpsEnabled(before);
}

TEST(ServedOpsTest, GivenPlansInTheNormTablesWhenCountedThenTheCountCoversEveryOp) {
  const size_t before = servedPlanCount();
  VariantKey key{static_cast<int32_t>(kernels::DType::BFloat16), 0, 123457, 96};
  key.flags = VariantKey::kHasWeight;
  Plan rms;
  rms.key = key;
  rms.description = "test plan";
  RmsNormOverride::plans().publish(std::move(rms));
  key.flags |= VariantKey::kHasBias;
  Plan ln;
  ln.key = key;
  ln.description = "test plan";
  LayerNormOverride::plans().publish(std::move(ln));
  EXPECT_EQ(servedPlanCount(), before + 2);
  // The norm tables are keyed with the flags: the cache's variant string round-trips them.
  const std::optional<VariantKey> back = parseVariantString(variantString(key), 0);
  ASSERT_TRUE(back.has_value());
  EXPECT_NE(LayerNormOverride::plans().load()->find(*back), nullptr);
  EXPECT_EQ(RmsNormOverride::plans().load()->find(*back), nullptr);  // weight only there
}

TEST(ServedOpsTest, GivenCrossEntropyLossWhenLookedUpThenServedByItsOverrideAndFamily) {
  EXPECT_EQ(servedOpOf("cross_entropy_loss"), ServedOp::CrossEntropy);
  EXPECT_EQ(servedOpOf("aten::cross_entropy_loss"), ServedOp::CrossEntropy);
  EXPECT_FALSE(servedOpOf("aten::nll_loss_forward").has_value());
  EXPECT_STREQ(servedOpName(ServedOp::CrossEntropy), "aten::cross_entropy_loss");
  EXPECT_STREQ(servedOpFamily(ServedOp::CrossEntropy), "cross_entropy");
  EXPECT_EQ(&plansOf(ServedOp::CrossEntropy), &CrossEntropyOverride::plans());
  const bool before = setServedOpsEnabled(false);
  EXPECT_FALSE(CrossEntropyOverride::enabled());
  setServedOpsEnabled(true);
  EXPECT_TRUE(CrossEntropyOverride::enabled());
  setServedOpsEnabled(before);
  // A cached entry's variant string lands under the key the trampoline looks up.
  VariantKey key{static_cast<int32_t>(kernels::DType::BFloat16), 0, 4096, 32000};
  key.flags = VariantKey::reductionFlags(1);
  const size_t plans = servedPlanCount();
  Plan p;
  p.key = *parseVariantString(variantString(key), 0);
  p.description = "test plan";
  CrossEntropyOverride::plans().publish(std::move(p));
  EXPECT_EQ(servedPlanCount(), plans + 1);
  EXPECT_NE(CrossEntropyOverride::plans().load()->find(key), nullptr);
}

TEST(ServedOpsTest, GivenTheLastDimReductionsWhenLookedUpThenServedByTheReduceOverrideAndTheirFamilies) {
  EXPECT_EQ(servedOpOf("sum.dim_IntList"), ServedOp::Sum);
  EXPECT_EQ(servedOpOf("aten::sum.dim_IntList"), ServedOp::Sum);
  EXPECT_EQ(servedOpOf("sum"), ServedOp::Sum);
  EXPECT_EQ(servedOpOf("aten::mean.dim"), ServedOp::Mean);
  EXPECT_EQ(servedOpOf("mean"), ServedOp::Mean);
  EXPECT_EQ(servedOpOf("amax"), ServedOp::Amax);
  EXPECT_EQ(servedOpOf("aten::argmax"), ServedOp::Argmax);
  EXPECT_FALSE(servedOpOf("aten::max").has_value());
  EXPECT_FALSE(servedOpOf("aten::sum.dim_DimnameList").has_value());
  EXPECT_STREQ(servedOpName(ServedOp::Sum), "aten::sum.dim_IntList");
  EXPECT_STREQ(servedOpName(ServedOp::Mean), "aten::mean.dim");
  EXPECT_STREQ(servedOpFamily(ServedOp::Amax), "amax_lastdim");
  EXPECT_STREQ(servedOpFamily(ServedOp::Argmax), "argmax_lastdim");
  EXPECT_EQ(reduceOpOf(ServedOp::Mean), kernels::ReduceOp::Mean);
  EXPECT_FALSE(reduceOpOf(ServedOp::Softmax).has_value());
  for (kernels::ReduceOp op : kernels::kAllReduceOps) {
    ServedOp served = *servedOpOf(ReduceOverride::opName(op));
    EXPECT_EQ(reduceOpOf(served), op);
    EXPECT_EQ(&plansOf(served), &ReduceOverride::plans(op));
  }
  const bool before = setServedOpsEnabled(false);
  EXPECT_FALSE(ReduceOverride::enabled());
  setServedOpsEnabled(true);
  EXPECT_TRUE(ReduceOverride::enabled());
  setServedOpsEnabled(before);
}

}  // namespace
}  // namespace hotkernel
