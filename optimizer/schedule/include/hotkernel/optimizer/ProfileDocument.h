#pragma once
// A recorded profile read back ("hotkernel-profile" versions 1 to 3, written
// by HOTKERNEL_PROFILE; the format, Note [Profile versions] (version 3 is
// version 2 in snake_case) and Note [GPU time in the profile] are in
// interpose/include/hotkernel/interpose/Recorder.h, where it is written).
// What `hotkernel warmup` (ProfileTargets.h) and `hotkernel profile` read. No torch.

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "hotkernel/runtime/PlanTable.h"

namespace hotkernel {

inline constexpr const char* kProfileFormat = "hotkernel-profile";
inline constexpr int kProfileOldestVersion = 1;
inline constexpr int kProfileNewestVersion = 3;

// One entry's GPU time (version 2, when attributed).
struct RecordedGpuTime {
  int64_t ns = 0;            // the sampled calls' kernels, summed
  int64_t sampledCalls = 0;  // the sampled calls counted while attributing
  double estimatedNs = 0;    // over every call: ns / samplingProb
};

struct RecordedOp {
  std::string op;  // as RecordFunction names it: "aten::mm"
  double sampledCalls = 0;  // an integer as the recorder writes it; informational, any number is read
  double estimatedCalls = 0;
  // Of estimatedCalls, those the fusion engine deferred ("estimated_deferred_calls", version 3; absent: 0).
  double estimatedDeferredCalls = 0;
  std::optional<RecordedGpuTime> gpu;
};

struct RecordedVariant {
  std::string op;  // the served op, overload included: "aten::sum.dim_IntList"
  VariantKey key;  // on the profile's device
  double sampledCalls = 0;  // as RecordedOp's
  double estimatedCalls = 0;
  double estimatedDeferredCalls = 0;  // as RecordedOp's
  std::optional<RecordedGpuTime> gpu;
  // The calls that ran outside fused chains (Note [Deferred calls in the recorder] in runtime/DeferredCalls.h).
  double estimatedRunCalls() const { return estimatedCalls > estimatedDeferredCalls ? estimatedCalls - estimatedDeferredCalls : 0.0; }
};

// The profile's "gpu_time" ("gpuTime" before version 3; present when attribution was configured).
struct RecordedGpuSummary {
  std::string source;  // "cupti"
  std::string state;   // "started", "pending", "unavailable", "held-elsewhere", "failed"
  std::string detail;  // why not started; "" when started
  int64_t kernelNs = 0;
  int64_t kernels = 0;
  int64_t attributedNs = 0;
  int64_t droppedRecords = 0;
  int64_t evicted = 0;
  std::string takenOver;  // "" unless another client took the records over
};

struct RecordedProfile {
  int version = 0;
  double samplingProb = 0;
  std::vector<RecordedOp> ops;  // absent "ops": none
  std::vector<RecordedVariant> variants;
  std::optional<RecordedGpuSummary> gpuTime;

  // Whether the entries carry GPU time ("gpu_time" started).
  bool hasGpuTime() const { return gpuTime && gpuTime->state == "started"; }
};

// Throws Error "is not a hotkernel profile (format hotkernel-profile, version
// 1 to 3)" for another document, and an Error naming the entry for a
// malformed one (Note [A profile is any file] in ProfileDocument.cpp).
// Variants' keys carry `device`.
RecordedProfile parseRecordedProfile(const nlohmann::json& profile, int device);

}  // namespace hotkernel
