#pragma once
// The op recorder: a sampled RecordFunction global callback that counts ATen
// ops by name and, for the ops hotkernel can serve, their exact variants.
//
// Note [Recorder cost]
// A global RecordFunction callback costs ~65 ns per op (+~30 ns with inputs,
// measured on torch 2.11). The callback is sampled (HOTKERNEL_SAMPLE,
// default 0.05); counts are scaled by 1/p to estimate calls. Sampled calls take
// one mutex; with p = 0.05 that is one lock per 20 ops.

#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "hotkernel/runtime/PlanTable.h"

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

  // What one sampled call contributes (public for tests).
  void noteOp(const char* name);
  void noteVariant(const std::string& op, const VariantKey& key);

  // The profile document, format "hotkernel-profile" version 1:
  // {"format":"hotkernel-profile","version":1,"samplingProb":p,
  //  "ops":[{"op":name,"sampledCalls":n,"estimatedCalls":n/p}...] (most frequent first),
  //  "variants":[{"op":..,"dtype":"bf16","device":0,"rows":..,"cols":..,"inner":n?,
  //               "weight":true?,"bias":true?,"sampledCalls":n,"estimatedCalls":n/p}...]}
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
  // another (plan keys are exact).
  nlohmann::json profile() const;
  // Estimated calls of one variant so far (sampled / p); 0 if never sampled.
  // What the optimizer's ranking takes as the target's recorded calls.
  double estimatedCalls(const std::string& op, const VariantKey& key) const;
  // Writes profile() to `path` atomically (temp file + rename). Never throws; logs.
  bool writeProfile(const std::string& path) const;
  // Note [Fork] (Engine.cpp): held across fork() so that a child never
  // inherits the lock taken by another thread.
  void lockForFork() { mu_.lock(); }
  void unlockAfterFork() { mu_.unlock(); }

 private:
  struct VariantCount {
    std::string op;
    VariantKey key;
    uint64_t sampled = 0;
    bool hot = false;
  };
  mutable std::mutex mu_;
  // Guarded by mu_.
  std::map<std::string, uint64_t> opCounts_;
  std::vector<VariantCount> variants_;
  HotFn onHot_;
  double samplingProb_ = 1.0;
  int64_t hotCalls_ = 50;
  bool started_ = false;
};

}  // namespace hotkernel
