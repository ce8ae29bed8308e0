#pragma once
// The benchmark method, the one way every figure of hotkernel is measured
// (used by the optimizer and by the programs under bench/):
// CUDA events on a dedicated stream, L2 flushed before every timed run,
// baseline and candidate interleaved (A B, then B A, alternating), and the
// speed-up as the median of paired ratios with a 95% confidence interval.

#include <functional>

#include "hotkernel/optimizer/Statistics.h"

namespace hotkernel {

struct BenchmarkOptions {
  int pairs = 31;            // timed A/B pairs (after warm-up)
  int warmup = 3;            // untimed runs of each
  double maxSeconds = 3.0;   // budget: fewer pairs (at least 7) if one pair is slow
  // When set, called before each pair (warm-up, the estimate and each timed
  // one; benchmarkOne: each run) with the previous one finished, so no
  // benchmark work is in flight while it waits and at most one pair runs
  // between two calls (the background optimizer yields to serving traffic
  // here). Returning false abandons the measurement (Error "benchmark
  // interrupted"; no timing of it is returned).
  std::function<bool()> beforePair;
  // benchmarkInterleaved only: when set, called before each call of the
  // candidate (warm-up, estimate and timed) outside its timed region (before
  // the L2 flush and the start event), with the call's index (0: the first
  // warm-up) and whether it is the candidate's last call of the measurement.
  // What the candidate's next call reads and writes is chosen here (the
  // tuner's rotating inputs and checked outputs: Note [Timed outputs are
  // checked] in src/FamilyTuner.cpp).
  std::function<void(int call, bool last)> beforeCandidate;
};

// Work to time. It runs with the benchmark stream as the current stream and
// must enqueue all its GPU work there.
using Workload = std::function<void()>;

// Times `baseline` and `candidate` on `device`; times in microseconds.
// Throws Error (or c10::Error) on CUDA failures.
Comparison benchmarkInterleaved(const Workload& baseline, const Workload& candidate, int device,
                                const BenchmarkOptions& options = {});

// The same method for one workload alone (what the ranking needs: the time of
// the kernel that runs now, a device copy for the bandwidth peak): `options.pairs`
// timed runs, each after an L2 flush; median and 95% CI in microseconds.
MedianCi benchmarkOne(const Workload& work, int device, const BenchmarkOptions& options = {});

}  // namespace hotkernel
