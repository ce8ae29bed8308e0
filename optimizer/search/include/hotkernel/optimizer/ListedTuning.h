#pragma once
// The tuning loop of the families that are not row ops (the padded GEMMs,
// the attention backends): a short, fixed list of candidates, each made
// ready, checked by the family's own checks, timed against the original
// with the benchmark method and its last timed output compared with a
// checked run (Note [Timed outputs are checked] in src/FamilyTuner.cpp);
// the fastest whose speed-up CI clears the threshold is accepted. No search:
// the list is the family's whole space for the variant.

#include <ATen/core/Tensor.h>

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "hotkernel/optimizer/Benchmark.h"
#include "hotkernel/optimizer/TunerOptions.h"

namespace hotkernel {

struct ListedCandidate {
  nlohmann::json params;  // what its record shows (and the family stores when it is accepted)
  // Makes it runnable (compiles, builds its plan); "" or why not (the record's stage "compile"). May fill the
  // record's compile time. Empty: nothing to prepare.
  std::function<std::string(CandidateRecord& rec)> prepare;
  // The family's checks: "" or why it fails; "interrupted" stops the tuning ("tuning interrupted").
  std::function<std::string()> check;
  // One call on the timed input, returning its output (undefined: it did not run).
  std::function<at::Tensor()> run;
};

// Runs `candidates` in order on `device` (the caller holds the device, stream and capture-mode guards) against
// `original` (one call of the op as ATen runs it, on the same timed input), recording each in
// metrics.candidates (the candidateId is its index) and filling metrics.search, metrics.target (with
// options.clock; no candidate after the first is started once its budget is spent) and, for the accepted one,
// metrics.kernel. Returns the accepted candidate's index, or nullopt: keep ATen. Throws Error "tuning
// interrupted" when options.yieldPoint says stop.
std::optional<size_t> tuneListed(const std::vector<ListedCandidate>& candidates, const Workload& original,
                                 int device, const TunerOptions& options, TuneMetrics& metrics);

}  // namespace hotkernel
