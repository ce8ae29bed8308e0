#pragma once
// How far a computed chain output is from the interpreter's, in units of the
// output dtype's spacing: the chain tests' one measure (CPU and GPU).
//
// Note [Units in the subnormal range]
// A dtype's spacing at y is 2^(e - mantissa) for y's exponent e, but never
// below the spacing of its subnormals, 2^(emin - mantissa): softmax rows of
// hundreds of columns give fp16 probabilities under 2^-14, where one step of
// the last bit is 2^-24 whatever the value. Measuring there with y's own
// exponent counts one rounding step as 2^(emin - e) units.
//
// Note [Units of a cancelling output]
// An output that ends in a sum of terms of opposite signs (a LayerNorm's
// y * w + b) can be near 0 where its terms are not: a last-bit difference
// of the float32 terms is then many steps of the tiny result, or any number
// of them where one side rounds to exactly 0. Such an output is measured at
// the spacing of max(|y|, floor), floor being its terms' magnitude.

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "hotkernel/chain/ChainIR.h"

namespace hotkernel {

// The spacing of dtype's values at |y| (Note [Units in the subnormal range]).
inline double chainSpacingAt(float y, chain::DType dtype) {
  const int mantissa = dtype == chain::DType::Float32 ? 23 : dtype == chain::DType::Float16 ? 10 : 7;
  const int minExponent = dtype == chain::DType::Float16 ? -14 : -126;
  const int e = y == 0 ? minExponent : std::max(std::ilogb(std::fabs(y)), minExponent);
  return std::ldexp(1.0, e - mantissa);
}

struct ChainDifference {
  int64_t differing = 0, total = 0;
  double worstUnits = 0;  // largest |got - want| in units of the spacing at want
};

// floor: Note [Units of a cancelling output] (0: the spacing at the wanted value itself).
inline ChainDifference compareWithInterpreted(const at::Tensor& got, const std::vector<float>& want,
                                              chain::DType dtype, float floor = 0) {
  const at::Tensor flat = got.to(at::kFloat).cpu().contiguous().reshape({-1});
  EXPECT_EQ(flat.numel(), static_cast<int64_t>(want.size()));
  ChainDifference d;
  d.total = flat.numel();
  const float* a = flat.data_ptr<float>();
  for (int64_t i = 0; i < d.total && i < static_cast<int64_t>(want.size()); ++i) {
    const float x = a[i], y = want[static_cast<size_t>(i)];
    if (x == y || (std::isnan(x) && std::isnan(y))) continue;
    ++d.differing;
    const float at = std::max(std::fabs(y), floor);
    d.worstUnits = std::max(d.worstUnits, std::fabs(static_cast<double>(x) - y) / chainSpacingAt(at, dtype));
  }
  return d;
}

}  // namespace hotkernel
