#pragma once
// The softmax tuner: for one recorded variant, compile the family's parameter
// points, pass each through the five-stage harness against the original ATen
// kernel, time those that pass against it with the benchmark method, and
// return the fastest one whose speed-up CI clears the threshold.

#include <nlohmann/json.hpp>

#include <functional>
#include <string>

#include "hotkernel/kernels/SoftmaxFamily.h"
#include "hotkernel/optimizer/Harness.h"
#include "hotkernel/optimizer/TargetBudget.h"

namespace hotkernel {

struct TunerOptions {
  double minSpeedup = 1.02;  // the speed-up CI must clear this to accept
  int pairs = 31;             // interleaved pairs at the highest budget level
  int searchEvaluations = 40;  // evaluator calls of the family search (Note [Family search])
  // Called before each unit of GPU work (a candidate's harness, a benchmark
  // pair); blocks while the GPU is busy serving. Returning false stops tuning
  // (Error "tuning interrupted"). Empty: never waits.
  std::function<bool()> yieldPoint;
  // GPU memory the tuner may use for inputs, outputs and the L2 flush buffer
  // (bytes); a variant needing more is refused with an Error. 0: no cap.
  int64_t memoryCapBytes = 0;
  // An external agent (HOTKERNEL_AGENT_CMD) asked for up to agentRounds more
  // candidates after the family's points; null: none. Its sources are compiled
  // in the sandbox helper and first run in the sandbox-run helper.
  const class ExternalAgent* agent = nullptr;
  int agentRounds = 3;
  // The target's budget and stop rules (Note [Stopping a target's search] in
  // TargetBudget.h): the search stops near the roofline, at the budget or after
  // N rounds without improvement; the agent's rounds run only while none of
  // these holds; metrics["target"] records the stop. The caller wraps
  // yieldPoint with it. Null: the search's own limits only.
  const TargetClock* clock = nullptr;
};

struct TuneOutcome {
  bool accepted = false;            // false: keep the ATen kernel
  std::string family;               // "softmax_lastdim" / "log_softmax_lastdim", or "agent" (external agent)
  nlohmann::json paramsJson;        // what the cache stores (see makePlan)
  std::string kernelName;
  kernels::SoftmaxParams params{};  // valid when accepted from the family
  std::string cubin;                // valid when accepted
  std::string arch;                 // e.g. "sm_90a"
  nlohmann::json metrics;           // speed-up, CI, times, max error, per-candidate log
};

// What aten::_softmax(x, -1, false) (or aten::_log_softmax) must compute, for the harness.
RowOpSpec softmaxSpec(kernels::SoftmaxOp op = kernels::SoftmaxOp::Softmax);
// A compiled softmax parameter point as a harness candidate (its guards included).
HarnessCandidate softmaxCandidate(kernels::DType dtype, const kernels::SoftmaxParams& params,
                                  const std::string& cubin);

// Runs on the calling thread on `device`; uses its own stream and relaxed
// graph-capture mode. Throws Error when the variant cannot be tuned at all
// (no driver, no NVRTC); candidates that fail are skipped and logged in metrics.
// `op` picks softmax or log_softmax (same family template, HK_LOG); the
// external agent is asked for softmax only (its task format describes softmax).
TuneOutcome tuneSoftmax(const kernels::SoftmaxVariant& variant, int device, const TunerOptions& options = {},
                        kernels::SoftmaxOp op = kernels::SoftmaxOp::Softmax);

}  // namespace hotkernel
