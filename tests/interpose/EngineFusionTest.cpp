// The engine's device-free decisions about a hot chain (interpose/engine/EngineFusion.h): the variant it
// looks up, caches, tunes and plans.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "EngineFusion.h"
#include "hotkernel/chain/ChainBuilder.h"
#include "hotkernel/chain/ChainParameterSpace.h"
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

// Note [Ops a chain lets pass]: a ResNet downsampling block's tail as CUDA records it (bf16 x and per-channel
// values, the batch norms' save_mean / save_invstd [C] float32): bn3 of %1, the shortcut's batch norm of the
// convolution's output %11, `%6 += %16`, ReLU. Its variant is the batch norm view and it has kernels to tune.
TEST(EngineFusionTest, GivenADownsamplingTailRecordedOnCudaWhenItsVariantIsMadeThenItHasAParameterSpace) {
  using A = chain::RecordedArg;
  const int64_t n = 8, c = 64, hw = 196;
  const auto norm = [](int64_t x, int64_t first, std::vector<int64_t> results) {
    return chain::RecordedCall{"aten::native_batch_norm",
                               {A::tensor(x), A::tensor(first), A::tensor(first + 1), A::tensor(first + 2),
                                A::tensor(first + 3), A::boolean(false), A::number(0.1), A::number(1e-5)},
                               std::move(results)};
  };
  const std::vector<chain::RecordedCall> calls = {
      norm(1, 2, {6, 7, 8}), norm(11, 12, {16, 17, 18}),
      {"aten::add_.Tensor", {A::tensor(6), A::tensor(16), A::number(1)}, {20}},
      {"aten::relu", {A::tensor(20)}, {21}}};
  const chain::TensorMeta full{"bfloat16", {n, c, 14, 14}, {c * hw, hw, 14, 1}};
  const chain::TensorMeta channel{"bfloat16", {c}, {1}}, stat{"float32", {c}, {1}};
  chain::TensorMetas metas;
  for (int64_t id : {1, 6, 11, 16, 20, 21}) metas[id] = full;
  for (int64_t id : {2, 3, 4, 5, 12, 13, 14, 15}) metas[id] = channel;
  for (int64_t id : {7, 8, 17, 18}) metas[id] = stat;
  const fusion::HotChain hot = hotChainOf(calls, metas, {21});
  ASSERT_TRUE(hot.build.ok()) << hot.build.reason;
  const chain::ChainVariant v = chainVariantOf(hot);
  EXPECT_EQ(v.rows, n * c);
  EXPECT_EQ(v.cols, hw);
  EXPECT_FALSE(chain::chainParameterSpace(v.ir, v.rows, v.cols, v.layout).empty()) << chain::layoutText(v.layout);
}

}  // namespace
}  // namespace hotkernel::engine
