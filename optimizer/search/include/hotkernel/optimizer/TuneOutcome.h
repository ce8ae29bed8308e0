#pragma once
// What a family tuner returns (TuneOutcome): its decision, the kernel it
// accepted, and what it measured (TuneMetrics), as typed fields. Readers use
// the fields; JSON is made only where the metrics are written out. No torch.
//
// Note [Tune metrics JSON]
// TuneMetrics::toJson() is the JSON of a tuning's measurements: the cache
// entry's `metrics` (`hotkernel cache show` prints it, `hotkernel cache list`
// reads its "speedup"), the runtime's tune log and status. Its keys, each
// written only when it has a value:
//   "speedup", "speedupCi" [low, high], "atenUs", "kernelUs", "maxAbsError",
//   "pairs", "tolerance", "bound" {"absolute","relative"}, "origin" ("agent"):
//            the accepted kernel (KernelMetrics; none when the ATen kernel stays);
//   "search" {"seed" (decimal text), "evaluations", "rounds", "stop", "validPoints"};
//   "candidates": one object per candidate tried (CandidateRecord), in order;
//   "target": the target's budget and stop (TargetClock::summary, Note
//            [Stopping a target's search]);
//   "arch", "reduction" (cross_entropy), "op" (the last-dim reductions);
//   "tunedRows": the rows tuned on when fewer than the variant's (Note
//            [Tuning on a row subset] in TuningRows.cpp; "atenUs", "kernelUs"
//            and the candidates' times are then for those rows); absent: all.
//   "harnessRows": the rows the five-stage harness ran on when fewer than the
//            timed calls' (Note [A harness on fewer rows] in TuningRows.cpp); absent: the same.
// A candidate's keys: "candidateId", "parentId", "origin", "round",
// "attempt", "mutation", "params", "kernelName", "compileSeconds", "stages"
// {stage: "pass" | "fail: <detail>"}, "harnessSeed" (decimal text),
// "maxAbsError", "stage", "error", "atenUs", "kernelUs", "speedup",
// "speedupCi", "pairs", "budgetLevel", "accepted", "clears". The experiment log's lines
// are made from the typed records (TuneExperiments.h), not from this JSON.

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "hotkernel/optimizer/Search.h"
#include "hotkernel/optimizer/Statistics.h"

namespace hotkernel {

// A 95% confidence interval. JSON: [low, high].
struct ConfidenceInterval {
  double low = 0;
  double high = 0;
  nlohmann::json toJson() const;
};

// The elementwise error bound a kernel was held to: |out - ref| <= absolute + relative * |ref|.
struct ErrorBound {
  double absolute = 0;
  double relative = 0;
};

// The accepted kernel's measurements, from its timing against ATen at the
// highest budget level it reached and its harness run.
struct KernelMetrics {
  double speedup = 0;              // median of the paired ATen / kernel time ratios
  ConfidenceInterval speedupCi;    // the speed-up's 95% CI
  double atenUs = 0;               // median time of the ATen kernel, microseconds
  double kernelUs = 0;             // median time of the kernel, microseconds
  double maxAbsError = 0;          // the harness's largest absolute error against the reference
  size_t pairs = 0;                // interleaved pairs timed
  std::optional<double> tolerance;  // the family's tolerance at the variant, when the family has one
  std::optional<ErrorBound> bound;  // the bound an agent's kernel was held to
  bool fromAgent = false;           // an agent's kernel (JSON "origin": "agent")

  // The timing fields of `cmp`, the harness's `maxAbsError`.
  static KernelMetrics of(const Comparison& cmp, double maxAbsError);
};

// One harness stage's result. JSON: "pass" or "fail: <detail>".
struct StageRecord {
  bool passed = false;
  std::string detail;  // why it failed
};

// One candidate the tuner tried: a point of the family search or an agent's
// reply, how far it got and what it measured. An optional field the tuner
// did not reach is empty (its JSON key absent).
struct CandidateRecord {
  int64_t candidateId = 0;          // the lineage id; an agent round r is 100000 + r
  std::optional<int64_t> parentId;  // the lineage parent, none for the first population
  std::string origin;               // "seed", "random", "mutation" (the search) or "agent"
  std::optional<int> round;         // the search round it was created in
  std::optional<int> attempt;       // the agent round
  std::string mutation;             // "threads 256->512"; "" for none
  std::optional<nlohmann::json> params;  // the family's parameters, or {"launch": ...} of an agent's reply
  std::optional<std::string> kernelName;           // an agent's kernel
  std::optional<double> compileSeconds;            // NVRTC wall time
  std::optional<std::map<std::string, StageRecord>> stages;  // harness stage -> result, once the harness ran
  std::optional<uint64_t> harnessSeed;             // the harness's seed
  std::optional<double> maxAbsError;               // the harness's largest absolute error
  std::string stage;  // where it ended: compile, harness, launch, timed, benchmark (agent: AgentStage names); "" none
  std::string error;  // why it failed; "" when it did not
  std::optional<double> atenUs;                  // median ATen time when timed, microseconds
  std::optional<double> kernelUs;                // median candidate time when timed, microseconds
  std::optional<double> speedup;                 // median paired speed-up when timed
  std::optional<ConfidenceInterval> speedupCi;   // its 95% CI
  std::optional<size_t> pairs;                   // interleaved pairs timed
  std::optional<int> budgetLevel;                // the search's budget level of that timing
  std::optional<bool> accepted;                  // timed: whether it was chosen
  std::optional<bool> clears;                    // timed: whether its speed-up CI clears the tuner's threshold

  nlohmann::json toJson() const;
};

// The family search's summary.
struct SearchSummary {
  uint64_t seed = 0;  // Note [Search determinism]
  int evaluations = 0;
  int rounds = 0;
  SearchStop stop = SearchStop::Exhausted;
  size_t validPoints = 0;  // the family's points that fit the variant
};

// What a tuning measured (Note [Tune metrics JSON]).
struct TuneMetrics {
  std::optional<KernelMetrics> kernel;      // the accepted kernel's; set exactly when the outcome is accepted
  std::optional<SearchSummary> search;      // the family search's
  std::vector<CandidateRecord> candidates;  // every candidate tried, in order
  std::optional<nlohmann::json> target;     // TargetClock::summary with a target clock (TargetBudget.h)
  std::string arch;                         // the compile target, "sm_90a"
  std::string reduction;                    // cross_entropy's reduction ("none", "mean", "sum"); "" otherwise
  std::string op;                           // a last-dim reduction's op ("sum", ...); "" otherwise
  std::optional<int64_t> tunedRows;         // the rows tuned on when fewer than the variant's; none: all
  std::optional<int64_t> harnessRows;       // the harness's rows when fewer than the timed calls'; none: the same

  nlohmann::json toJson() const;
};

struct TuneOutcome {
  bool accepted = false;      // false: keep the ATen kernel
  std::string family;         // the cache's family ("softmax_lastdim", "rms_norm", ...), or "agent"
  nlohmann::json paramsJson;  // what the cache stores (see makePlan)
  std::string kernelName;
  std::string cubin;  // valid when accepted
  TuneMetrics metrics;
};

}  // namespace hotkernel
