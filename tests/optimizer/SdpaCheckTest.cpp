// The attention family's checks (Note [Attention checks]) on the CPU: the
// float64 reference is PyTorch's math attention (causal top-left, grouped
// heads, every layout class); the CPU backends pass the checks; a result that
// reads a wrong mask, wrong heads or a wrong layout fails them; a cached
// choice is checked by its params.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <ATen/ops/_scaled_dot_product_attention_math.h>

#include <string>

#include "hotkernel/kernels/SdpaFamily.h"
#include "hotkernel/optimizer/FamilyTuning.h"
#include "hotkernel/optimizer/SdpaTuner.h"
#include "hotkernel/runtime/AttentionBackend.h"

namespace hotkernel {
namespace {

using kernels::DType;
using kernels::SdpaVariant;

SdpaInput draw(const SdpaVariant& v, uint64_t seed) {
  at::Generator gen = at::detail::createCPUGenerator(seed);
  return drawSdpaInput(v, -1, gen);
}

at::Tensor mathOf(const SdpaVariant& v, const SdpaInput& in) {
  return std::get<0>(at::_scaled_dot_product_attention_math(in.query, in.key, in.value, std::nullopt, 0.0, v.causal,
                                                            std::nullopt, std::nullopt, v.gqa()));
}

const SdpaVariant kVariants[] = {
    {DType::Float32, 2, 4, 4, 8, 8, 16, 16, {0, 0, 0}, false},
    {DType::Float32, 1, 4, 4, 6, 10, 16, 8, {1, 1, 1}, true},   // causal, fewer queries than keys
    {DType::Float32, 1, 4, 4, 10, 6, 16, 16, {2, 2, 2}, true},  // causal, more queries than keys
    {DType::Float32, 2, 8, 2, 5, 7, 8, 8, {1, 0, 2}, false},    // grouped heads, mixed layouts
    {DType::BFloat16, 1, 4, 4, 16, 16, 32, 32, {1, 1, 1}, true},
};

TEST(SdpaCheckTest, GivenEachLayoutClassWhenInputsAreDrawnThenTheyHaveThatClass) {
  for (const SdpaVariant& v : kVariants) {
    const SdpaInput in = draw(v, 1);
    const std::vector<int64_t> q(in.query.sizes().begin(), in.query.sizes().end());
    EXPECT_EQ(kernels::sdpaLayoutOf(q, std::vector<int64_t>(in.query.strides().begin(), in.query.strides().end())),
              v.layouts[0]);
    const std::vector<int64_t> k(in.key.sizes().begin(), in.key.sizes().end());
    EXPECT_EQ(kernels::sdpaLayoutOf(k, std::vector<int64_t>(in.key.strides().begin(), in.key.strides().end())),
              v.layouts[1]);
    const std::vector<int64_t> val(in.value.sizes().begin(), in.value.sizes().end());
    EXPECT_EQ(kernels::sdpaLayoutOf(val, std::vector<int64_t>(in.value.strides().begin(), in.value.strides().end())),
              v.layouts[2]);
  }
}

TEST(SdpaCheckTest, GivenVariantsWhenTheReferenceIsComputedThenItIsPyTorchsMathAttentionInFloat64) {
  for (const SdpaVariant& v : kVariants) {
    const SdpaInput in = draw(v, 2);
    const SdpaInput in64{in.query.to(at::kDouble), in.key.to(at::kDouble), in.value.to(at::kDouble)};
    const at::Tensor ref = sdpaReference(v, in);
    ASSERT_EQ(ref.scalar_type(), at::kDouble);
    EXPECT_TRUE(at::allclose(ref, mathOf(v, in64), 1e-12, 1e-12)) << v.queries << "x" << v.keys;
  }
}

TEST(SdpaCheckTest, GivenTheCpuBackendsWhenCheckedOnEachVariantThenTheyPassWhereTheyTakeIt) {
  for (const SdpaVariant& v : kVariants) {
    EXPECT_EQ(checkSdpaBackend(AttentionBackend::Math, v, -1), "") << v.queries << "x" << v.keys;
    const std::string flash = checkSdpaBackend(AttentionBackend::FlashCpu, v, -1);
    if (v.valueDim == v.headDim) {
      EXPECT_EQ(flash, "") << v.queries << "x" << v.keys;
    } else {
      // flash_cpu takes one head size for q, k and v: it refuses, and that is the reason given.
      EXPECT_NE(flash.find("the backend refused the call"), std::string::npos) << flash;
    }
  }
}

TEST(SdpaCheckTest, GivenABackendOfAnotherDeviceWhenCheckedThenItIsRefusedWithItsReason) {
  EXPECT_EQ(checkSdpaBackend(AttentionBackend::Cudnn, kVariants[0], -1), "the backend does not run on this device");
}

TEST(SdpaCheckTest, GivenResultsThatReadTheWrongMaskHeadsOrLayoutWhenCheckedThenTheyFail) {
  // A causal variant computed without the mask.
  {
    const SdpaVariant v = kVariants[1];
    const SdpaInput in = draw(v, 3);
    SdpaVariant unmasked = v;
    unmasked.causal = false;
    const std::string why = sdpaValuesWithinBound(v, in, mathOf(unmasked, in), mathOf(v, in));
    EXPECT_NE(why.find("outside the bound"), std::string::npos) << why;
  }
  // Grouped heads mapped round robin (h % kvHeads) instead of by group (h / group).
  {
    const SdpaVariant v = kVariants[3];
    const SdpaInput in = draw(v, 4);
    const int64_t group = v.heads / v.kvHeads;
    const at::Tensor k = in.key.repeat({1, group, 1, 1}), val = in.value.repeat({1, group, 1, 1});
    SdpaVariant plain = v;
    plain.kvHeads = v.heads;
    const at::Tensor roundRobin = mathOf(plain, SdpaInput{in.query, k, val});
    EXPECT_NE(sdpaValuesWithinBound(v, in, roundRobin, mathOf(v, in)), "");
    // The grouped mapping itself passes.
    const at::Tensor grouped =
        mathOf(plain, SdpaInput{in.query, in.key.repeat_interleave(group, 1), in.value.repeat_interleave(group, 1)});
    EXPECT_EQ(sdpaValuesWithinBound(v, in, grouped, mathOf(v, in)), "");
  }
  // Keys read as if their rows were the heads' (a layout misread).
  {
    const SdpaVariant v = kVariants[0];
    const SdpaInput in = draw(v, 5);
    const at::Tensor misread = in.key.contiguous().view({v.batch, v.keys, v.kvHeads, v.headDim}).transpose(1, 2);
    const at::Tensor got = mathOf(v, SdpaInput{in.query, misread, in.value});
    EXPECT_NE(sdpaValuesWithinBound(v, in, got, mathOf(v, in)), "");
  }
  // An element never written (NaN) where the reference is finite.
  {
    const SdpaVariant v = kVariants[4];
    const SdpaInput in = draw(v, 6);
    at::Tensor got = mathOf(v, in).clone();
    got.view(-1).index_put_({7}, NAN);
    EXPECT_NE(sdpaValuesWithinBound(v, in, got, mathOf(v, in)).find("1 element(s)"), std::string::npos);
  }
}

TEST(SdpaCheckTest, GivenCachedChoicesWhenCheckedThenOnlyAReadableChoiceOfAPassingBackendIsKept) {
  const VariantKey key = kernels::sdpaKeyOf(kVariants[1], -1);
  const std::string math = kernels::SdpaParams{AttentionBackend::Math}.toJson().dump();
  EXPECT_EQ(checkCachedSdpa(key, math, "", TunerOptions{}), "");
  EXPECT_NE(checkCachedSdpa(key, math, "cubin", TunerOptions{}), "");
  EXPECT_NE(checkCachedSdpa(key, R"({"format":"hotkernel-attention-choice","version":1,"backend":"tensorrt"})", "",
                            TunerOptions{}),
            "");
  EXPECT_NE(checkCachedSdpa(key, "{", "", TunerOptions{}), "");
  const std::string cudnn = kernels::SdpaParams{AttentionBackend::Cudnn}.toJson().dump();
  EXPECT_NE(checkCachedSdpa(key, cudnn, "", TunerOptions{}), "");
  // The family's own check, as the engine finds it.
  EXPECT_EQ(ownCachedCheckOf(kernels::sdpaDescriptor()), &checkCachedSdpa);
}

}  // namespace
}  // namespace hotkernel
