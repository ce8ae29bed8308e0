#include "hotkernel/runtime/GpuTimeLedger.h"

namespace hotkernel {
namespace {

uint64_t durationNs(const KernelActivity& k) { return k.endNs > k.startNs ? k.endNs - k.startNs : 0; }

}  // namespace

GpuTimeLedger::GpuTimeLedger(size_t maxPending) : maxPending_(maxPending == 0 ? 1 : maxPending) {}

void GpuTimeLedger::attributeLocked(uint64_t externalId, const KernelActivity& kernel) {
  Attributed& a = byExternal_[externalId];
  a.ns += durationNs(kernel);
  ++a.kernels;
  totals_.attributedNs += durationNs(kernel);
  ++totals_.attributedKernels;
}

template <typename Map>
void GpuTimeLedger::boundLocked(Map& waiting, std::deque<uint32_t>& order, uint64_t* evicted) {
  while (order.size() > maxPending_) {
    const size_t dropped = waiting.erase(order.front());
    if (evicted) *evicted += dropped;
    order.pop_front();
  }
}

void GpuTimeLedger::onBatch(const ActivityBatch& batch) {
  std::lock_guard<std::mutex> guard(mu_);
  totals_.droppedRecords += batch.droppedRecords;
  totals_.apiRecords += batch.apiRecords;
  totals_.correlations += batch.correlations.size();
  for (const ExternalCorrelation& c : batch.correlations) {
    if (c.externalId == 0) continue;
    if (auto k = kernelOf_.find(c.correlationId); k != kernelOf_.end()) {
      attributeLocked(c.externalId, k->second);
      kernelOf_.erase(k);
      continue;
    }
    externalOf_[c.correlationId] = c.externalId;
    externalOrder_.push_back(c.correlationId);
    boundLocked(externalOf_, externalOrder_, &totals_.evicted);
  }
  for (const KernelActivity& k : batch.kernels) {
    totals_.kernelNs += durationNs(k);
    ++totals_.kernels;
    if (auto e = externalOf_.find(k.correlationId); e != externalOf_.end()) {
      attributeLocked(e->second, k);
      externalOf_.erase(e);
      continue;
    }
    kernelOf_[k.correlationId] = k;
    kernelOrder_.push_back(k.correlationId);
    boundLocked(kernelOf_, kernelOrder_, nullptr);
  }
}

std::unordered_map<uint64_t, GpuTimeLedger::Attributed> GpuTimeLedger::byExternalId() const {
  std::lock_guard<std::mutex> guard(mu_);
  return byExternal_;
}

GpuTimeLedger::Totals GpuTimeLedger::totals() const {
  std::lock_guard<std::mutex> guard(mu_);
  return totals_;
}

}  // namespace hotkernel
