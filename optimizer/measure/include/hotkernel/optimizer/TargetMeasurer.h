#pragma once
// The GPU measurements the ranking needs, behind a thin interface so the
// ranking can be tested on a CPU with injected numbers (the real one is
// GpuTargetMeasurer, in the torch part of the optimizer). No torch.

#include <string>

#include "hotkernel/optimizer/Ranking.h"
#include "hotkernel/runtime/PlanTable.h"

namespace hotkernel {

class TargetMeasurer {
 public:
  virtual ~TargetMeasurer() = default;

  // The peaks of `device`, measured on it (Note [Amdahl ranking] in
  // Ranking.h). Throws Error when it cannot measure.
  virtual MachinePeaks measurePeaks(int device) = 0;

  // Seconds per call of what runs for (op, key) now (the ATen kernel), on
  // key.device, measured. Throws Error when it cannot (an op it cannot time,
  // a variant over the memory cap, interrupted).
  virtual double measureSecondsPerCall(const std::string& op, const VariantKey& key) = 0;
};

}  // namespace hotkernel
