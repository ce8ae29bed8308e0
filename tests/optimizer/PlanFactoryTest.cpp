// The parts of the plan factory that need no GPU: the cache's variant strings
// and the checks that run before a cubin is loaded.
#include <gtest/gtest.h>

#include <string>
#include <utility>

#include "hotkernel/kernels/FamilyDescriptor.h"
#include "hotkernel/kernels/CrossEntropyFamily.h"
#include "hotkernel/kernels/LayerNormFamily.h"
#include "hotkernel/kernels/ReduceDimFamily.h"
#include "hotkernel/kernels/ReduceFamily.h"
#include "hotkernel/kernels/RmsNormFamily.h"
#include "hotkernel/kernels/SoftmaxDimFamily.h"
#include "hotkernel/kernels/SoftmaxFamily.h"
#include "hotkernel/kernels/VariantOptions.h"
#include "hotkernel/optimizer/PlanFactory.h"
#include "hotkernel/runtime/Check.h"

namespace hotkernel {
namespace {

using kernels::DType;

TEST(PlanFactoryTest, GivenSoftmaxKeyWhenFormattedThenVariantStringIsUnchanged) {
  const VariantKey k{static_cast<int32_t>(DType::BFloat16), 0, 4096, 32000};
  EXPECT_EQ(kernels::variantString(k), "dtype=bfloat16;rows=4096;cols=32000");
}

TEST(PlanFactoryTest, GivenNormKeysWhenFormattedAndParsedThenFlagsRoundTrip) {
  for (int32_t flags : {0, kernels::variant_options::kWeight, kernels::variant_options::kBias,
                        kernels::variant_options::kWeight | kernels::variant_options::kBias}) {
    VariantKey k{static_cast<int32_t>(DType::Float16), 3, 16384, 8192};
    k.options = flags;
    const std::string s = kernels::variantString(k);
    std::optional<VariantKey> back = kernels::parseVariantString(s, 3);
    ASSERT_TRUE(back.has_value()) << s;
    EXPECT_TRUE(*back == k) << s;
  }
  VariantKey both{static_cast<int32_t>(DType::Float32), 0, 2, 7};
  both.options = kernels::variant_options::kWeight | kernels::variant_options::kBias;
  EXPECT_EQ(kernels::variantString(both), "dtype=float32;rows=2;cols=7;weight=1;bias=1");
}

TEST(PlanFactoryTest, GivenMalformedVariantStringsWhenParsedThenRefused) {
  for (const char* s : {"", "dtype=bf16;rows=4", "dtype=bf16;rows=0;cols=4", "dtype=int8;rows=1;cols=4",
                        "dtype=bf16;rows=x;cols=4", "dtype=bf16;rows=1;cols=4;weight=2", "dtype=bf16;rows"}) {
    EXPECT_FALSE(kernels::parseVariantString(s, 0).has_value()) << s;
  }
  EXPECT_TRUE(kernels::parseVariantString("dtype=bf16;rows=1;cols=4;weight=0", 0).has_value());
}

TEST(PlanFactoryTest, GivenMiddleDimKeysWhenFormattedAndParsedThenInnerRoundTripsAndTwoExtentStringsAreUnchanged) {
  VariantKey k{static_cast<int32_t>(DType::Float32), 2, 64, 4096};
  EXPECT_EQ(kernels::variantString(k), "dtype=float32;rows=64;cols=4096");
  EXPECT_EQ(kernels::rowLength(k), 4096);
  k.inner = 1024;
  EXPECT_EQ(kernels::rowLength(k), 4096 * 1024);  // the timed input's [64, 4096 * 1024] rows
  const std::string s = kernels::variantString(k);
  EXPECT_EQ(s, "dtype=float32;rows=64;cols=4096;inner=1024");
  const std::optional<VariantKey> back = kernels::parseVariantString(s, 2);
  ASSERT_TRUE(back.has_value());
  EXPECT_TRUE(*back == k);
  const std::optional<VariantKey> plain = kernels::parseVariantString("dtype=float32;rows=64;cols=4096", 2);
  ASSERT_TRUE(plain.has_value());
  EXPECT_EQ(plain->inner, 0);
  for (const char* bad : {"dtype=float32;rows=64;cols=4096;inner=0", "dtype=float32;rows=64;cols=4096;inner=1",
                          "dtype=float32;rows=64;cols=4096;inner=-8", "dtype=float32;rows=64;cols=4096;inner=8x",
                          "dtype=float32;rows=64;cols=4096;inner="}) {
    EXPECT_FALSE(kernels::parseVariantString(bad, 0).has_value()) << bad;
  }
}

TEST(PlanFactoryTest, GivenNormParamsThatDoNotFitWhenMakingPlansThenErrorBeforeAnyLoad) {
  VariantKey k{static_cast<int32_t>(DType::BFloat16), 0, 64, 4097};  // 4097: no vector width divides it
  k.options = kernels::variant_options::kWeight;
  const kernels::NormParams wide{256, 8, 4, 1};
  EXPECT_THROW(kernels::rmsNormDescriptor().makePlan(k, wide.toJson(), "not a cubin", 0), Error);
  EXPECT_THROW(kernels::layerNormDescriptor().makePlan(k, wide.toJson(), "not a cubin", 0), Error);
  VariantKey withBias = k;
  withBias.options |= kernels::variant_options::kBias;
  const kernels::NormParams scalarPoint{256, 1, 0, 1};
  EXPECT_THROW(kernels::rmsNormDescriptor().makePlan(withBias, scalarPoint.toJson(), "not a cubin", 0), Error);  // rms_norm has no bias
  EXPECT_THROW(makePlan("rms_norm", k, wide.toJson(), "hk_other", "not a cubin", 0), Error);
  EXPECT_THROW(makePlan("group_norm", k, wide.toJson(), "", "not a cubin", 0), Error);
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

// Note [A family's plan]: the guard refuses before the cubin is loaded (the
// load of "not a cubin" would fail with another message), and names the family.
TEST(PlanFactoryTest, GivenSoftmaxParamsThatDoNotFitWhenMakingPlansThenTheGuardRefusesNamingTheFamily) {
  const VariantKey k{static_cast<int32_t>(DType::BFloat16), 0, 64, 4097};  // 4097: no vector width divides it
  const kernels::SoftmaxParams wide{256, 8, 4};
  for (auto [op, name] : {std::pair{kernels::SoftmaxOp::Softmax, "softmax_lastdim"},
                          std::pair{kernels::SoftmaxOp::LogSoftmax, "log_softmax_lastdim"}}) {
    const std::string what = errorOf([&] { kernels::softmaxDescriptor(op).makePlan(k, wide.toJson(), "not a cubin", 0); });
    EXPECT_NE(what.find(std::string("do not fit ") + name + " "), std::string::npos) << what;
  }
  const kernels::NormParams normWide{256, 8, 4, 1};
  VariantKey nk = k;
  nk.options = kernels::variant_options::kWeight;
  EXPECT_NE(errorOf([&] { kernels::rmsNormDescriptor().makePlan(nk, normWide.toJson(), "not a cubin", 0); }).find("do not fit rms_norm "),
            std::string::npos);
  EXPECT_NE(errorOf([&] { kernels::layerNormDescriptor().makePlan(nk, normWide.toJson(), "not a cubin", 0); }).find("do not fit layer_norm "),
            std::string::npos);
}

TEST(PlanFactoryTest, GivenCrossEntropyKeysWhenFormattedAndParsedThenReductionRoundTrips) {
  const char* names[] = {"none", "mean", "sum"};
  for (int32_t r = 0; r < 3; ++r) {
    VariantKey k{static_cast<int32_t>(DType::BFloat16), 1, 4096, 32000};
    k.options = kernels::reductionOptions(r);
    EXPECT_EQ(kernels::reductionOf(k), r);
    const std::string s = kernels::variantString(k);
    EXPECT_EQ(s, std::string("dtype=bfloat16;rows=4096;cols=32000;reduction=") + names[r]);
    std::optional<VariantKey> back = kernels::parseVariantString(s, 1);
    ASSERT_TRUE(back.has_value()) << s;
    EXPECT_TRUE(*back == k) << s;
  }
  // Keys of other ops hold no reduction; a key for "none" differs from a softmax key of the same shape.
  const VariantKey softmax{static_cast<int32_t>(DType::BFloat16), 1, 4096, 32000};
  EXPECT_EQ(kernels::reductionOf(softmax), -1);
  VariantKey none = softmax;
  none.options = kernels::reductionOptions(0);
  EXPECT_FALSE(none == softmax);
  EXPECT_FALSE(kernels::parseVariantString("dtype=bf16;rows=1;cols=4;reduction=max", 0).has_value());
  EXPECT_FALSE(kernels::parseVariantString("dtype=bf16;rows=1;cols=4;reduction=", 0).has_value());
}

TEST(PlanFactoryTest, GivenCrossEntropyParamsThatDoNotFitWhenMakingPlansThenErrorBeforeAnyLoad) {
  VariantKey k{static_cast<int32_t>(DType::BFloat16), 0, 64, 4097};  // 4097: only vec = 1 fits
  k.options = kernels::reductionOptions(1);
  kernels::CrossEntropyParams wide;
  wide.threads = 256;
  wide.vec = 8;
  wide.unroll = 2;
  EXPECT_THROW(kernels::crossEntropyDescriptor().makePlan(k, wide.toJson(), "not a cubin", 0), Error);
  EXPECT_THROW(makePlan("cross_entropy", k, wide.toJson(), "hk_other", "not a cubin", 0), Error);
  VariantKey noReduction = k;
  noReduction.options = 0;  // a softmax-style key: not a cross_entropy_loss variant
  kernels::CrossEntropyParams scalarPoint;
  scalarPoint.threads = 256;
  EXPECT_THROW(kernels::crossEntropyDescriptor().makePlan(noReduction, scalarPoint.toJson(), "not a cubin", 0), Error);
  VariantKey withWeight = k;
  withWeight.options |= kernels::variant_options::kWeight;
  EXPECT_THROW(kernels::crossEntropyDescriptor().makePlan(withWeight, scalarPoint.toJson(), "not a cubin", 0), Error);
}

TEST(PlanFactoryTest, GivenReductionParamsThatDoNotFitOrFlaggedKeysWhenMakingPlansThenErrorBeforeAnyLoad) {
  const VariantKey k{static_cast<int32_t>(DType::BFloat16), 0, 64, 4097};  // 4097: only vec = 1 fits
  const kernels::ReduceParams wide{256, 8, 2, 1};
  for (kernels::ReduceOp op : kernels::kAllReduceOps) {
    EXPECT_THROW(kernels::reduceDescriptor(op).makePlan(k, wide.toJson(), "not a cubin", 0), Error);
    EXPECT_THROW(makePlan(kernels::reduceFamilyName(op), k, wide.toJson(), "", "not a cubin", 0), Error);
  }
  const kernels::ReduceParams scalarPoint{256, 1, 4, 1};
  EXPECT_THROW(makePlan("sum_lastdim", k, scalarPoint.toJson(), "hk_other", "not a cubin", 0), Error);
  EXPECT_THROW(makePlan("sum_lastdim", k, nlohmann::json{{"threads", 256}}, "", "not a cubin", 0), Error);
  VariantKey flagged = k;
  flagged.options = kernels::variant_options::kWeight;  // a norm key: not a reduction variant
  EXPECT_THROW(kernels::reduceDescriptor(kernels::ReduceOp::Amax).makePlan(flagged, scalarPoint.toJson(), "not a cubin", 0), Error);
  // A reduction key is a plain (dtype, rows, cols) key: its variant string is softmax's.
  EXPECT_EQ(kernels::variantString(k), "dtype=bfloat16;rows=64;cols=4097");
}

// Notes [Two layouts, one family] and [Two softmax layouts]: a middle-dim
// key's entry is made into a plan only by the families with a middle-dim
// kernel (the reductions and the softmax ops), with that kernel's name and
// params; the families without one (the norms, cross_entropy) and agent
// entries refuse it before any load.
TEST(PlanFactoryTest, GivenMiddleDimEntriesWhenMakingPlansThenOnlyTheFamiliesWithAMiddleDimKernelTakeThemWithThatKernel) {
  VariantKey k{static_cast<int32_t>(DType::BFloat16), 0, 64, 4097};
  k.inner = 1023;  // only vec = 1 fits
  // The reductions: the middle-dim params are guarded (the load of "not a
  // cubin" would fail with another message), the last-dim kernel is refused.
  const kernels::ReduceDimParams wide{32, 8, 4};
  const kernels::ReduceDimParams scalarPoint{32, 8, 1};
  for (kernels::ReduceOp op : kernels::kAllReduceOps) {
    const std::string family = kernels::reduceFamilyName(op);
    EXPECT_TRUE(kernels::familyNamed(family)->servesKey(k)) << family;
    EXPECT_NE(errorOf([&] { makePlan(family, k, wide.toJson(), "hk_reduce_dim", "not a cubin", 0); }).find("do not fit"),
              std::string::npos)
        << family;
    EXPECT_NE(errorOf([&] { makePlan(family, k, scalarPoint.toJson(), "hk_reduce_lastdim", "not a cubin", 0); })
                  .find("unexpected kernel name"),
              std::string::npos)
        << family;
  }
  // softmax and log_softmax: the same through their middle-dim layout; a
  // last-dim entry's params are not middle-dim params.
  const kernels::SoftmaxDimParams softmaxWide{32, 8, 4};
  const kernels::SoftmaxDimParams softmaxScalar{32, 8, 1};
  for (const char* family : {"softmax_lastdim", "log_softmax_lastdim"}) {
    EXPECT_TRUE(kernels::familyNamed(family)->servesKey(k)) << family;
    EXPECT_STREQ(kernels::kernelNameFor(*kernels::familyNamed(family), k), kernels::SoftmaxDimFamily::kKernelName);
    const std::string tooWide =
        errorOf([&] { makePlan(family, k, softmaxWide.toJson(), "hk_softmax_dim", "not a cubin", 0); });
    // Named by the middle-dim kernel: "softmax_dim" for the "softmax_lastdim" family.
    const std::string kernel = std::string(family).substr(0, std::string(family).find("_lastdim")) + "_dim";
    EXPECT_NE(tooWide.find("do not fit " + kernel + " "), std::string::npos) << tooWide;
    EXPECT_NE(tooWide.find(";inner=1023"), std::string::npos) << tooWide;
    EXPECT_NE(errorOf([&] { makePlan(family, k, softmaxScalar.toJson(), "hk_softmax_lastdim", "not a cubin", 0); })
                  .find("unexpected kernel name"),
              std::string::npos)
        << family;
    EXPECT_NE(errorOf([&] { makePlan(family, k, kernels::SoftmaxParams{256, 1, 0}.toJson(), "", "not a cubin", 0); })
                  .find("middle-dim params misses"),
              std::string::npos)
        << family;
  }
  // The families without a middle-dim kernel.
  VariantKey normKey = k;
  normKey.options = kernels::variant_options::kWeight;
  const kernels::NormParams normScalar{256, 1, 0, 1};
  for (const char* family : {"rms_norm", "layer_norm"}) {
    EXPECT_FALSE(kernels::familyNamed(family)->servesKey(normKey)) << family;
    EXPECT_NE(errorOf([&] { makePlan(family, normKey, normScalar.toJson(), "", "not a cubin", 0); }).find("does not serve"),
              std::string::npos)
        << family;
  }
  VariantKey lossKey = k;
  lossKey.options = kernels::reductionOptions(1);
  kernels::CrossEntropyParams lossScalar;
  lossScalar.threads = 256;
  EXPECT_FALSE(kernels::crossEntropyDescriptor().servesKey(lossKey));
  EXPECT_NE(errorOf([&] { makePlan("cross_entropy", lossKey, lossScalar.toJson(), "", "not a cubin", 0); })
                .find("does not serve"),
            std::string::npos);
  EXPECT_NE(errorOf([&] { makePlan("agent", k, nlohmann::json{{"launch", nlohmann::json::object()}}, "k", "x", 0); })
                .find("inner extent"),
            std::string::npos);
  // The same keys without an inner extent are served by all of them: the refusals above are the inner extent's.
  VariantKey lastDim = normKey;
  lastDim.inner = 0;
  lastDim.cols = 4096;
  EXPECT_TRUE(kernels::rmsNormDescriptor().servesKey(lastDim));
  EXPECT_TRUE(kernels::layerNormDescriptor().servesKey(lastDim));
  lastDim.options = kernels::reductionOptions(1);
  EXPECT_TRUE(kernels::crossEntropyDescriptor().servesKey(lastDim));
}

}  // namespace
}  // namespace hotkernel
