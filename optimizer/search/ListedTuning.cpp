#include "hotkernel/optimizer/ListedTuning.h"

#include <ATen/ATen.h>

#include <map>

#include "hotkernel/optimizer/TargetBudget.h"
#include "hotkernel/runtime/Check.h"

namespace hotkernel {
namespace {

constexpr const char* kInterrupted = "tuning interrupted";

bool sameBits(const at::Tensor& a, const at::Tensor& b) {
  return a.defined() && b.defined() && a.sizes() == b.sizes() && a.scalar_type() == b.scalar_type() &&
         at::equal(a.contiguous().view(at::kByte), b.contiguous().view(at::kByte));
}

}  // namespace

std::optional<size_t> tuneListed(const std::vector<ListedCandidate>& candidates, const Workload& original,
                                 int device, const TunerOptions& options, TuneMetrics& metrics) {
  std::optional<size_t> best;
  std::optional<Comparison> bestCmp;
  size_t evaluated = 0;
  SearchStop stop = SearchStop::Exhausted;
  for (size_t i = 0; i < candidates.size(); ++i) {
    // The target's budget (Note [Stopping a target's search]): the candidates not reached are not evaluated; the
    // best so far is kept. Near the roofline is not a stop here: the list is short and the original's own work
    // (a GEMM, an attention) dominates every candidate's.
    if (i > 0 && options.clock && options.clock->budgetSpent()) {
      stop = SearchStop::OutOfTime;
      break;
    }
    ++evaluated;
    const ListedCandidate& c = candidates[i];
    CandidateRecord rec;
    rec.candidateId = static_cast<int64_t>(i);
    rec.origin = "seed";
    rec.round = 0;
    rec.params = c.params;
    HOTKERNEL_CHECK(!options.yieldPoint || options.yieldPoint(), kInterrupted);
    if (c.prepare) {
      std::string why;
      try {
        why = c.prepare(rec);
      } catch (const std::exception& e) {
        why = e.what();
      }
      if (!why.empty()) {
        rec.stage = "compile";
        rec.error = why.substr(0, 300);
        metrics.candidates.push_back(std::move(rec));
        continue;
      }
    }
    const std::string why = c.check();
    HOTKERNEL_CHECK(why != "interrupted", kInterrupted);
    rec.stages = std::map<std::string, StageRecord>{{"checks", StageRecord{why.empty(), why}}};
    if (!why.empty()) {
      rec.stage = "harness";
      rec.error = "checks: " + why;
      metrics.candidates.push_back(std::move(rec));
      continue;
    }
    BenchmarkOptions bo;
    bo.pairs = options.pairs;
    bo.beforePair = options.yieldPoint;
    at::Tensor last;
    Comparison cmp;
    try {
      cmp = benchmarkInterleaved(original, [&] { last = c.run(); }, device, bo);
    } catch (const std::exception& e) {
      HOTKERNEL_CHECK(std::string(e.what()).find("interrupted") == std::string::npos, kInterrupted);
      rec.stage = "benchmark";
      rec.error = e.what();
      metrics.candidates.push_back(std::move(rec));
      continue;
    }
    // The timed output checked too (Note [Timed outputs are checked] in FamilyTuner.cpp): the same bits as a
    // checked run on the timed input.
    if (!sameBits(last, c.run())) {
      rec.stage = "timed";
      rec.error = "timed: the last timed call's output differs from a checked run's";
      metrics.candidates.push_back(std::move(rec));
      continue;
    }
    rec.atenUs = cmp.baseline.median;
    rec.kernelUs = cmp.candidate.median;
    rec.speedup = cmp.speedup.median;
    rec.speedupCi = ConfidenceInterval{cmp.speedup.low, cmp.speedup.high};
    rec.pairs = cmp.speedup.n;
    rec.budgetLevel = 0;
    rec.accepted = false;
    rec.clears = cmp.clears(options.minSpeedup);
    if (cmp.clears(options.minSpeedup) && (!bestCmp || cmp.candidate.median < bestCmp->candidate.median)) {
      best = i;
      bestCmp = cmp;
    }
    metrics.candidates.push_back(std::move(rec));
  }
  SearchSummary summary;
  summary.evaluations = static_cast<int>(evaluated);
  summary.rounds = 1;
  summary.stop = stop;
  summary.validPoints = candidates.size();
  metrics.search = summary;
  if (options.clock) {
    metrics.target = options.clock->summary(bestCmp ? bestCmp->candidate.median : 0.0,
                                            stop == SearchStop::OutOfTime ? TargetStop::BudgetSpent : TargetStop::None);
  }
  if (best) {
    for (CandidateRecord& rec : metrics.candidates) {
      if (rec.candidateId == static_cast<int64_t>(*best)) rec.accepted = true;
    }
    metrics.kernel = KernelMetrics::of(*bestCmp, 0.0);
  }
  return best;
}

}  // namespace hotkernel
