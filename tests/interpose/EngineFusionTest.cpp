// The engine's device-free decisions about a hot chain (interpose/engine/EngineFusion.h): the variant it
// looks up, caches, tunes and plans.
#include <gtest/gtest.h>

#include <string>

#include "EngineFusion.h"
#include "hotkernel/chain/ChainBuilder.h"
#include "hotkernel/chain/ChainVariant.h"
#include "hotkernel/chain/NamedChains.h"

namespace hotkernel::engine {
namespace {

fusion::HotChain hotChainOf(const std::vector<chain::RecordedCall>& calls, const chain::TensorMetas& metas,
                            const std::vector<int64_t>& live) {
  fusion::HotChain hot;
  // As the learner builds it (Note [Learning chains]): with layouts.
  hot.build = chain::buildChain(calls, metas, live, chain::ChainBuildOptions{/*layouts=*/true});
  hot.device = 0;
  return hot;
}

TEST(EngineFusionTest, GivenHfRotaryLearnedInItsStridedLayoutWhenItsVariantIsMadeThenItCarriesTheLayout) {
  const chain::RotaryShape shape{2, 4, 8, 32};
  const chain::RecordedChain r = chain::rotaryRecording(chain::DType::BFloat16, shape);
  const fusion::HotChain hot = hotChainOf(r.calls, r.metas, {10});
  ASSERT_TRUE(hot.build.ok()) << hot.build.reason;
  const chain::ChainVariant v = chainVariantOf(hot);
  EXPECT_EQ(v.layout, chain::rotaryLayout(shape));
  EXPECT_FALSE(v.layout.contiguous());
  EXPECT_EQ(v.rows, chain::rotaryRows(shape));
  EXPECT_EQ(v.cols, shape.headDim);
  EXPECT_EQ(v.device, 0);
  // The cache key names the layout: the same chain over contiguous memory is another entry.
  EXPECT_NE(chain::chainVariantString(v).find(";layout=" + chain::layoutText(v.layout)), std::string::npos)
      << chain::chainVariantString(v);
}

TEST(EngineFusionTest, GivenAContiguousChainWhenItsVariantIsMadeThenItHasTheEmptyLayout) {
  // SwiGLU on contiguous [16, 64] bf16 values: silu(%0) * %2.
  using A = chain::RecordedArg;
  const std::vector<chain::RecordedCall> calls = {{"aten::silu", {A::tensor(0)}, {1}},
                                                  {"aten::mul.Tensor", {A::tensor(1), A::tensor(2)}, {3}}};
  chain::TensorMetas metas;
  for (int64_t id : {0, 1, 2, 3}) metas[id] = chain::TensorMeta{"bfloat16", {16, 64}, {64, 1}};
  const fusion::HotChain hot = hotChainOf(calls, metas, {3});
  ASSERT_TRUE(hot.build.ok()) << hot.build.reason;
  const chain::ChainVariant v = chainVariantOf(hot);
  EXPECT_TRUE(v.layout.contiguous());
  EXPECT_EQ(chain::chainVariantString(v).find(";layout="), std::string::npos);
}

}  // namespace
}  // namespace hotkernel::engine
