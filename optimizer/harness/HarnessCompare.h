#pragma once

// The comparison of a call's outputs with the reference: each output under
// its own bound, in row slices, then output 0 against float64 and the
// family's invariant (the harness's checks and the tuner's checkOutputs).
// Internal to hotkernel::optimizer.

#include <ATen/core/Tensor.h>

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "hotkernel/optimizer/Harness.h"

namespace hotkernel::harness {

// Outputs of one call against the reference (the harness's checks and the
// tuner's timed launches: checkOutputs).
struct Comparer {
  const RowOpSpec& spec;  // general form
  kernels::DType dtype;
  std::function<void()> pause;  // a yield point between bounded units of work; throws Interrupted

  // One output of a check against its reference under its bound, in row
  // slices (Note [Bounded units of background GPU work]); the result and
  // message are those of the whole output at once. `boundMax`: the largest
  // finite bound seen (for the float64 check of output 0).
  bool compareOutput(size_t i, const at::Tensor& in, const RowOpArgs& args, const at::Tensor& out,
                     const std::vector<at::Tensor>& refs, double& err, double& boundMax, std::string& why) const;

  // Every output of a call on `in` (and `args`) under its own bound, then
  // output 0 against float64 and the family invariant; false + why on any
  // mismatch. `maxAbsError0`: the worst error of output 0 seen.
  bool compareAll(const at::Tensor& in, const RowOpArgs& args, const std::vector<at::Tensor>& outs, std::string& why,
                  double& maxAbsError0) const;
};

}  // namespace hotkernel::harness
