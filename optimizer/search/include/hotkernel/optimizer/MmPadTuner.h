#pragma once
// The mm_pad_n and addmm_pad_n tuner (Note [Padded GEMMs] in
// kernels/src/MmPadFamily.cpp): for one recorded variant of aten::mm or
// aten::addmm (v.bias), each point of the family's copy kernel is
// compiled with NVRTC, its whole plan (pad, ATen's mm, copy: runPaddedMm) is
// checked against ATen's mm and a float64 GEMM (Note [Padded GEMM checks]),
// then timed against ATen's op with the benchmark method; the fastest whose
// speed-up CI clears the threshold is accepted. The family is not a row op,
// so it does not go through the row harness or tuneFamily: it has its own
// checks and its own check of a cached kernel before first use.

#include <functional>
#include <string>

#include "hotkernel/kernels/MmPadFamily.h"
#include "hotkernel/optimizer/FamilyTuner.h"
#include "hotkernel/optimizer/TunerOptions.h"
#include "hotkernel/runtime/PlanTable.h"

namespace hotkernel {

// Note [The ATen reference] of the padded GEMMs: at::cuda::mm(self, w.t()) on
// self [m, k] and a weight [n, k] (TimedInput::in and args.columns[0]), or
// at::cuda::addmm with a bias [n] (args.columns[1]); `input` draws them (the
// measurer's input is not [rows, cols]).
AtenReference mmPadAtenReference(const kernels::MmPadVariant& v);

// Note [Padded GEMM checks]: "" when `plan` (an mm_pad_n plan for v) computes
// aten::mm's result on `device`, else what failed. On inputs drawn at v's
// shape: the result has eager's sizes and strides; every element, written
// over buffers filled with NaN, is within |eager - ref| + 2 units of the
// dtype's relative spacing of a float64 GEMM's ref + the float32 summation
// bound of its dot product (2 * K * 2^-24 * (|self| |weight|^T)); a second run gives the
// same bits; with a NaN in self and an infinity in the weight, NaN and
// infinities fall where eager's do. `yieldPoint` is called before each unit
// of GPU work (false: "interrupted").
std::string checkMmPadPlan(const Plan& plan, const kernels::MmPadVariant& v, int device,
                           const std::function<bool()>& yieldPoint = {});

// The value check of Note [Padded GEMM checks] on any device: "" when every
// element of `got` (self [M, K] times weight [N, K] transposed, plus `bias`
// [N] when defined, `dtype`) is
// within the bound of a float64 GEMM given eager's result, else how many are
// not and the first (with its bound). The float64 GEMM runs by row blocks;
// `yieldPoint` before each (false: "interrupted").
std::string mmValuesWithinBound(const at::Tensor& self, const at::Tensor& weight, const at::Tensor& bias,
                                const at::Tensor& got, const at::Tensor& eager, kernels::DType dtype,
                                const std::function<bool()>& yieldPoint = {});

// Run on the calling thread on `device` (own stream, relaxed capture mode).
// Throws Error when the variant cannot be tuned (not served, NVRTC missing,
// over options.memoryCapBytes) or "tuning interrupted"; failed candidates are
// recorded in metrics. The outcome's family is "mm_pad_n" or "addmm_pad_n".
// With options.clock, no further point is started once the target's budget is
// spent (the best so far is kept; the search's stop "OutOfTime") and the
// outcome's metrics carry the target's summary.
TuneOutcome tuneMmPad(const kernels::MmPadVariant& v, int device, const TunerOptions& options = {});

// The check of a cached mm_pad_n kernel before first use (Note [Cached kernels
// checked before first use] in CachedKernelCheck.h): its parameters must be
// one of the family's points, then checkMmPadPlan on its plan. "" or why not.
std::string checkCachedMmPad(const VariantKey& key, const std::string& paramsJson, const std::string& cubin,
                             const TunerOptions& options);

}  // namespace hotkernel
