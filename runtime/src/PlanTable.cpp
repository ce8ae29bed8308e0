#include "hotkernel/runtime/PlanTable.h"

namespace hotkernel {

std::vector<const Plan*> PlanTable::all() const {
  std::vector<const Plan*> out;
  out.reserve(plans_.size());
  for (const auto& kv : plans_) out.push_back(&kv.second);
  return out;
}

std::unique_ptr<PlanTable> PlanTable::with(Plan plan) const {
  auto next = std::make_unique<PlanTable>(*this);
  VariantKey key = plan.key;
  next->plans_[key] = std::move(plan);
  return next;
}

PlanSlot::PlanSlot() {
  tables_.push_back(std::make_unique<PlanTable>());
  current_.store(tables_.back().get(), std::memory_order_release);
}

void PlanSlot::publish(Plan plan) {
  std::lock_guard<std::mutex> guard(writeMu_);
  std::unique_ptr<const PlanTable> next = load()->with(std::move(plan));
  const PlanTable* raw = next.get();
  tables_.push_back(std::move(next));
  current_.store(raw, std::memory_order_release);
}

}  // namespace hotkernel
