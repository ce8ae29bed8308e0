#include "NormCall.h"

#include <c10/cuda/CUDAStream.h>

#include "FamilyDType.h"
#include "RecordedArgs.h"
#include "hotkernel/kernels/DType.h"
#include "hotkernel/kernels/VariantOptions.h"
#include "hotkernel/runtime/StreamWorkspace.h"

namespace hotkernel {
namespace {

// A defined weight or bias the kernels can take: the input's dtype and
// device, contiguous, shaped like the normalized dims.
bool usableColumn(const at::Tensor& t, const at::Tensor& input, at::IntArrayRef normalizedShape) {
  return t.scalar_type() == input.scalar_type() && t.device() == input.device() && t.is_contiguous() &&
         t.sizes() == normalizedShape;
}

}  // namespace

std::optional<NormCall> normCallOf(const at::Tensor& input, at::IntArrayRef normalizedShape,
                                   const std::optional<at::Tensor>& weight, const std::optional<at::Tensor>& bias) {
  if (!input.defined() || input.numel() == 0 || !input.is_contiguous()) return std::nullopt;
  const std::optional<kernels::DType> code = familyDTypeOf(input.scalar_type());
  if (!code) return std::nullopt;
  const int64_t nd = input.dim(), nn = static_cast<int64_t>(normalizedShape.size());
  if (nn < 1 || nd < nn) return std::nullopt;
  if (input.sizes().slice(nd - nn) != normalizedShape) return std::nullopt;
  NormCall call;
  call.key.dtype = static_cast<int32_t>(*code);
  call.key.device = input.is_cpu() ? -1 : input.device().index();
  call.key.cols = 1;
  for (int64_t d : normalizedShape) call.key.cols *= d;
  call.key.rows = input.numel() / call.key.cols;
  if (weight && weight->defined()) {
    if (!usableColumn(*weight, input, normalizedShape)) return std::nullopt;
    call.key.options |= kernels::variant_options::kWeight;
  }
  if (bias && bias->defined()) {
    if (!usableColumn(*bias, input, normalizedShape)) return std::nullopt;
    call.key.options |= kernels::variant_options::kBias;
  }
  call.statShape.assign(input.sizes().begin(), input.sizes().begin() + (nd - nn));
  call.statShape.insert(call.statShape.end(), static_cast<size_t>(nn), 1);
  return call;
}

NormWorkspace normWorkspaceFor(const Plan& plan, const at::Tensor& input, void* stream) {
  NormWorkspace w;
  if (plan.workspaceFloats <= 0) return w;
  w.buffer = StreamWorkspaces::global().forLaunchOn(plan.workspaceFloats, input, stream);
  w.partials = w.buffer.mutable_data_ptr<float>();
  w.counter = w.partials + (w.buffer.numel() - 1);
  return w;
}

bool launchLayerNormPlan(const Plan& plan, const VariantKey& key, const at::Tensor& input, const void* weight,
                         const void* bias, const at::Tensor& out, const at::Tensor& mean, const at::Tensor& rstd,
                         float eps) {
  void* stream = input.is_cuda() ? c10::cuda::getCurrentCUDAStream(input.device().index()).stream() : nullptr;
  const NormWorkspace work = normWorkspaceFor(plan, input, stream);
  return plan.launcher->launchArgs(KernelArgs()
                                       .pointer(input.const_data_ptr())
                                       .pointer(weight)
                                       .pointer(bias)
                                       .pointer(out.mutable_data_ptr())
                                       .pointer(mean.mutable_data_ptr())
                                       .pointer(rstd.mutable_data_ptr())
                                       .int64(key.rows)
                                       .int64(key.cols)
                                       .float32(eps)
                                       .pointer(work.partials)
                                       .pointer(work.counter),
                                   stream);
}

std::optional<VariantKey> recordedNormKey(const at::RecordFunction& call, bool hasBiasArgument) {
  if (call.num_inputs() < (hasBiasArgument ? 5u : 4u)) return std::nullopt;
  auto inputs = call.inputs();
  if (!inputs[0].isTensor()) return std::nullopt;
  const std::optional<std::vector<int64_t>> shape = recordedSizes(inputs[1]);
  if (!shape) return std::nullopt;
  std::optional<at::Tensor> weight, bias;
  if (!recordedOptionalTensor(inputs[2], weight)) return std::nullopt;
  if (hasBiasArgument && !recordedOptionalTensor(inputs[3], bias)) return std::nullopt;
  std::optional<NormCall> normCall = normCallOf(inputs[0].toTensor(), *shape, weight, bias);
  if (!normCall) return std::nullopt;
  return normCall->key;
}

}  // namespace hotkernel
