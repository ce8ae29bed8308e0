// The chain catalog's index of first steps (Note [The chain catalog]): the
// ops that start a chain, as the engine asks before capturing a call for a
// match, kept true when a chain is added or replaced.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "hotkernel/interpose/ChainCatalog.h"

using namespace hotkernel;
using namespace hotkernel::fusion;

namespace {

// A chain whose calls are `ops` (one value in, one out each), keyed `key`.
ReadyChain chainOf(const std::vector<std::string>& ops, const std::string& key) {
  ReadyChain c;
  for (size_t i = 0; i < ops.size(); ++i) {
    chain::RecordedCall call;
    call.op = ops[i];
    call.args.push_back(chain::RecordedArg::tensor(static_cast<int64_t>(i)));
    call.outputs.push_back(static_cast<int64_t>(i + 1));
    c.pattern.calls.push_back(call);
  }
  for (size_t i = 0; i <= ops.size(); ++i) {
    chain::TensorMeta m;
    m.sizes = {8, 64};
    m.strides = {64, 1};
    m.scalarType = "float32";
    c.pattern.metas[static_cast<int64_t>(i)] = m;
  }
  c.key = key;
  return c;
}

}  // namespace

TEST(ChainCatalogTest, GivenAnEmptyCatalogWhenAskedForAnyOpThenNoneStartsAChain) {
  const ChainCatalog empty;
  EXPECT_FALSE(empty.startsWithOp("aten::silu"));
  EXPECT_TRUE(empty.chains().empty());
}

TEST(ChainCatalogTest, GivenTwoChainsWhenAskedThenOnlyTheirFirstOpsStartAChain) {
  const auto catalog = ChainCatalog()
                           .with(chainOf({"aten::silu", "aten::mul.Tensor"}, "swiglu"))
                           ->with(chainOf({"aten::_to_copy", "aten::pow.Tensor_Scalar", "aten::mean.dim"}, "rms"));
  EXPECT_TRUE(catalog->startsWithOp("aten::silu"));
  EXPECT_TRUE(catalog->startsWithOp("aten::_to_copy"));
  EXPECT_FALSE(catalog->startsWithOp("aten::mul.Tensor"));  // a later step only
  EXPECT_FALSE(catalog->startsWithOp("aten::mean.dim"));
  EXPECT_FALSE(catalog->startsWithOp("aten::silu_"));  // the exact name, not a prefix
  ASSERT_NE(catalog->startingWith(headDigest(catalog->chains()[0].pattern.calls[0], catalog->chains()[0].pattern.metas)),
            nullptr);
}

TEST(ChainCatalogTest, GivenAChainReplacedByOneOfTheSameKeyWhenAskedThenTheOldFirstOpNoLongerStartsOne) {
  const auto first = ChainCatalog().with(chainOf({"aten::silu", "aten::mul.Tensor"}, "k"));
  const auto second = first->with(chainOf({"aten::tanh", "aten::mul.Tensor"}, "k"));
  EXPECT_EQ(second->chains().size(), 1u);
  EXPECT_TRUE(second->startsWithOp("aten::tanh"));
  EXPECT_FALSE(second->startsWithOp("aten::silu"));
  EXPECT_TRUE(first->startsWithOp("aten::silu"));  // a published snapshot never changes
}
