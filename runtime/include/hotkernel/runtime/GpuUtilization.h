#pragma once
// The device's utilization as NVML reports it: an optional idle signal.
//
// Note [NVML utilization as an idle signal]
// HOTKERNEL_IDLE_MAX_UTIL (percent; unset: not used) adds a condition to the
// idle gate: the device's utilization (nvmlDeviceGetUtilizationRates: the
// share of the last sample period, 1/6 s to 1 s, in which a kernel ran) must
// be at most that much. It sees work the dispatch signal cannot: other
// processes on the same GPU. It cannot tell the optimizer's own kernels from
// anyone else's, so the gate reads it only while the optimizer runs no GPU
// work: before a job starts and, after a pause, before it resumes (by then
// its last unit of work is a few milliseconds of the sample period). NVML is
// dlopen'ed at run time (libnvidia-ml.so.1; no link dependency); the device
// is found by its PCI bus id, which CUDA and NVML number alike whatever
// CUDA_VISIBLE_DEVICES says. Any failure (no library, no device, a read
// that fails) is logged once and the gate falls back to the dispatch signal
// (a read that fails counts as "allows"). The interface is thin so that the
// gate is tested on the CPU with a fake.

#include <memory>
#include <optional>
#include <string>

namespace hotkernel {

class GpuUtilization {
 public:
  virtual ~GpuUtilization() = default;
  // Percent of the last sample period in which the device ran kernels;
  // nullopt when it cannot be read now.
  virtual std::optional<int> percent() = 0;
};

// NVML's utilization of the device at `pciBusId` ("domain:bus:device.function",
// hex, as cudaDeviceGetPCIBusId writes it). Null (and `why` set) when NVML or
// the device is unavailable.
std::unique_ptr<GpuUtilization> openNvmlUtilization(const std::string& pciBusId, std::string* why);

// Whether `percent` allows the optimizer to run under `maxPercent`
// (maxPercent < 0: not used; an unreadable utilization allows).
inline bool utilizationAllows(std::optional<int> percent, int maxPercent) {
  return maxPercent < 0 || !percent || *percent <= maxPercent;
}

}  // namespace hotkernel
