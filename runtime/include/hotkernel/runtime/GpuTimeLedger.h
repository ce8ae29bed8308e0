#pragma once
// Joins an ActivitySource's records into GPU time per external correlation id
// (the recorder's id of a sampled op and variant: Recorder.h).
//
// Note [Attributing kernels to ops]
// A kernel record names the API call that launched it (its correlation id); a
// correlation record says which external id was innermost on the launching
// thread during that call. Either may come first, in one batch or in a later
// one, so each waits for the other in a map bounded by maxPending: past it the
// oldest waiting one is dropped (a correlation so dropped is counted in
// `evicted`: a sampled launch left unattributed). Every kernel's time
// counts in the total whether or not it is attributed; kernels launched
// outside any pushed region never get a correlation record and are evicted in
// time, unattributed. One launch runs one kernel, so a pair is forgotten once
// joined. The ledger's lock is held by the delivering thread (one batch at a
// time) and by readers; the serving path never takes it.

#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <unordered_map>

#include "hotkernel/runtime/ActivitySource.h"

namespace hotkernel {

class GpuTimeLedger final : public ActivitySink {
 public:
  static constexpr size_t kDefaultMaxPending = size_t{1} << 15;

  explicit GpuTimeLedger(size_t maxPending = kDefaultMaxPending);

  void onBatch(const ActivityBatch& batch) override;

  struct Attributed {
    uint64_t ns = 0;       // the kernels' summed device time
    uint64_t kernels = 0;
  };
  struct Totals {
    uint64_t kernelNs = 0;  // every kernel delivered, attributed or not
    uint64_t kernels = 0;
    uint64_t attributedNs = 0;
    uint64_t attributedKernels = 0;
    uint64_t correlations = 0;    // correlation records delivered, joined or not (0: none come at all)
    uint64_t apiRecords = 0;      // launch API records delivered (0: the source collects none)
    uint64_t droppedRecords = 0;  // lost by the source
    uint64_t evicted = 0;         // correlations dropped past maxPending before their kernel came
  };

  // GPU time per external id so far.
  std::unordered_map<uint64_t, Attributed> byExternalId() const;
  Totals totals() const;

 private:
  void attributeLocked(uint64_t externalId, const KernelActivity& kernel);
  // Drops the oldest waiting records past maxPending_, counting them in *evicted (nullptr: not counted).
  template <typename Map>
  void boundLocked(Map& waiting, std::deque<uint32_t>& order, uint64_t* evicted);

  const size_t maxPending_;
  mutable std::mutex mu_;
  // Guarded by mu_. The waiting halves of the pairs (Note [Attributing kernels to ops]), each with its
  // arrival order for eviction (an order entry whose record was joined is skipped).
  std::unordered_map<uint32_t, uint64_t> externalOf_;  // correlation id -> external id, kernel not seen yet
  std::deque<uint32_t> externalOrder_;
  std::unordered_map<uint32_t, KernelActivity> kernelOf_;  // correlation id -> kernel, correlation not seen yet
  std::deque<uint32_t> kernelOrder_;
  std::unordered_map<uint64_t, Attributed> byExternal_;
  Totals totals_;
};

}  // namespace hotkernel
