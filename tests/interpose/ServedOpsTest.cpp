// The served-op table (Note [The served-op table]): names in every spelling
// HOTKERNEL_OPS takes, each row's family and override state, the record
// names, the C API's plan count and switch over all rows.
#include <gtest/gtest.h>

#include <cstdlib>
#include <set>
#include <string>

#include "OverrideState.h"
#include "hotkernel/interpose/ServedOps.h"
#include "hotkernel/kernels/FamilyDescriptor.h"
#include "hotkernel/kernels/ReduceFamily.h"
#include "hotkernel/kernels/VariantOptions.h"
#include "hotkernel/runtime/Check.h"
#include "hotkernel/runtime/Config.h"

namespace hotkernel {
namespace {

TEST(ServedOpsTest, GivenOpNamesInEverySpellingWhenLookedUpThenTheirRow) {
  const ServedOp& rms = servedOp("aten::_fused_rms_norm");
  EXPECT_EQ(servedOpOf("_fused_rms_norm"), &rms);
  EXPECT_EQ(servedOpOf("aten::_fused_rms_norm"), &rms);
  EXPECT_EQ(servedOpOf("native_layer_norm"), &servedOp("aten::native_layer_norm"));
  EXPECT_EQ(servedOpOf("_softmax"), &servedOp("aten::_softmax"));
  EXPECT_EQ(servedOpOf("cross_entropy_loss"), &servedOp("aten::cross_entropy_loss"));
  // The reductions also without their overload.
  EXPECT_EQ(servedOpOf("sum.dim_IntList"), &servedOp("aten::sum.dim_IntList"));
  EXPECT_EQ(servedOpOf("sum"), &servedOp("aten::sum.dim_IntList"));
  EXPECT_EQ(servedOpOf("aten::mean"), &servedOp("aten::mean.dim"));
  EXPECT_EQ(servedOpOf("amax"), &servedOp("aten::amax"));
  EXPECT_EQ(servedOpOf("aten::argmax"), &servedOp("aten::argmax"));
  EXPECT_EQ(servedOpOf("amin"), &servedOp("aten::amin"));
  EXPECT_EQ(servedOpOf("aten::argmin"), &servedOp("aten::argmin"));
  EXPECT_NE(&servedOp("aten::amin"), &servedOp("aten::amax"));
  // max.dim / min.dim as the sums: "max" names the .dim overload, the one served.
  EXPECT_EQ(servedOpOf("aten::max.dim"), &servedOp("aten::max.dim"));
  EXPECT_EQ(servedOpOf("max"), &servedOp("aten::max.dim"));
  EXPECT_EQ(servedOpOf("aten::min"), &servedOp("aten::min.dim"));
  EXPECT_NE(&servedOp("aten::max.dim"), &servedOp("aten::min.dim"));
}

TEST(ServedOpsTest, GivenHotkernelOpsUnsetWhenTheDefaultIsReadThenARowServesEachOfItsOps) {
  const char* was = std::getenv("HOTKERNEL_OPS");
  const std::string saved = was != nullptr ? was : "";
  unsetenv("HOTKERNEL_OPS");
  const Config c = Config::fromEnvironment();
  if (was != nullptr) setenv("HOTKERNEL_OPS", saved.c_str(), 1);
  ASSERT_FALSE(c.ops.empty());
  for (const std::string& op : c.ops) EXPECT_NE(servedOpOf(op), nullptr) << op;
}

TEST(ServedOpsTest, GivenNamesNoRowHasWhenLookedUpThenNoneAndServedOpThrows) {
  for (const char* name : {"layer_norm", "aten::rms_norm", "aten::bmm", "aten::mm.out", "aten::max.other",
                           "aten::max.dim_max", "aten::min.names_dim",
                           "aten::sum.dim_DimnameList",
                           "aten::nll_loss_forward", "", "aten::"}) {
    EXPECT_EQ(servedOpOf(name), nullptr) << name;
  }
  EXPECT_THROW(servedOp("aten::bmm"), Error);
}

TEST(ServedOpsTest, GivenEveryRowWhenInspectedThenItsFamilyReproducesItAndNamesRoundTrip) {
  std::set<std::string> names, families;
  std::set<const OverrideState*> states;
  for (const ServedOp& op : servedOps()) {
    EXPECT_STREQ(op.name, op.family.atenOp);
    EXPECT_EQ(kernels::familyNamed(op.family.name), &op.family);
    EXPECT_EQ(servedOpOf(op.name), &op);
    EXPECT_EQ(op.recordName.rfind("aten::", 0), 0u) << op.recordName;
    EXPECT_EQ(std::string(op.name).rfind(op.recordName, 0), 0u) << op.name;
    EXPECT_NE(op.install, nullptr);
    EXPECT_NE(op.recordedKey, nullptr);
    names.insert(op.name);
    families.insert(op.family.name);
    states.insert(&op.state);
  }
  // One row, one family and one state per op.
  EXPECT_EQ(names.size(), servedOps().size());
  EXPECT_EQ(families.size(), servedOps().size());
  EXPECT_EQ(states.size(), servedOps().size());
  EXPECT_STREQ(servedOp("aten::_log_softmax").family.name, "log_softmax_lastdim");
  EXPECT_STREQ(servedOp("aten::cross_entropy_loss").family.name, "cross_entropy");
  EXPECT_EQ(servedOp("aten::sum.dim_IntList").recordName, "aten::sum");
  EXPECT_EQ(servedOp("aten::_softmax").recordName, "aten::_softmax");
}

TEST(ServedOpsTest, GivenTheSwitchWhenTurnedOffThenEveryOpReadsItAndItComesBack) {
  const bool before = setServedOpsEnabled(false);
  EXPECT_FALSE(servedOpsEnabled());
  EXPECT_FALSE(servingEnabled());
  EXPECT_FALSE(setServedOpsEnabled(true));
  EXPECT_TRUE(servedOpsEnabled());
  setServedOpsEnabled(before);
}

TEST(ServedOpsTest, GivenPlansPublishedUnderCachedVariantStringsWhenCountedThenEveryTableCountsAndKeysMatch) {
  const size_t before = servedPlanCount();
  VariantKey key{static_cast<int32_t>(kernels::DType::BFloat16), 0, 123457, 96};
  key.options = kernels::variant_options::kWeight;
  plansOf(servedOp("aten::_fused_rms_norm")).publish(Plan{key, nullptr, "test plan"});
  key.options |= kernels::variant_options::kBias;
  plansOf(servedOp("aten::native_layer_norm")).publish(Plan{key, nullptr, "test plan"});
  VariantKey ce{static_cast<int32_t>(kernels::DType::BFloat16), 0, 4096, 32000};
  ce.options = kernels::reductionOptions(1);
  plansOf(servedOp("aten::cross_entropy_loss"))
      .publish(Plan{*kernels::parseVariantString(kernels::variantString(ce), 0), nullptr, "test plan"});
  EXPECT_EQ(servedPlanCount(), before + 3);
  // A cached entry's variant string lands under the key the trampoline looks up.
  const std::optional<VariantKey> back = kernels::parseVariantString(kernels::variantString(key), 0);
  ASSERT_TRUE(back.has_value());
  EXPECT_NE(plansOf(servedOp("aten::native_layer_norm")).load()->find(*back), nullptr);
  EXPECT_EQ(plansOf(servedOp("aten::_fused_rms_norm")).load()->find(*back), nullptr);  // weight only there
  EXPECT_NE(plansOf(servedOp("aten::cross_entropy_loss")).load()->find(ce), nullptr);
  EXPECT_EQ(&plansOf(servedOp("aten::amax")), &servedOp("aten::amax").state.plans);
}

}  // namespace
}  // namespace hotkernel
