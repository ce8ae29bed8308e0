#pragma once
// The attention tuner (Note [Choosing an attention backend] in
// kernels/src/SdpaFamily.cpp): for one recorded variant of
// aten::scaled_dot_product_attention, each of ATen's backends that takes it is
// checked against a float64 attention (Note [Attention checks] in
// src/SdpaTuner.cpp), then timed against the op as PyTorch runs it (its own
// choice) with the benchmark method; the fastest whose speed-up CI clears
// the threshold is the choice. Not a row op: no NVRTC, no row harness.

#include <functional>
#include <string>

#include <ATen/core/Tensor.h>

#include "hotkernel/kernels/SdpaFamily.h"
#include "hotkernel/optimizer/FamilyTuner.h"
#include "hotkernel/optimizer/TunerOptions.h"
#include "hotkernel/runtime/AttentionBackend.h"
#include "hotkernel/runtime/PlanTable.h"

namespace hotkernel {

// Note [The ATen reference] of the attention family: the composite op (PyTorch's
// own choice of backend) on query (TimedInput::in), key and value
// (args.columns[0], [1]) drawn in the variant's layouts by `input`.
AtenReference sdpaAtenReference(const kernels::SdpaVariant& v);

// The inputs of one call of v, drawn from `gen` on `device` (CPU when
// device < 0) in v's layouts (Note [Attention layouts]).
struct SdpaInput {
  at::Tensor query, key, value;
};
SdpaInput drawSdpaInput(const kernels::SdpaVariant& v, int device, at::Generator& gen);

// The float64 attention of `in` (top-left causal mask when v.causal, key/value
// head h / (heads / kvHeads) for query head h), computed by blocks of at most
// 256 MiB of scores; `yieldPoint` before each block (false: an undefined tensor).
at::Tensor sdpaReference(const kernels::SdpaVariant& v, const SdpaInput& in,
                         const std::function<bool()>& yieldPoint = {});

// The value check of Note [Attention checks]: "" when every element of `got`
// is within |eager - ref| + 4 units of the dtype's relative spacing times
// max |value| (+ the smallest normal) of the float64 attention of `in`, else
// how many are not and the first; "interrupted" when `yieldPoint` said stop.
std::string sdpaValuesWithinBound(const kernels::SdpaVariant& v, const SdpaInput& in, const at::Tensor& got,
                                  const at::Tensor& eager, const std::function<bool()>& yieldPoint = {});

// Note [Attention checks]: "" when `backend` computes v's attention on
// `device` (CPU when < 0), else what failed ("interrupted" when `yieldPoint`
// said stop). Throws nothing for a backend that refuses the variant: its
// error is the reason.
std::string checkSdpaBackend(AttentionBackend backend, const kernels::SdpaVariant& v, int device,
                             const std::function<bool()>& yieldPoint = {});

// Run on the calling thread on `device` (own stream, relaxed capture mode).
// Throws Error when the variant is not served or needs more than
// options.memoryCapBytes, or "tuning interrupted"; backends that fail are
// recorded in metrics. The outcome's family is "sdpa_backend"; an accepted
// outcome carries the choice's params and no cubin.
TuneOutcome tuneSdpa(const kernels::SdpaVariant& v, int device, const TunerOptions& options = {});

// The check of a cached choice (FamilyTuning's own check): its params must
// name a backend of the device, then checkSdpaBackend. "" or why not.
std::string checkCachedSdpa(const VariantKey& key, const std::string& paramsJson, const std::string& cubin,
                            const TunerOptions& options);

}  // namespace hotkernel
