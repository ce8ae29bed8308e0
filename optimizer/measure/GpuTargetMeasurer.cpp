#include "hotkernel/optimizer/GpuTargetMeasurer.h"

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGraphsC10Utils.h>
#include <c10/cuda/CUDAGuard.h>

#include <algorithm>

#include "hotkernel/kernels/DType.h"
#include "hotkernel/kernels/FamilyDescriptor.h"
#include "hotkernel/kernels/VariantOptions.h"
#include "hotkernel/optimizer/Benchmark.h"
#include "hotkernel/optimizer/Harness.h"
#include "hotkernel/optimizer/FamilyTuner.h"  // AtenReference
#include "hotkernel/optimizer/FamilyTuning.h"
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
  const kernels::FamilyDescriptor* family = kernels::familyForOp(op);
  HOTKERNEL_CHECK(family != nullptr, "no timing for ", op);
  HOTKERNEL_CHECK(family->servesKey(key), family->name, " does not serve the variant ", kernels::variantString(key));
  HOTKERNEL_CHECK(key.device >= 0, "timing needs a CUDA device, got device ", key.device);
  HOTKERNEL_CHECK(key.rows >= 1 && key.cols >= 1, "bad variant ", key.rows, "x", key.cols);
  const int device = key.device;
  const auto dtype = static_cast<kernels::DType>(key.dtype);
  // The timed input: [rows, cols], or [rows, cols * inner] for a key with an inner extent (no overflow: servesKey),
  // unless the family draws its own (AtenReference::input: the padded GEMMs' self and weight).
  const int64_t cols = kernels::rowLength(key);
  const int64_t l2 = at::cuda::getDeviceProperties(device)->l2CacheSize;
  // The call its tuner times candidates against (Note [The ATen reference]).
  const AtenReference reference = atenReferenceOf(*family, key);
  // A family with its own input (reference.input) needs its inputs and an output: twice its ideal bytes.
  const int64_t need = (reference.input ? 2 * static_cast<int64_t>(family->bytesMoved(key))
                                        : 2 * key.rows * cols * static_cast<int64_t>(kernels::elementSize(dtype))) +
                       2 * l2;
  const int64_t cap = capFor(device);
  HOTKERNEL_CHECK(need <= cap, "timing ", op, " ", kernels::variantString(key), " needs ~", need >> 20,
                  " MiB of GPU memory, over the optimizer's cap of ", cap >> 20, " MiB");
  c10::cuda::CUDAGuard deviceGuard(static_cast<c10::DeviceIndex>(device));
  c10::cuda::CUDAStreamCaptureModeGuard captureGuard(cudaStreamCaptureModeRelaxed);
  const auto opts = at::TensorOptions().dtype(scalarTypeOf(dtype)).device(at::kCUDA, device);
  at::Generator gen = timingGenerator(device);
  TimedInput timed;
  if (reference.input) {
    HOTKERNEL_CHECK(!options_.yieldPoint || options_.yieldPoint(), "benchmark interrupted");
    timed = reference.input(device, gen);
  } else {
    // Drawn in row slices, a yield point before each (the first before any GPU work).
    timed.in = buildInRowSlices(
        key.rows, cols, scalarTypeOf(dtype), device,
        [&](int64_t, int64_t k) { return at::randn({k, cols}, opts.dtype(at::kFloat)).mul_(4.0); },
        options_.yieldPoint);
    HOTKERNEL_CHECK(timed.in.defined(), "benchmark interrupted");
    timed.args = reference.timedArgs(timed.in, gen);
  }
  BenchmarkOptions bo;
  bo.pairs = options_.runs;
  bo.beforePair = options_.yieldPoint;
  const MedianCi t = benchmarkOne([&] { reference.call(timed); }, device, bo);  // allocates like a dispatcher call
  HOTKERNEL_CHECK(t.median > 0, "the timed ", op, " took no time");
  return t.median * 1e-6;
}

}  // namespace hotkernel
