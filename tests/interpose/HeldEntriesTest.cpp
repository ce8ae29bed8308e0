// Note [Held entries]: an entry that needs a check is held, checked once on
// the optimizer thread, then published or refused for the process; a refused
// kernel is recognised when a lookup finds it again. The check and the
// publish are fakes here (the engine's are the GPU checks and publishEntry).

#include "HeldEntries.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

namespace hotkernel::engine {
namespace {

cache::Entry kernelEntry(const std::string& variant, const std::string& cubin) {
  cache::Entry e;
  e.op = "aten::_softmax";
  e.variant = variant;
  e.decision = "kernel";
  e.family = "softmax_lastdim";
  e.params = R"({"threads":256})";
  e.kernelName = "hk_softmax";
  e.cubin = cubin;
  return e;
}

const std::string kVariant = "dtype=float32;rows=512;cols=1024";

// A fake check and publish that count their calls and record what they saw.
struct Fakes {
  int checks = 0, publishes = 0;
  std::string checkedCubin;
  HoldReason checkedReason = HoldReason::Agent;
  std::string verdict;  // what the check says ("" passes)
  bool publishes_ok = true;
  HeldEntries::Check check() {
    return [this](const HeldEntries::Held& h) {
      ++checks;
      checkedCubin = h.entry.cubin;
      checkedReason = h.reason;
      return verdict;
    };
  }
  HeldEntries::Publish publish() {
    return [this](const HeldEntries::Held&) {
      ++publishes;
      return publishes_ok;
    };
  }
};

TEST(HeldEntriesTest, GivenAHeldRemoteEntryWhenItsCheckPassesThenItIsPublishedOnceAndNoLongerHeld) {
  HeldEntries held;
  Fakes f;
  EXPECT_TRUE(held.hold(kernelEntry(kVariant, "good"), HoldReason::Remote));
  EXPECT_TRUE(held.held("aten::_softmax", kVariant));

  EXPECT_EQ(held.checkOnce("aten::_softmax", kVariant, f.check(), f.publish()), HeldEntries::Step::Published);
  EXPECT_EQ(f.checks, 1);
  EXPECT_EQ(f.publishes, 1);
  EXPECT_EQ(f.checkedCubin, "good");
  EXPECT_EQ(f.checkedReason, HoldReason::Remote);
  EXPECT_FALSE(held.held("aten::_softmax", kVariant));
  EXPECT_FALSE(held.refusedHere("aten::_softmax", kVariant));
  EXPECT_FALSE(held.isRefusedKernel(kernelEntry(kVariant, "good")));
  // Checked once: nothing is left to check.
  EXPECT_EQ(held.checkOnce("aten::_softmax", kVariant, f.check(), f.publish()), HeldEntries::Step::None);
  EXPECT_EQ(f.checks, 1);
}

TEST(HeldEntriesTest, GivenAHeldEntryWhenItsCheckFailsThenItIsRefusedNotPublishedAndRecognisedAgain) {
  HeldEntries held;
  Fakes f;
  f.verdict = "smoke stage: 512 elements differ";
  held.hold(kernelEntry(kVariant, "tampered"), HoldReason::Remote);

  EXPECT_EQ(held.checkOnce("aten::_softmax", kVariant, f.check(), f.publish()), HeldEntries::Step::Refused);
  EXPECT_EQ(f.publishes, 0);
  EXPECT_TRUE(held.refusedHere("aten::_softmax", kVariant));
  EXPECT_FALSE(held.held("aten::_softmax", kVariant));
  // The same kernel found again (the shared tier still holds it) is passed over; another kernel is not.
  EXPECT_TRUE(held.isRefusedKernel(kernelEntry(kVariant, "tampered")));
  EXPECT_FALSE(held.isRefusedKernel(kernelEntry(kVariant, "retuned")));
  EXPECT_FALSE(held.isRefusedKernel(kernelEntry("dtype=float32;rows=512;cols=2048", "tampered")));
}

TEST(HeldEntriesTest, GivenARefusedVariantWhenTheSameEntryIsHeldAgainThenItIsNotCheckedAgain) {
  HeldEntries held;
  Fakes f;
  f.verdict = "refused";
  held.hold(kernelEntry(kVariant, "tampered"), HoldReason::Remote);
  held.checkOnce("aten::_softmax", kVariant, f.check(), f.publish());

  EXPECT_FALSE(held.hold(kernelEntry(kVariant, "tampered"), HoldReason::Remote));
  EXPECT_FALSE(held.held("aten::_softmax", kVariant));
  EXPECT_EQ(held.checkOnce("aten::_softmax", kVariant, f.check(), f.publish()), HeldEntries::Step::None);
  EXPECT_EQ(f.checks, 1);
}

TEST(HeldEntriesTest, GivenAnEntryHeldTwiceBeforeItsCheckThenTheNewestCopyIsCheckedAndOnlyTheFirstHoldIsFresh) {
  HeldEntries held;
  Fakes f;
  EXPECT_TRUE(held.hold(kernelEntry(kVariant, "old"), HoldReason::Agent));
  EXPECT_FALSE(held.hold(kernelEntry(kVariant, "new"), HoldReason::Agent));  // its job is queued already

  held.checkOnce("aten::_softmax", kVariant, f.check(), f.publish());
  EXPECT_EQ(f.checkedCubin, "new");
  EXPECT_EQ(f.checkedReason, HoldReason::Agent);
}

TEST(HeldEntriesTest, GivenACheckThatPassesWhenNoPlanCanBeMadeThenTheEntryIsRefused) {
  HeldEntries held;
  Fakes f;
  f.publishes_ok = false;
  held.hold(kernelEntry(kVariant, "unplannable"), HoldReason::Remote);

  EXPECT_EQ(held.checkOnce("aten::_softmax", kVariant, f.check(), f.publish()), HeldEntries::Step::Refused);
  EXPECT_TRUE(held.refusedHere("aten::_softmax", kVariant));
  EXPECT_TRUE(held.isRefusedKernel(kernelEntry(kVariant, "unplannable")));
}

TEST(HeldEntriesTest, GivenACheckThatIsInterruptedThenTheEntryStaysRefusedAndTheErrorReachesTheCaller) {
  HeldEntries held;
  held.hold(kernelEntry(kVariant, "k"), HoldReason::Remote);
  auto interrupted = [](const HeldEntries::Held&) -> std::string { throw std::runtime_error("tuning interrupted"); };
  auto publish = [](const HeldEntries::Held&) { return true; };

  EXPECT_THROW(held.checkOnce("aten::_softmax", kVariant, interrupted, publish), std::runtime_error);
  EXPECT_TRUE(held.refusedHere("aten::_softmax", kVariant));
  EXPECT_FALSE(held.held("aten::_softmax", kVariant));
}

TEST(HeldEntriesTest, GivenVariantsOfTwoOpsThenEachIsHeldAndCheckedOnItsOwn) {
  HeldEntries held;
  Fakes f;
  cache::Entry logSoftmax = kernelEntry(kVariant, "log");
  logSoftmax.op = "aten::_log_softmax";
  held.hold(kernelEntry(kVariant, "soft"), HoldReason::Remote);
  held.hold(logSoftmax, HoldReason::Remote);

  f.verdict = "refused";
  EXPECT_EQ(held.checkOnce("aten::_log_softmax", kVariant, f.check(), f.publish()), HeldEntries::Step::Refused);
  EXPECT_TRUE(held.held("aten::_softmax", kVariant));
  f.verdict = "";
  EXPECT_EQ(held.checkOnce("aten::_softmax", kVariant, f.check(), f.publish()), HeldEntries::Step::Published);
  EXPECT_TRUE(held.refusedHere("aten::_log_softmax", kVariant));
  EXPECT_FALSE(held.refusedHere("aten::_softmax", kVariant));
}

}  // namespace
}  // namespace hotkernel::engine
