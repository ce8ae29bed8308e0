#pragma once
// The first optimizer: for one recorded softmax variant, try the family's
// parameter points, check each against the original ATen kernel on fresh
// random inputs, time the correct ones against it with the benchmark method,
// and return the fastest one that is correct and faster.

#include <nlohmann/json.hpp>

#include <string>

#include "hotkernel/kernels/SoftmaxFamily.h"

namespace hotkernel {

struct TunerOptions {
  double minSpeedup = 1.02;  // the speed-up CI must clear this to accept
  int pairs = 31;
};

struct TuneOutcome {
  bool accepted = false;            // false: keep the ATen kernel
  kernels::SoftmaxParams params{};  // valid when accepted
  std::string cubin;                // valid when accepted
  std::string arch;                 // e.g. "sm_90a"
  nlohmann::json metrics;           // speed-up, CI, times, max error, per-candidate log
};

// Runs on the calling thread on `device`; uses its own stream and relaxed
// graph-capture mode. Throws Error when the variant cannot be tuned at all
// (no driver, no NVRTC); candidates that fail are skipped and logged in metrics.
TuneOutcome tuneSoftmax(const kernels::SoftmaxVariant& variant, int device, const TunerOptions& options = {});

}  // namespace hotkernel
