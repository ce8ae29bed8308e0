#pragma once
// A family's kernel for a variant at its tuner's first seed point, compiled as
// its tuner compiles it (Note [A tuner's spec]): what the GPU tests of the
// check before first use store as cached kernels.

#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAGraphsC10Utils.h>

#include <string>

#include "hotkernel/kernels/FamilyDescriptor.h"
#include "hotkernel/optimizer/FamilyTuner.h"
#include "hotkernel/optimizer/FamilyTuning.h"
#include "hotkernel/runtime/CudaDriver.h"
#include "hotkernel/runtime/Nvrtc.h"

namespace hotkernel::gputest {

struct SeedKernel {
  std::string params;  // the entry's JSON text
  std::string kernelName;
  std::string cubin;   // empty: the spec had no seed point
};

inline SeedKernel seedKernel(const kernels::FamilyDescriptor& family, const VariantKey& key,
                             const TunerOptions& options) {
  c10::cuda::CUDAGuard deviceGuard(static_cast<c10::DeviceIndex>(key.device));
  c10::cuda::CUDAStreamCaptureModeGuard captureGuard(cudaStreamCaptureModeRelaxed);
  c10::cuda::CUDAStreamGuard streamGuard(at::cuda::getStreamFromPool(false, key.device));
  const FamilyTuneSpec spec = familyTuneSpecOf(family, key, options);
  if (spec.seeds.empty()) return {};
  const FamilyPoint point = spec.seeds.front();
  const std::string arch = queryDevice(key.device).nvrtcArch();
  return {spec.paramsJson(point).dump(), spec.kernelName,
          compileToCubin(spec.source, spec.program, arch, spec.compileOptions(point)).cubin};
}

}  // namespace hotkernel::gputest
