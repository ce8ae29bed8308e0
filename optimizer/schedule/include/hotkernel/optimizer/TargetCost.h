#pragma once
// The ideal cost of one call of an (op, variant): the bytes it must move and
// the floating-point operations it must do, from the kernel family's model.
// The numerator of the roofline (Note [Amdahl ranking] in Ranking.h). No torch.
//
// Note [Memory-bound families have no FLOP term]
// Every family served so far (softmax, log_softmax, rms_norm, layer_norm) does
// a few FLOPs per element it reads: on an H200 (4.2 TB/s, ~60 TFLOP/s fp32
// non-tensor) the compute time of a row op is < 5% of its memory time, so the
// roofline is bytes / copy bandwidth and flops are reported as 0 (which also
// means no FLOP/s peak needs measuring: MachinePeaks::flopsPerSecond stays 0).
// A compute-bound family (a GEMM epilogue, attention) must report its flops
// here, and the measurer must then measure a FLOP/s peak.

#include <optional>
#include <string>

#include "hotkernel/runtime/PlanTable.h"

namespace hotkernel {

struct CallCost {
  double bytes = 0;  // ideal DRAM traffic of one call
  double flops = 0;  // 0 for memory-bound ops (Note [Memory-bound families have no FLOP term])
};

// The model of the family that reproduces `op` (kernels::familyForOp: the
// dispatcher name with its overload) at `key`: its descriptor's bytesMoved;
// nullopt for an op no family reproduces or a key its family does not serve
// (options it does not take included). A target without a cost is served
// after the ranked ones, unranked.
std::optional<CallCost> callCost(const std::string& op, const VariantKey& key);

}  // namespace hotkernel
