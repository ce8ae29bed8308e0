#pragma once
// The op recorder: a sampled RecordFunction global callback that counts ATen
// ops by name and, for the ops hotkernel can serve, their exact variants.
//
// Note [Recorder cost]
// A global RecordFunction callback costs ~65 ns per op (+~30 ns with inputs,
// measured on torch 2.11). The callback is sampled (HOTKERNEL_SAMPLE,
// default 0.05); counts are scaled by 1/p to estimate calls. Sampled calls take
// one mutex; with p = 0.05 that is one lock per 20 ops. With GPU time
// attributed (HOTKERNEL_CUPTI=1) a sampled call also pushes and pops one
// external correlation id (its end callback). A sampled call allocates the
// small context its end callback reads (Note [Deferred calls in the
// recorder]); one the fusion engine deferred takes the mutex once more.

#include <nlohmann/json.hpp>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "hotkernel/runtime/ActivitySource.h"
#include "hotkernel/runtime/GpuTimeLedger.h"
#include "hotkernel/runtime/PlanTable.h"

namespace at {
struct RecordFunction;
struct ObserverContext;
}  // namespace at

namespace hotkernel {

class Recorder {
 public:
  // Called (outside the recorder's lock) once per variant when its estimated
  // call count first reaches the hot threshold.
  using HotFn = std::function<void(const std::string& op, const VariantKey& key)>;

  static Recorder& instance();

  // Registers the RecordFunction callback. Idempotent.
  void start(double samplingProb, int64_t hotCalls, HotFn onHot);
  bool started() const;
  double samplingProb() const;

  // What one sampled call contributes (public for tests): its slot among the
  // ops (the variants), counted as attributed when GPU time is being
  // attributed (gpuAttributing()).
  uint32_t noteOp(const char* name, bool attributed = false);
  uint32_t noteVariant(const std::string& op, const VariantKey& key, bool attributed = false);
  // A sampled call the fusion engine deferred (Note [Deferred calls in the recorder] in
  // runtime/DeferredCalls.h): its op's slot and its variant's slot + 1 (0: none), as the call noted them.
  void noteDeferred(uint32_t opSlot, uint64_t variantSlotPlusOne);

  // The sampled calls of a hot variant since it turned hot, and how many of them the fusion engine deferred;
  // zeros for a variant that is not hot (never, or rearmed).
  struct CallsSinceHot {
    uint64_t sampled = 0;
    uint64_t deferred = 0;
  };
  CallsSinceHot callsSinceHot(const std::string& op, const VariantKey& key) const;
  // Whether fused chains took a hot variant's calls (Note [Variants fused chains took] in
  // interpose/engine/EngineRanking.cpp): at least kTakenMinSampled sampled calls since it turned hot, and at
  // least kTakenFraction of them deferred.
  static constexpr uint64_t kTakenMinSampled = 8;
  static constexpr double kTakenFraction = 0.9;
  static bool takenByChains(const CallsSinceHot& calls) {
    return calls.sampled >= kTakenMinSampled &&
           static_cast<double>(calls.deferred) >= kTakenFraction * static_cast<double>(calls.sampled);
  }
  // The variant is not hot again: it turns hot (and calls onHot) once hotCalls more of its calls ran
  // undeferred, e.g. when the chains that took them stop serving. Returns its calls since it turned hot;
  // nullopt if it was not hot.
  std::optional<CallsSinceHot> rearm(const std::string& op, const VariantKey& key);

  // GPU time per op (Note [GPU time in the profile]): `source` (CUPTI's with
  // HOTKERNEL_CUPTI=1, which start() configures; a fake in tests) is started
  // at the first sampled op with a CUDA input (AtFirstCudaOp: no CUDA work at
  // load), or at once (Now). Once per process; false if one is configured.
  enum class GpuTimeStart { AtFirstCudaOp, Now };
  bool attributeGpuTime(std::unique_ptr<ActivitySource> source, GpuTimeStart when);
  // Whether sampled ops are pushed to the source now (started, not backed off, not a forked child).
  bool gpuAttributing() const;
  // In a forked child (pthread_atfork): nothing is pushed from then on.
  void stopGpuTimeInChild();

  // The profile document, format "hotkernel-profile" version 3:
  // {"format":"hotkernel-profile","version":3,"sampling_prob":p,
  //  "ops":[{"op":name,"sampled_calls":n,"estimated_calls":n/p,"deferred_calls":d?,"estimated_deferred_calls":d/p?,
  //          "gpu_ns":t?,"gpu_sampled_calls":m?,"estimated_gpu_ns":t/p?}...] (most frequent first),
  //  "variants":[{"op":..,"dtype":"bf16","device":0,"rows":..,"cols":..,"inner":n?,"variant":"dtype=...",
  //               "weight":true?,"bias":true?,"reduction":"mean"?,"sampled_calls":n,"estimated_calls":n/p,
  //               "deferred_calls":d?,"estimated_deferred_calls":d/p?,
  //               "gpu_ns":t?,"gpu_sampled_calls":m?,"estimated_gpu_ns":t/p?}...],
  //  "gpu_time":{"source":"cupti","state":"started"|"unavailable"|"held-elsewhere"|"failed"|"pending",
  //              "detail":why?,"kernel_ns":..,"kernels":..,"attributed_ns":..,"dropped_records":..,
  //              "evicted":..,"taken_over":why?,"api_records":..,"correlations":..}?}
  //
  // Note [Profile versions]
  // Version 3 is version 2 with every key in snake_case, the key case of every
  // JSON document hotkernel writes for its users (docs/design/json-style.md);
  // nothing else changes. Versions 1 and 2 spell the same keys in camelCase
  // ("samplingProb", "sampledCalls", "estimatedCalls", "gpuNs",
  // "gpuSampledCalls", "estimatedGpuNs", "gpuTime", "kernelNs",
  // "attributedNs", "droppedRecords", "takenOver"); readers take all three
  // (ProfileDocument.h).
  //
  // Note [GPU time in the profile]
  // Version 2 adds GPU time; a version 1 document is a version 2 one without
  // it, and readers take both (ProfileDocument.h). "gpu_time" is present when
  // attribution was configured (HOTKERNEL_CUPTI=1); the per-entry fields only
  // when its state is "started". gpu_ns is the summed device time of the
  // kernels launched while a sampled call of the op (variant) was the
  // innermost sampled op on its thread, gpu_sampled_calls the sampled calls
  // counted while attributing, estimated_gpu_ns = gpu_ns / p the estimate over
  // every call. kernel_ns is the device time of every kernel of the process
  // while attributing (sampled or not, the optimizer's included): the
  // denominator of an op's share. A kernel launched by an unsampled op
  // inside a sampled one counts for the sampled one, so an op that only calls
  // others (aten::softmax calling aten::_softmax) shows part of their time.
  // "deferred_calls" (added within version 3, present when nonzero) counts
  // the sampled calls of estimated_calls that the fusion engine deferred
  // into pending chains (Note [Deferred calls in the recorder] in
  // runtime/DeferredCalls.h): estimated_calls - estimated_deferred_calls
  // ran outside fused chains. A reader that predates it counts every call
  // as run: it tunes what fused chains took, needlessly, never wrongly.
  // api_records and correlations (keys added within version 3) count the
  // launch API records and the kernel records matched to one: a kernel is
  // attributed only through its launch's correlation (Note [Launch API
  // records only]), so correlations near 0 with kernels above it says the
  // source delivers no API records.
  //
  // Note [Profile format]
  // "weight" and "bias" appear on norm variants (aten::_fused_rms_norm,
  // aten::native_layer_norm) whose calls pass them, and are absent otherwise
  // (absent = false). Added within version 1: a reader that predates them
  // knows no norm op and drops those variants (TargetCost.h), so it never
  // mistakes a weighted variant for an unweighted one. A change a v1 reader
  // would misread takes version 2. "reduction" ("none", "mean", "sum")
  // appears on aten::cross_entropy_loss variants only, under the same rule.
  // The last-dim reductions are recorded under their overload-qualified
  // names ("aten::sum.dim_IntList", "aten::mean.dim", "aten::amax",
  // "aten::argmax", "aten::amin", "aten::argmin") with plain (dtype, rows, cols) keys: a reader that knows
  // no such op drops them. Their middle-dim variants add "inner" (the key's
  // third extent: rows = outer, cols = the reduced extent); a reader that
  // predates it reads such a variant as the last-dim one of [outer, reduced],
  // a real variant of the op, tuned needlessly but never served in place of
  // another (plan keys are exact). "variant" (added within version 3) is the
  // whole key as the cache spells it (kernels::variantString): readers that
  // know it take the key from it (group_norm's groups and HxW and attention's
  // extents and layouts have no field of their own); a reader that predates
  // it builds the key from the fields above, which for those ops is no
  // served key (their families need the extents), so the variant is dropped.
  nlohmann::json profile() const;
  // Estimated calls of one variant that ran so far ((sampled - deferred) / p:
  // Note [Deferred calls in the recorder]); 0 if never sampled. What the
  // optimizer's ranking takes as the target's recorded calls.
  double estimatedCalls(const std::string& op, const VariantKey& key) const;
  // Writes profile() to `path` atomically (temp file + rename), after the
  // activity source delivered what it holds. Never throws; logs.
  bool writeProfile(const std::string& path) const;
  // Note [Fork] (EngineExit.cpp): held across fork() so that a child never
  // inherits the lock taken by another thread.
  void lockForFork() { mu_.lock(); }
  void unlockAfterFork() { mu_.unlock(); }

 private:
  struct OpCount {
    std::string name;
    uint64_t sampled = 0;
    uint64_t attributed = 0;  // sampled while attributing GPU time
    uint64_t deferred = 0;    // sampled calls the fusion engine deferred (<= sampled)
  };
  struct VariantCount {
    std::string op;
    VariantKey key;
    uint64_t sampled = 0;
    bool hot = false;
    uint64_t attributed = 0;  // sampled while attributing GPU time
    uint64_t deferred = 0;    // sampled calls the fusion engine deferred (<= sampled)
    // Invariant: while hot, the counts when it turned hot; ranBase: the calls that ran before the last rearm().
    uint64_t sampledAtHot = 0;
    uint64_t deferredAtHot = 0;
    uint64_t ranBase = 0;
  };
  // The GPU-time attribution's states (gpuState_).
  // kGpuHandedOver: the PyTorch profiler took the records over (Note [Handing CUPTI to the PyTorch profiler]).
  enum GpuState : int { kGpuOff = 0, kGpuPending, kGpuStarting, kGpuActive, kGpuBackedOff, kGpuHandedOver };

  friend std::unique_ptr<at::ObserverContext> recorderOnOpStart(const at::RecordFunction& fn);
  friend void recorderOnOpEnd(const at::RecordFunction& fn, at::ObserverContext* ctx);
  // The state after starting the source if it is pending (the first sampled CUDA op; one thread starts it).
  int startGpuTimeIfPending();
  // The source's records delivered to the ledger, and whether it was taken over. Not under mu_.
  void flushGpuTime() const;
  // A sampled op saw the PyTorch profiler on (its thread's state): hands the source over if the profiler took
  // CUPTI (Note [Handing CUPTI to the PyTorch profiler]). Not under mu_.
  void yieldGpuTimeToProfiler();
  nlohmann::json gpuTimeJsonLocked() const;

  mutable std::mutex mu_;
  // Guarded by mu_. Slots are indices into ops_ / variants_ (stable: entries are only appended);
  // an op's and a variant's slot make the external id its sampled calls push (Note [GPU time in the profile]).
  std::vector<OpCount> ops_;
  std::unordered_map<std::string, uint32_t> opSlots_;
  std::vector<VariantCount> variants_;
  ActivityStart gpuStart_;        // how the source started (while kGpuPending/kGpuStarting: not yet)
  mutable std::string gpuTakenOver_;  // ActivitySource::takenOver at the last flush
  // Set once before gpuState_ leaves kGpuOff, never freed (callbacks may run during exit); the source
  // delivers into the ledger on its own thread, which takes only the ledger's lock, never mu_.
  ActivitySource* gpuSource_ = nullptr;
  GpuTimeLedger* gpuLedger_ = nullptr;
  std::atomic<int> gpuState_{kGpuOff};
  // A sampled op checked the source's takenOver since the PyTorch profiler turned on (false again once a sampled
  // op sees it off): one probe per profiler session, not one per op.
  std::atomic<bool> profilerChecked_{false};
  HotFn onHot_;
  double samplingProb_ = 1.0;
  int64_t hotCalls_ = 50;
  bool started_ = false;
};

}  // namespace hotkernel
