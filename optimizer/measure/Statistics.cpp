#include "hotkernel/optimizer/Statistics.h"

#include <algorithm>
#include <cmath>

#include "hotkernel/runtime/Check.h"

namespace hotkernel {

MedianCi medianWithCi(std::vector<double> s) {
  HOTKERNEL_CHECK(!s.empty(), "no samples");
  std::sort(s.begin(), s.end());
  const size_t n = s.size();
  MedianCi r;
  r.n = n;
  r.median = (n % 2) ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
  // Ranks (1-based) n/2 -/+ 1.96 sqrt(n)/2 bound the median with ~95% coverage.
  const double half = 1.959964 * std::sqrt(static_cast<double>(n)) / 2.0;
  long lo = static_cast<long>(std::floor(n / 2.0 - half));
  long hi = static_cast<long>(std::ceil(n / 2.0 + half)) + 1;
  lo = std::max<long>(lo, 1);
  hi = std::min<long>(hi, static_cast<long>(n));
  r.low = s[static_cast<size_t>(lo - 1)];
  r.high = s[static_cast<size_t>(hi - 1)];
  return r;
}

Comparison compareSamples(const std::vector<double>& a, const std::vector<double>& b) {
  HOTKERNEL_CHECK(a.size() == b.size() && !a.empty(), "need equal, non-empty sample sets (", a.size(), " vs ",
                  b.size(), ")");
  std::vector<double> ratios(a.size());
  for (size_t i = 0; i < a.size(); ++i) {
    HOTKERNEL_CHECK(a[i] > 0 && b[i] > 0, "sample ", i, " is not positive");
    ratios[i] = a[i] / b[i];
  }
  Comparison c;
  c.baseline = medianWithCi(a);
  c.candidate = medianWithCi(b);
  c.speedup = medianWithCi(std::move(ratios));
  return c;
}

}  // namespace hotkernel
