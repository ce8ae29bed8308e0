#include "hotkernel/optimizer/GpuTargetMeasurer.h"

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/ops/_fused_rms_norm_cuda_dispatch.h>
#include <ATen/ops/_log_softmax_cuda_dispatch.h>
#include <ATen/ops/nll_loss_forward_cuda_dispatch.h>
#include <ATen/ops/_softmax_cuda_dispatch.h>
#include <ATen/ops/native_layer_norm_cuda_dispatch.h>
#include <c10/cuda/CUDAGraphsC10Utils.h>
#include <c10/cuda/CUDAGuard.h>

#include <algorithm>

#include "hotkernel/kernels/DType.h"
#include "hotkernel/kernels/FamilyDescriptor.h"
#include "hotkernel/kernels/VariantOptions.h"
#include "hotkernel/optimizer/Benchmark.h"
#include "hotkernel/optimizer/Harness.h"
#include "hotkernel/optimizer/ReduceTuner.h"  // atenReduceLastDim
#include "hotkernel/optimizer/SlicedInput.h"
#include "hotkernel/runtime/Check.h"

namespace hotkernel {

GpuTargetMeasurer::GpuTargetMeasurer(GpuMeasurerOptions options) : options_(std::move(options)) {
  HOTKERNEL_CHECK(options_.runs >= 7, "runs must be >= 7, got ", options_.runs);
  HOTKERNEL_CHECK(options_.memoryCapBytes >= 0, "memoryCapBytes must be >= 0, got ", options_.memoryCapBytes);
}

int64_t GpuTargetMeasurer::copyBufferBytes(int64_t l2Bytes, int64_t memoryCapBytes) {
  constexpr int64_t kMax = int64_t{1} << 30;  // Note [Copy bandwidth peak]
  const int64_t flush = std::max<int64_t>(2 * l2Bytes, 1 << 20);
  const int64_t fit = (memoryCapBytes - flush) / 2;
  const int64_t bytes = std::min(kMax, fit) / 4096 * 4096;
  return bytes >= 2 * l2Bytes && bytes > 0 ? bytes : 0;
}

int64_t GpuTargetMeasurer::capFor(int device) const {
  if (options_.memoryCapBytes > 0) return options_.memoryCapBytes;
  return static_cast<int64_t>(at::cuda::getDeviceProperties(device)->totalGlobalMem / 4);
}

MachinePeaks GpuTargetMeasurer::measurePeaks(int device) {
  c10::cuda::CUDAGuard deviceGuard(static_cast<c10::DeviceIndex>(device));
  c10::cuda::CUDAStreamCaptureModeGuard captureGuard(cudaStreamCaptureModeRelaxed);
  const int64_t l2 = at::cuda::getDeviceProperties(device)->l2CacheSize;
  const int64_t cap = capFor(device);
  const int64_t bytes = copyBufferBytes(l2, cap);
  HOTKERNEL_CHECK(bytes > 0, "measuring the copy bandwidth needs ~", (4 * l2 + 2 * l2) >> 20,
                  " MiB of GPU memory, over the optimizer's cap of ", cap >> 20, " MiB");
  if (options_.yieldPoint) HOTKERNEL_CHECK(options_.yieldPoint(), "benchmark interrupted");  // before any GPU work
  const auto opts = at::TensorOptions().dtype(at::kByte).device(at::kCUDA, device);
  at::Tensor src = at::empty({bytes}, opts).fill_(1);
  at::Tensor dst = at::empty({bytes}, opts);
  BenchmarkOptions bo;
  bo.pairs = options_.runs;
  bo.beforePair = options_.yieldPoint;
  const MedianCi t = benchmarkOne([&] { dst.copy_(src, /*non_blocking=*/true); }, device, bo);
  HOTKERNEL_CHECK(t.median > 0, "the timed copy took no time");
  MachinePeaks peaks;
  peaks.copyBytesPerSecond = 2.0 * static_cast<double>(bytes) / (t.median * 1e-6);
  peaks.flopsPerSecond = 0;  // Note [Memory-bound families have no FLOP term]
  return peaks;
}

double GpuTargetMeasurer::measureSecondsPerCall(const std::string& op, const VariantKey& key) {
  const bool softmax = op == "aten::_softmax", logSoftmax = op == "aten::_log_softmax";
  const bool rmsNorm = op == "aten::_fused_rms_norm", layerNorm = op == "aten::native_layer_norm";
  const bool crossEntropy = op == "aten::cross_entropy_loss";
  const std::optional<kernels::ReduceOp> reduce = kernels::reduceOpOfAtenName(op);
  const kernels::FamilyDescriptor* family = kernels::familyForOp(op);
  HOTKERNEL_CHECK(family != nullptr, "no timing for ", op);
  HOTKERNEL_CHECK(family->servesKey(key), family->name, " does not serve the variant ", kernels::variantString(key));
  HOTKERNEL_CHECK(key.device >= 0, "timing needs a CUDA device, got device ", key.device);
  HOTKERNEL_CHECK(key.rows >= 1 && key.cols >= 1, "bad variant ", key.rows, "x", key.cols);
  const int device = key.device;
  const auto dtype = static_cast<kernels::DType>(key.dtype);
  const int64_t l2 = at::cuda::getDeviceProperties(device)->l2CacheSize;
  const int64_t need = 2 * key.rows * key.cols * static_cast<int64_t>(kernels::elementSize(dtype)) + 2 * l2;
  const int64_t cap = capFor(device);
  HOTKERNEL_CHECK(need <= cap, "timing ", op, " ", key.rows, "x", key.cols, " needs ~", need >> 20,
                  " MiB of GPU memory, over the optimizer's cap of ", cap >> 20, " MiB");
  c10::cuda::CUDAGuard deviceGuard(static_cast<c10::DeviceIndex>(device));
  c10::cuda::CUDAStreamCaptureModeGuard captureGuard(cudaStreamCaptureModeRelaxed);
  const auto opts = at::TensorOptions().dtype(scalarTypeOf(dtype)).device(at::kCUDA, device);
  // Drawn in row slices, a yield point before each (the first before any GPU work).
  const at::Tensor in = buildInRowSlices(
      key.rows, key.cols, scalarTypeOf(dtype), device,
      [&](int64_t, int64_t k) { return at::randn({k, key.cols}, opts.dtype(at::kFloat)).mul_(4.0); },
      options_.yieldPoint);
  HOTKERNEL_CHECK(in.defined(), "benchmark interrupted");
  BenchmarkOptions bo;
  bo.pairs = options_.runs;
  bo.beforePair = options_.yieldPoint;
  // The norms' columns as the variant has them (weights of both signs; the
  // eps the tuners time with).
  const at::Tensor weight = kernels::hasWeight(key) ? at::rand({key.cols}, opts.dtype(at::kFloat)).mul_(2.0).sub_(1.0).to(
                                                  opts.dtype())
                                            : at::Tensor();
  const at::Tensor bias =
      kernels::hasBias(key) ? at::rand({key.cols}, opts.dtype(at::kFloat)).sub_(0.5).to(opts.dtype()) : at::Tensor();
  const auto optional = [](const at::Tensor& t) { return t.defined() ? std::optional<at::Tensor>(t) : std::nullopt; };
  // cross_entropy_loss: class labels; timed as ATen's decomposition (_log_softmax, nll_loss_forward).
  const at::Tensor labels =
      crossEntropy ? at::randint(0, key.cols, {key.rows}, opts.dtype(at::kLong)) : at::Tensor();
  // Each call allocates its outputs, as a dispatcher call would.
  const MedianCi t = benchmarkOne(
      [&] {
        if (reduce) {
          (void)atenReduceLastDim(in, *reduce);  // at::cuda::<op> over dim -1
        } else if (softmax) {
          (void)at::cuda::_softmax(in, -1, false);
        } else if (logSoftmax) {
          (void)at::cuda::_log_softmax(in, -1, false);
        } else if (crossEntropy) {
          (void)at::cuda::nll_loss_forward(at::cuda::_log_softmax(in, 1, false), labels, std::nullopt,
                                           kernels::reductionOf(key), -100);
        } else if (rmsNorm) {
          (void)at::cuda::_fused_rms_norm(in, {key.cols}, optional(weight), 1e-6);
        } else {
          (void)at::cuda::native_layer_norm(in, {key.cols}, optional(weight), optional(bias), 1e-5);
        }
      },
      device, bo);
  HOTKERNEL_CHECK(t.median > 0, "the timed ", op, " took no time");
  return t.median * 1e-6;
}

}  // namespace hotkernel
