#pragma once
// What every family tuner takes (TunerOptions) and returns (TuneOutcome,
// TuneOutcome.h): the softmax, norm, cross_entropy and reduction tuners and
// the family search they share (FamilyTuner.h).

#include <cstdint>
#include <functional>

#include "hotkernel/optimizer/TargetBudget.h"
#include "hotkernel/optimizer/TuneOutcome.h"

namespace hotkernel {

class ExternalAgent;

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
  const ExternalAgent* agent = nullptr;
  int agentRounds = 3;
  // The target's budget and stop rules (Note [Stopping a target's search] in
  // TargetBudget.h): the search stops near the roofline, at the budget or after
  // N rounds without improvement; the agent's rounds run only while none of
  // these holds; metrics.target records the stop. The caller wraps
  // yieldPoint with it. Null: the search's own limits only.
  const TargetClock* clock = nullptr;
  // Chains only (tuneChain): every point of a chain that computes a 16-bit
  // value rounds each such value as eager ATen does (Note [Eager rounding on
  // request] in hotkernel/chain/ChainParameterSpace.h).
  bool chainEagerRounding = false;
};

}  // namespace hotkernel
