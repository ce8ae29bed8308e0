#include "hotkernel/runtime/GpuUtilization.h"

#include <dlfcn.h>

#include <mutex>

#include "hotkernel/runtime/Logging.h"

namespace hotkernel {
namespace {

// The few NVML declarations used (nvml.h, stable ABI).
using nvmlReturn_t = int;
using nvmlDevice_t = void*;
struct nvmlUtilization_t {
  unsigned int gpu;
  unsigned int memory;
};
constexpr nvmlReturn_t kNvmlSuccess = 0;

struct NvmlApi {
  nvmlReturn_t (*init)() = nullptr;
  nvmlReturn_t (*byPciBusId)(const char*, nvmlDevice_t*) = nullptr;
  nvmlReturn_t (*utilization)(nvmlDevice_t, nvmlUtilization_t*) = nullptr;
  const char* (*errorString)(nvmlReturn_t) = nullptr;
};

// Loaded and initialized once per process; never unloaded (Note [NVML utilization as an idle signal]).
const NvmlApi* nvml(std::string* why) {
  static std::once_flag once;
  static NvmlApi api;
  static std::string failure;
  static bool ok = false;
  std::call_once(once, [] {
    void* h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      const char* e = dlerror();
      failure = std::string("cannot load libnvidia-ml.so.1: ") + (e ? e : "?");
      return;
    }
    api.init = reinterpret_cast<nvmlReturn_t (*)()>(dlsym(h, "nvmlInit_v2"));
    api.byPciBusId = reinterpret_cast<nvmlReturn_t (*)(const char*, nvmlDevice_t*)>(
        dlsym(h, "nvmlDeviceGetHandleByPciBusId_v2"));
    api.utilization = reinterpret_cast<nvmlReturn_t (*)(nvmlDevice_t, nvmlUtilization_t*)>(
        dlsym(h, "nvmlDeviceGetUtilizationRates"));
    api.errorString = reinterpret_cast<const char* (*)(nvmlReturn_t)>(dlsym(h, "nvmlErrorString"));
    if (!api.init || !api.byPciBusId || !api.utilization) {
      failure = "libnvidia-ml.so.1 lacks nvmlInit_v2, nvmlDeviceGetHandleByPciBusId_v2 or "
                "nvmlDeviceGetUtilizationRates";
      return;
    }
    const nvmlReturn_t rc = api.init();
    if (rc != kNvmlSuccess) {
      failure = std::string("nvmlInit_v2 failed: ") + (api.errorString ? api.errorString(rc) : std::to_string(rc));
      return;
    }
    ok = true;
  });
  if (!ok && why) *why = failure;
  return ok ? &api : nullptr;
}

class NvmlUtilization final : public GpuUtilization {
 public:
  NvmlUtilization(const NvmlApi* api, nvmlDevice_t device) : api_(api), device_(device) {}
  std::optional<int> percent() override {
    nvmlUtilization_t u{};
    const nvmlReturn_t rc = api_->utilization(device_, &u);
    if (rc != kNvmlSuccess) {
      HOTKERNEL_LOG_ONCE(Warn, "nvml-utilization")
          << "reading the GPU utilization (NVML) failed ("
          << (api_->errorString ? api_->errorString(rc) : std::to_string(rc))
          << "); the idle gate uses the dispatch signal alone";
      return std::nullopt;
    }
    return static_cast<int>(u.gpu);
  }

 private:
  const NvmlApi* api_;
  nvmlDevice_t device_;
};

}  // namespace

std::unique_ptr<GpuUtilization> openNvmlUtilization(const std::string& pciBusId, std::string* why) {
  const NvmlApi* api = nvml(why);
  if (!api) return nullptr;
  nvmlDevice_t device = nullptr;
  const nvmlReturn_t rc = api->byPciBusId(pciBusId.c_str(), &device);
  if (rc != kNvmlSuccess) {
    if (why) {
      *why = "NVML has no device at PCI bus id " + pciBusId + ": " +
             (api->errorString ? api->errorString(rc) : std::to_string(rc));
    }
    return nullptr;
  }
  return std::make_unique<NvmlUtilization>(api, device);
}

}  // namespace hotkernel
