#pragma once
// What the norm tuners share (NormTuner.cpp: rms_norm and layer_norm;
// GroupNormTuner.cpp: group_norm): the harness's draws of weights, biases and
// eps, ATen's own statistics error, the candidates' pointer and shape rules,
// the plan call with its workspace, the search's point encoding, the tuning
// rows and the timed inputs. Internal to hotkernel::optimizer.

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "hotkernel/kernels/FamilyDescriptor.h"
#include "hotkernel/kernels/NormCommon.h"
#include "hotkernel/optimizer/FamilyTuner.h"
#include "hotkernel/optimizer/Harness.h"
#include "hotkernel/optimizer/TunerOptions.h"
#include "hotkernel/runtime/CudaDriver.h"

namespace hotkernel::norm_tuning {

// Note [Norm harness arguments] in NormTuning.cpp.
std::optional<double> drawEps(at::Generator& gen, bool allowNone);
// `cols` values uniform in [-scale, scale), of `dtype`, on the current CUDA device.
at::Tensor drawColumn(int64_t cols, kernels::DType dtype, double scale, at::Generator& gen);
std::optional<at::Tensor> optionalOf(const at::Tensor& t);
const void* pointerOf(const at::Tensor& t);

// |ATen's rstd - rstd64| of each row of `in` [rows, cols] (Note [Norm harness
// bounds]): layer_norm's from the float64 biased variance, rms_norm's from the
// float64 mean of squares; 0 where ATen's is NaN or infinite.
at::Tensor atenRstdError(const at::Tensor& in, const at::Tensor& refRstd, double eps);
at::Tensor atenRmsRstdError(const at::Tensor& in, const at::Tensor& refRstd, double eps);
// The scale of each row a mean's error is relative to: 1 / rstd, or the row's
// largest |x| where rstd is 0 or not finite.
at::Tensor rowScale(const at::Tensor& in, const at::Tensor& refRstd);

// A norm family's tolerance table (its tolerance(dtype, cols)).
using NormToleranceOf = kernels::NormTolerance (*)(kernels::DType dtype, int64_t cols);
// The "mean" and "rstd" outputs of layer_norm's and group_norm's specs under the family's
// statRel (Note [Norm harness bounds]): the mean's relative to the row's scale (rowScale), rstd's
// with ATen's own error against float64 added (atenRstdError; eps the check's first scalar).
RowOpOutput normMeanOutput(NormToleranceOf tolerance);
RowOpOutput normRstdOutput(NormToleranceOf tolerance);

// A norm launch's last two arguments: the workspace the harness or the plan
// call appends after the outputs (`outs[first]`, its last float the counter),
// else null.
KernelArgs& withWorkspace(KernelArgs& args, const std::vector<at::Tensor>& outs, size_t first);
// hk_layer_norm's argument list in a check (layer_norm, group_norm, batch_norm): the check's columns 0 and 1 as
// weight and bias (null when undefined), out, mean and rstd, `eps` as the kernel takes it, then the workspace.
KernelArgs layerNormKernelArgs(const at::Tensor& in, const RowOpArgs& a, const std::vector<at::Tensor>& outs,
                               float eps);

// What every norm candidate adds to its family's: in != out, both aligned; a
// cubin compiled for one column count runs on that count only; a grid split
// on the variant's rows or fewer.
void finishNormCandidate(HarnessCandidate& c, int64_t rows, int64_t cols, const kernels::NormParams& p,
                         bool colsSpecialized);
// A plan called as the trampolines call it (a grid split takes the stream's persistent workspace).
std::function<bool(const Plan&, const TimedInput&, const std::vector<at::Tensor>&)> normPlanCall(
    const RowOpSpec& harnessSpec);

// A norm point as the search's point and back.
FamilyPoint toPoint(const kernels::NormParams& p);
kernels::NormParams toParams(const FamilyPoint& p);

// The rows a norm spec's variant is tuned on (Note [Tuning on a row subset]).
void chooseNormTuningRows(FamilyTuneSpec& spec, int device, const TunerOptions& options);
// The search itself.
TuneOutcome runNormSearch(const FamilyTuneSpec& spec, int device, const TunerOptions& options);
// The timed calls' inputs with the spec's weights, bias and eps (a yield point before each).
std::vector<TimedInput> benchInputs(const RowOpSpec& spec, kernels::DType dtype, int64_t rows, int64_t cols,
                                    int device, const std::function<bool()>& yieldPoint);

// What a norm family's tune spec holds before its tuner's own parts: the family's names and
// source, the variant's dtype and extent, the points valid for it on `device` (split-row points
// only where the GPU runs them) and its space's seeds, each a NormParams point.
template <typename Family, typename Variant>
FamilyTuneSpec normTuneSpecOf(const Variant& v, int device, const char* program) {
  FamilyTuneSpec spec;
  spec.family = Family::kName;
  spec.kernelName = Family::kKernelName;
  spec.source = Family::source();
  spec.program = program;
  spec.dtype = v.dtype;
  spec.rows = v.rows;
  spec.cols = v.cols;
  const DeviceInfo info = queryDevice(device);
  const int computeCapability = info.ccMajor * 10 + info.ccMinor;
  for (const kernels::NormParams& p : Family::allParameterPoints(v.dtype)) {
    if (Family::guardParams(v, p) && p.minComputeCapability() <= computeCapability) {
      spec.validPoints.push_back(toPoint(p));
    }
  }
  for (const kernels::NormParams& p : Family::parameterSpace(v, computeCapability)) spec.seeds.push_back(toPoint(p));
  spec.paramsJson = [](const FamilyPoint& p) { return toParams(p).toJson(); };
  return spec;
}

// The rest of a norm tune spec once its harness spec is set: the tuning rows, the timed plan
// (`keyOf` the key of the tuned rows; the engine makes the full variant's plan from the outcome)
// through `family`, the timed inputs and the timed calls (the original kernel and a plan, each
// allocating its outputs).
void finishNormTuneSpec(FamilyTuneSpec& spec, const kernels::FamilyDescriptor& family,
                        const std::function<VariantKey(int64_t rows)>& keyOf, int device, const TunerOptions& options);

}  // namespace hotkernel::norm_tuning
