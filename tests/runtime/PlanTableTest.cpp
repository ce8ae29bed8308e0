#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "hotkernel/runtime/PlanTable.h"

namespace hotkernel {
namespace {

class NamedLauncher : public KernelLauncher {
 public:
  explicit NamedLauncher(std::string name) : name_(std::move(name)) {}
  bool launch(const RowKernelArgs&, void*) const noexcept override { return true; }
  size_t alignment() const override { return 16; }
  std::string describe() const override { return name_; }

 private:
  std::string name_;
};

Plan planFor(VariantKey key, const std::string& name) {
  return Plan{key, std::make_shared<NamedLauncher>(name), name};
}

TEST(PlanTableTest, GivenEmptySlotWhenLookingUpThenNoPlan) {
  PlanSlot slot;
  EXPECT_EQ(slot.load()->find(VariantKey{2, 0, 4096, 32000}), nullptr);
  EXPECT_EQ(slot.load()->size(), 0u);
}

TEST(PlanTableTest, GivenPublishedPlanWhenLookingUpExactVariantThenHitOnlyThere) {
  PlanSlot slot;
  slot.publish(planFor(VariantKey{2, 0, 4096, 32000}, "a"));
  const Plan* hit = slot.load()->find(VariantKey{2, 0, 4096, 32000});
  ASSERT_NE(hit, nullptr);
  EXPECT_EQ(hit->description, "a");
  EXPECT_EQ(slot.load()->find(VariantKey{2, 0, 4096, 32001}), nullptr);
  EXPECT_EQ(slot.load()->find(VariantKey{1, 0, 4096, 32000}), nullptr);
  EXPECT_EQ(slot.load()->find(VariantKey{2, 1, 4096, 32000}), nullptr);
}

TEST(PlanTableTest, GivenKeysDifferingOnlyInInnerWhenLookingUpThenEachFindsOnlyItsOwnPlan) {
  PlanSlot slot;
  VariantKey middle{0, 0, 64, 4096};
  middle.inner = 1024;
  slot.publish(planFor(VariantKey{0, 0, 64, 4096}, "last-dim"));
  slot.publish(planFor(middle, "middle-dim"));
  VariantKey other = middle;
  other.inner = 512;
  EXPECT_FALSE(middle == VariantKey({0, 0, 64, 4096}));
  EXPECT_NE(VariantKeyHash{}(middle), VariantKeyHash{}(other));
  ASSERT_NE(slot.load()->find(middle), nullptr);
  EXPECT_EQ(slot.load()->find(middle)->description, "middle-dim");
  ASSERT_NE(slot.load()->find(VariantKey{0, 0, 64, 4096}), nullptr);
  EXPECT_EQ(slot.load()->find(VariantKey{0, 0, 64, 4096})->description, "last-dim");
  EXPECT_EQ(slot.load()->find(other), nullptr);
}

TEST(PlanTableTest, GivenOldTablePointerWhenPublishingThenOldTableStaysValidAndUnchanged) {
  PlanSlot slot;
  slot.publish(planFor(VariantKey{0, 0, 1, 8}, "first"));
  const PlanTable* old = slot.load();
  slot.publish(planFor(VariantKey{0, 0, 1, 16}, "second"));
  slot.publish(planFor(VariantKey{0, 0, 1, 8}, "replaced"));
  EXPECT_EQ(old->size(), 1u);
  EXPECT_EQ(old->find(VariantKey{0, 0, 1, 8})->description, "first");
  EXPECT_EQ(slot.load()->size(), 2u);
  EXPECT_EQ(slot.load()->find(VariantKey{0, 0, 1, 8})->description, "replaced");
}

TEST(PlanTableTest, GivenConcurrentReadersWhenPublishingManyPlansThenReadersAlwaysSeeConsistentTables) {
  PlanSlot slot;
  std::atomic<bool> done{false};
  std::atomic<long> lookups{0};
  std::vector<std::thread> readers;
  for (int t = 0; t < 3; ++t) {
    readers.emplace_back([&] {
      while (!done.load()) {
        const PlanTable* table = slot.load();
        const size_t n = table->size();
        // Every plan of a table is found in that same table.
        for (size_t i = 0; i < n; ++i) {
          ASSERT_NE(table->find(VariantKey{0, 0, static_cast<int64_t>(i), 1}), nullptr);
        }
        ++lookups;
      }
    });
  }
  for (int i = 0; i < 300; ++i) slot.publish(planFor(VariantKey{0, 0, i, 1}, std::to_string(i)));
  done = true;
  for (auto& r : readers) r.join();
  EXPECT_EQ(slot.load()->size(), 300u);
  EXPECT_GT(lookups.load(), 0);
}

}  // namespace
}  // namespace hotkernel
