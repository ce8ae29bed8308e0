// The per-call cost model the roofline is computed from.

#include <gtest/gtest.h>

#include "hotkernel/kernels/CrossEntropyFamily.h"
#include "hotkernel/kernels/DType.h"
#include "hotkernel/kernels/ReduceFamily.h"
#include "hotkernel/kernels/VariantOptions.h"
#include "hotkernel/optimizer/TargetCost.h"

namespace hotkernel {
namespace {

constexpr int32_t kBf16 = static_cast<int32_t>(kernels::DType::BFloat16);
constexpr int32_t kF32 = static_cast<int32_t>(kernels::DType::Float32);

TEST(TargetCostTest, GivenSoftmaxVariantWhenCostedThenInputReadAndOutputWrittenOnceNoFlops) {
  std::optional<CallCost> c = callCost("aten::_softmax", VariantKey{kBf16, 0, 4096, 32000});
  ASSERT_TRUE(c.has_value());
  EXPECT_DOUBLE_EQ(c->bytes, 2.0 * 4096 * 32000 * 2);
  EXPECT_DOUBLE_EQ(c->flops, 0);  // Note [Memory-bound families have no FLOP term]
  std::optional<CallCost> f = callCost("aten::_log_softmax", VariantKey{kF32, 0, 8, 1000});
  ASSERT_TRUE(f.has_value());
  EXPECT_DOUBLE_EQ(f->bytes, 2.0 * 8 * 1000 * 4);
}

TEST(TargetCostTest, GivenNormVariantsWhenCostedThenRowsReadAndWrittenPlusColumnsAndStatistics) {
  VariantKey rms{kBf16, 0, 4096, 4096};
  rms.options = kernels::variant_options::kWeight;
  std::optional<CallCost> r = callCost("aten::_fused_rms_norm", rms);
  ASSERT_TRUE(r.has_value());
  // x read, out written, the weight read once, rstd written (4 bytes a row).
  EXPECT_DOUBLE_EQ(r->bytes, 2.0 * 4096 * 4096 * 2 + 4096 * 2 + 4096 * 4);
  EXPECT_DOUBLE_EQ(r->flops, 0);
  VariantKey ln{kF32, 0, 32, 4096};
  ln.options = kernels::variant_options::kWeight | kernels::variant_options::kBias;
  std::optional<CallCost> l = callCost("aten::native_layer_norm", ln);
  ASSERT_TRUE(l.has_value());
  // ... weight and bias, mean and rstd (8 bytes a row).
  EXPECT_DOUBLE_EQ(l->bytes, 2.0 * 32 * 4096 * 4 + 2 * 4096 * 4 + 32 * 8);
  std::optional<CallCost> plain = callCost("aten::native_layer_norm", VariantKey{kF32, 0, 32, 4096});
  ASSERT_TRUE(plain.has_value());
  EXPECT_DOUBLE_EQ(plain->bytes, 2.0 * 32 * 4096 * 4 + 32 * 8);
}

TEST(TargetCostTest, GivenCrossEntropyVariantsWhenCostedThenTheFamilysBytesAndNoFlops) {
  for (int32_t r = 0; r < 3; ++r) {
    VariantKey k{kBf16, 0, 4096, 32000};
    k.options = kernels::reductionOptions(r);
    const std::optional<CallCost> c = callCost("aten::cross_entropy_loss", k);
    ASSERT_TRUE(c.has_value()) << r;
    const kernels::CrossEntropyVariant v{kernels::DType::BFloat16, 4096, 32000,
                                         static_cast<kernels::CrossEntropyReduction>(r)};
    EXPECT_DOUBLE_EQ(c->bytes, kernels::CrossEntropyFamily::bytesMoved(v));
    EXPECT_GE(c->bytes, 2.0 * 4096 * 32000);  // the logits, read once
    EXPECT_DOUBLE_EQ(c->flops, 0.0);
  }
  // No reduction in the key (not a cross_entropy_loss variant), or a weight flag: nothing.
  EXPECT_FALSE(callCost("aten::cross_entropy_loss", VariantKey{kBf16, 0, 64, 64}).has_value());
  VariantKey weighted{kBf16, 0, 64, 64};
  weighted.options = kernels::reductionOptions(1) | kernels::variant_options::kWeight;
  EXPECT_FALSE(callCost("aten::cross_entropy_loss", weighted).has_value());
}

TEST(TargetCostTest, GivenReductionVariantsWhenCostedThenTheInputReadOnceAndOneResultARow) {
  for (kernels::ReduceOp op : kernels::kAllReduceOps) {
    const std::optional<CallCost> c = callCost(kernels::reduceAtenOpName(op), VariantKey{kBf16, 0, 4096, 32000});
    ASSERT_TRUE(c.has_value()) << kernels::reduceAtenOpName(op);
    const kernels::ReduceOpInfo& info = kernels::reduceOpInfo(op);
    const double out = info.pair ? 2.0 + 8.0 : info.index ? 8.0 : 2.0;  // a pair: a value and an index
    EXPECT_DOUBLE_EQ(c->bytes, 4096.0 * 32000 * 2 + 4096 * out);
    EXPECT_DOUBLE_EQ(c->flops, 0.0);
  }
  // The RecordFunction name without the overload is not a served op; flags are not a reduction's.
  EXPECT_FALSE(callCost("aten::sum", VariantKey{kBf16, 0, 64, 64}).has_value());
  VariantKey weighted{kBf16, 0, 64, 64};
  weighted.options = kernels::variant_options::kWeight;
  EXPECT_FALSE(callCost("aten::amax", weighted).has_value());
}

TEST(TargetCostTest, GivenFlagsTheOpDoesNotTakeWhenCostedThenNothing) {
  VariantKey biased{kBf16, 0, 64, 64};
  biased.options = kernels::variant_options::kBias;
  EXPECT_FALSE(callCost("aten::_fused_rms_norm", biased).has_value());  // rms_norm has no bias
  VariantKey weighted{kBf16, 0, 64, 64};
  weighted.options = kernels::variant_options::kWeight;
  EXPECT_FALSE(callCost("aten::_softmax", weighted).has_value());
}

TEST(TargetCostTest, GivenUnknownOpOrUnservableVariantWhenCostedThenNothing) {
  EXPECT_FALSE(callCost("aten::mm", VariantKey{kBf16, 0, 64, 64}).has_value());
  EXPECT_FALSE(callCost("aten::_softmax", VariantKey{kBf16, 0, 0, 64}).has_value());
}

}  // namespace
}  // namespace hotkernel
