// The attention baseline (runtime/include/hotkernel/runtime/AttentionDefaults.h,
// Note [PyTorch's settled priority order]): remembered at install, settled at
// the first call after PyTorch's own selection, which a fake selection stands
// for here (PyTorch reorders only at its first selection on a recent CUDA GPU).
#include <gtest/gtest.h>

#include <ATen/Context.h>

#include <stdexcept>
#include <vector>

#include "hotkernel/runtime/AttentionDefaults.h"

namespace hotkernel {
namespace {

using Order = AttentionDefaults::Order;

std::vector<int64_t> asInts(const Order& order) {
  std::vector<int64_t> r;
  for (at::SDPBackend b : order) r.push_back(static_cast<int64_t>(b));
  return r;
}

void setOrder(const Order& order) { at::globalContext().setSDPPriorityOrder(asInts(order)); }

// The first backend moved to the end: another order, as PyTorch's reorder is.
Order rotated(const Order& order) {
  Order r{};
  for (size_t i = 0; i < order.size(); ++i) r[i] = order[(i + 1) % order.size()];
  return r;
}

class AttentionDefaultsTest : public ::testing::Test {
 protected:
  void SetUp() override { start_ = at::globalContext().sDPPriorityOrder(); }
  void TearDown() override {
    setOrder(start_);
    at::globalContext().setSDPUseMath(true);
  }
  Order start_{};
};

TEST_F(AttentionDefaultsTest, GivenPyTorchReordersAtItsFirstSelectionWhenSettledThenItsNewOrderIsTheBaseline) {
  AttentionDefaults d;
  d.remember();
  EXPECT_FALSE(d.allows(AttentionBackend::Math)) << "not settled yet";
  int selections = 0;
  d.settle([&] {
    ++selections;
    setOrder(rotated(start_));
  });
  EXPECT_EQ(selections, 1);
  EXPECT_TRUE(d.settled());
  EXPECT_TRUE(d.allows(AttentionBackend::Math)) << "PyTorch's own reorder is not the user's";
  d.settle([&] { ++selections; });
  EXPECT_EQ(selections, 1) << "settles once";
  setOrder(start_);
  EXPECT_FALSE(d.allows(AttentionBackend::Math)) << "the start order is not the one PyTorch runs under now";
}

TEST_F(AttentionDefaultsTest, GivenASelectionThatKeepsTheOrderWhenSettledThenTheStartOrderIsTheBaseline) {
  AttentionDefaults d;
  d.remember();
  d.settle([] {});
  EXPECT_TRUE(d.allows(AttentionBackend::Math));
  setOrder(rotated(start_));
  EXPECT_FALSE(d.allows(AttentionBackend::Math));
}

TEST_F(AttentionDefaultsTest, GivenTheOrderChangedBeforeTheFirstSelectionWhenSettledThenTheStartOrderStaysTheBaseline) {
  AttentionDefaults d;
  d.remember();
  setOrder(rotated(start_));  // the user's, before any attention call
  bool selected = false;
  d.settle([&] { selected = true; });
  EXPECT_FALSE(selected);
  EXPECT_TRUE(d.settled());
  EXPECT_FALSE(d.allows(AttentionBackend::Math)) << "the user's order keeps PyTorch's choice";
  setOrder(start_);
  EXPECT_TRUE(d.allows(AttentionBackend::Math));
}

TEST_F(AttentionDefaultsTest, GivenNothingRememberedWhenSettledThenTheOrderAtTheFirstCallIsTheStart) {
  AttentionDefaults d;
  d.settle([&] { setOrder(rotated(start_)); });
  EXPECT_TRUE(d.allows(AttentionBackend::Math));
}

TEST_F(AttentionDefaultsTest, GivenASelectionThatThrowsWithoutReorderingWhenSettledThenTheNextCallSettles) {
  AttentionDefaults d;
  d.remember();
  EXPECT_THROW(d.settle([] { throw std::runtime_error("no viable backend"); }), std::runtime_error);
  EXPECT_FALSE(d.settled());
  EXPECT_FALSE(d.allows(AttentionBackend::Math));
  d.settle([&] { setOrder(rotated(start_)); });
  EXPECT_TRUE(d.settled());
  EXPECT_TRUE(d.allows(AttentionBackend::Math));
}

TEST_F(AttentionDefaultsTest, GivenASelectionThatReordersThenThrowsWhenSettledThenItsOrderIsTheBaseline) {
  AttentionDefaults d;
  d.remember();
  EXPECT_THROW(d.settle([&] {
    setOrder(rotated(start_));
    throw std::runtime_error("no viable backend");
  }),
               std::runtime_error);
  EXPECT_TRUE(d.settled());
  EXPECT_TRUE(d.allows(AttentionBackend::Math));
}

TEST_F(AttentionDefaultsTest, GivenABackendSwitchedOffWhenAskedThenItAloneIsNotAllowed) {
  AttentionDefaults d;
  d.remember();
  d.settle([] {});
  at::globalContext().setSDPUseMath(false);
  EXPECT_FALSE(d.allows(AttentionBackend::Math));
  EXPECT_TRUE(d.allows(AttentionBackend::FlashCpu));
  at::globalContext().setSDPUseMath(true);
  EXPECT_TRUE(d.allows(AttentionBackend::Math));
}

}  // namespace
}  // namespace hotkernel
