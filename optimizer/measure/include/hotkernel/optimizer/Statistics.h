#pragma once
// Statistics of the benchmark method: paired, interleaved samples of a
// baseline (A) and a candidate (B); the speed-up is the median of the paired
// ratios A_i / B_i with a distribution-free 95% confidence interval from order
// statistics (binomial, normal approximation).

#include <cstddef>
#include <vector>

namespace hotkernel {

struct MedianCi {
  double median = 0;
  double low = 0;   // 95% CI lower bound
  double high = 0;  // 95% CI upper bound
  size_t n = 0;
};

// Median and 95% CI of the median of `samples` (any order). Throws Error on empty input.
MedianCi medianWithCi(std::vector<double> samples);

struct Comparison {
  MedianCi baseline;   // times of A
  MedianCi candidate;  // times of B
  MedianCi speedup;    // A_i / B_i: > 1 means B is faster
  // True when the whole CI of the speed-up is above `threshold` (e.g. 1.02).
  bool clears(double threshold) const { return speedup.low > threshold; }
};

// Pairs a[i] with b[i]. Throws Error if sizes differ, are empty, or any time is not > 0.
Comparison compareSamples(const std::vector<double>& a, const std::vector<double>& b);

}  // namespace hotkernel
