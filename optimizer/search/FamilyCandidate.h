#pragma once

// A family's harness candidate: what every family tuner (rms_norm,
// layer_norm, cross_entropy, the reductions) builds the same way from one
// (variant, parameter point, cubin). Internal to hotkernel::optimizer.
//
// Note [A family's harness candidate]
// The harness runs a candidate on shapes other than the tuned variant's (the
// sweep, the edge cases): `geometry` and `acceptsShape` answer for any
// (rows, cols) by copying the variant, replacing its rows and cols and asking
// the family (launchGeometry; guardVariant and guardParams), so the harness
// never launches a point on a shape its guard refuses. Everything else of the
// variant (dtype, weight and bias flags, reduction, op) stays the tuned one.
// What differs per family, the pointer guard and the output's alignment, the
// caller sets on the returned candidate.
//
// Family needs: kKernelName, launchGeometry(Variant, Params),
// guardVariant(Variant), guardParams(Variant, Params) and
// requiredAlignment(DType, Params); Variant has dtype, rows and cols; Params
// has describe().

#include <cstdint>
#include <string>

#include "hotkernel/optimizer/Harness.h"

namespace hotkernel::detail {

template <typename Family, typename Variant, typename Params>
HarnessCandidate familyCandidate(const Variant& v, const Params& p, const std::string& cubin,
                                 const std::string& familyName) {
  HarnessCandidate c;
  c.cubin = cubin;
  c.kernelName = Family::kKernelName;
  c.description = familyName + "[" + p.describe() + "]";
  const auto reshaped = [v](int64_t rows, int64_t cols) {
    Variant w = v;
    w.rows = rows;
    w.cols = cols;
    return w;
  };
  c.geometry = [reshaped, p](int64_t rows, int64_t cols) {
    const kernels::LaunchGeometry g = Family::launchGeometry(reshaped(rows, cols), p);
    return LaunchGeometry{g.gridX, g.blockX, g.sharedBytes, g.cooperative};
  };
  c.acceptsShape = [reshaped, p](int64_t rows, int64_t cols) {
    const Variant w = reshaped(rows, cols);
    return Family::guardVariant(w) && Family::guardParams(w, p);
  };
  c.alignment = Family::requiredAlignment(v.dtype, p);
  return c;
}

}  // namespace hotkernel::detail
