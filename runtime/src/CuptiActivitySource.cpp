#include "hotkernel/runtime/CuptiActivitySource.h"

#include <cupti.h>
#include <dlfcn.h>

#include <atomic>
#include <cstdlib>
#include <string>

namespace hotkernel {
namespace {

// Note [GPU time from CUPTI]: the buffers' size and how many may be outstanding.
constexpr size_t kBufferBytes = size_t{1} << 20;
constexpr int kMaxBuffers = 64;
constexpr CUpti_ExternalCorrelationKind kExternalKind = CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2;

// The kernel-launch API calls whose activity records carry the external correlation.
constexpr CUpti_CallbackId kRuntimeLaunches[] = {
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_v9000,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_ptsz_v9000,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060,
    CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000,
    CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_ptsz_v13000,
};
constexpr CUpti_CallbackId kDriverLaunches[] = {
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz,
};

// Note [Launch API records only]: what start enables, in this order (refuse disables it again).
constexpr CUpti_ActivityKind kKinds[] = {
    CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION,
    CUPTI_ACTIVITY_KIND_RUNTIME,
    CUPTI_ACTIVITY_KIND_DRIVER,
    CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
};

template <size_t N>
bool isOneOf(uint32_t id, const CUpti_CallbackId (&ids)[N]) {
  for (CUpti_CallbackId candidate : ids) {
    if (candidate == id) return true;
  }
  return false;
}

// libcupti's entry points, resolved once by load().
struct CuptiApi {
  decltype(&cuptiGetVersion) getVersion = nullptr;
  decltype(&cuptiGetResultString) resultString = nullptr;
  decltype(&cuptiSubscribe) subscribe = nullptr;
  decltype(&cuptiUnsubscribe) unsubscribe = nullptr;
  decltype(&cuptiActivityRegisterCallbacks) registerCallbacks = nullptr;
  decltype(&cuptiActivityEnable) enable = nullptr;
  decltype(&cuptiActivityDisable) disable = nullptr;
  decltype(&cuptiActivityEnableRuntimeApi) enableRuntimeApi = nullptr;
  decltype(&cuptiActivityEnableDriverApi) enableDriverApi = nullptr;
  decltype(&cuptiActivityFlushAll) flushAll = nullptr;
  decltype(&cuptiActivityGetNextRecord) nextRecord = nullptr;
  decltype(&cuptiActivityGetNumDroppedRecords) droppedRecords = nullptr;
  decltype(&cuptiActivityPushExternalCorrelationId) push = nullptr;
  decltype(&cuptiActivityPopExternalCorrelationId) pop = nullptr;
};

template <typename Fn>
bool resolve(void* lib, const char* name, Fn* fn) {
  *fn = reinterpret_cast<Fn>(::dlsym(lib, name));
  return *fn != nullptr;
}

// libcupti: the copy already in the process first (libtorch_cpu links it), else one from the
// usual places. "" and *api set, or why none is usable.
std::string load(CuptiApi* api) {
  static const char* const kNames[] = {"libcupti.so.13", "libcupti.so"};
  static const char* const kPaths[] = {"libcupti.so.13", "libcupti.so", "/usr/local/cuda/lib64/libcupti.so.13",
                                       "/usr/local/cuda/extras/CUPTI/lib64/libcupti.so.13"};
  void* lib = nullptr;
  for (const char* name : kNames) {
    if ((lib = ::dlopen(name, RTLD_NOW | RTLD_NOLOAD)) != nullptr) break;
  }
  std::string lastError;
  for (const char* path : kPaths) {
    if (lib) break;
    lib = ::dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      const char* e = ::dlerror();
      lastError = e ? e : path;
    }
  }
  if (!lib) return "libcupti cannot be loaded (" + lastError + ")";
  const bool all = resolve(lib, "cuptiGetVersion", &api->getVersion) &&
                   resolve(lib, "cuptiGetResultString", &api->resultString) &&
                   resolve(lib, "cuptiSubscribe", &api->subscribe) &&
                   resolve(lib, "cuptiUnsubscribe", &api->unsubscribe) &&
                   resolve(lib, "cuptiActivityRegisterCallbacks", &api->registerCallbacks) &&
                   resolve(lib, "cuptiActivityEnable", &api->enable) &&
                   resolve(lib, "cuptiActivityDisable", &api->disable) &&
                   resolve(lib, "cuptiActivityEnableRuntimeApi", &api->enableRuntimeApi) &&
                   resolve(lib, "cuptiActivityEnableDriverApi", &api->enableDriverApi) &&
                   resolve(lib, "cuptiActivityFlushAll", &api->flushAll) &&
                   resolve(lib, "cuptiActivityGetNextRecord", &api->nextRecord) &&
                   resolve(lib, "cuptiActivityGetNumDroppedRecords", &api->droppedRecords) &&
                   resolve(lib, "cuptiActivityPushExternalCorrelationId", &api->push) &&
                   resolve(lib, "cuptiActivityPopExternalCorrelationId", &api->pop);
  if (!all) return "libcupti lacks an entry point the attribution needs (an older CUPTI)";
  uint32_t version = 0;
  if (api->getVersion(&version) != CUPTI_SUCCESS) return "libcupti does not report its version";
  // The records are read with this build's header: the library must be of its major version.
  if (version / 10000 != CUPTI_API_VERSION / 10000) {
    return "libcupti's API version " + std::to_string(version) + " is not the build's (" +
           std::to_string(CUPTI_API_VERSION) + ")";
  }
  return "";
}

void CUPTIAPI ignoreCallback(void*, CUpti_CallbackDomain, CUpti_CallbackId, const void*) {}

class CuptiActivitySource;
// The started source, for CUPTI's process-wide buffer callbacks (they carry no user data).
std::atomic<CuptiActivitySource*> gSource{nullptr};

class CuptiActivitySource final : public ActivitySource {
 public:
  ActivityStart start(ActivitySink* sink) override {
    try {
      return startImpl(sink);
    } catch (...) {
      return {ActivityStartState::Failed, "CUPTI could not be started"};
    }
  }

  void pushExternalId(uint64_t id) override {
    if (started_.load(std::memory_order_acquire)) api_.push(kExternalKind, id);
  }

  void popExternalId() override {
    uint64_t last = 0;
    if (started_.load(std::memory_order_acquire)) api_.pop(kExternalKind, &last);
  }

  void flush() override {
    if (started_.load(std::memory_order_acquire) && !handedOver_.load(std::memory_order_acquire)) {
      api_.flushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    }
  }

  void handOver() override {
    if (!started_.load(std::memory_order_acquire) || handedOver_.exchange(true)) return;
    // The new client registered its buffer callbacks already: CUPTI completes this source's buffer into
    // them (kineto drops a buffer it did not hand out) and asks them for the next one. The kinds stay
    // enabled: they are process-wide, and the new client enabled the same ones.
    gSource.store(nullptr, std::memory_order_release);
    api_.flushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  }

  std::string takenOver() override {
    if (!started_.load(std::memory_order_acquire)) return "";
    if (handedOver_.load(std::memory_order_acquire)) {
      return "the PyTorch profiler started in this process: hotkernel handed the CUPTI activity records over to "
             "it; GPU time after that is not attributed";
    }
    // Note [GPU time from CUPTI]: a subscriber that came after start is a client that took CUPTI over.
    CUpti_SubscriberHandle probe = nullptr;
    const CUptiResult r = api_.subscribe(&probe, reinterpret_cast<CUpti_CallbackFunc>(&ignoreCallback), nullptr);
    if (r == CUPTI_SUCCESS) {
      api_.unsubscribe(probe);
      return "";
    }
    if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
      return "another CUPTI client (torch.profiler, Nsight) started after hotkernel and took the activity records "
             "over: GPU time after that is missing";
    }
    return "";
  }

  // CUPTI's buffer callbacks (its own thread, or the thread in flush()).
  static void CUPTIAPI bufferRequested(uint8_t** buffer, size_t* size, size_t* maxNumRecords) {
    *buffer = nullptr;
    *size = 0;
    *maxNumRecords = 0;
    CuptiActivitySource* self = gSource.load(std::memory_order_acquire);
    if (!self || self->outstanding_.fetch_add(1) >= kMaxBuffers) {
      if (self) self->outstanding_.fetch_sub(1);
      return;  // CUPTI drops the records and counts them
    }
    void* p = std::aligned_alloc(8, kBufferBytes);
    if (!p) {
      self->outstanding_.fetch_sub(1);
      return;
    }
    *buffer = static_cast<uint8_t*>(p);
    *size = kBufferBytes;
  }

  static void CUPTIAPI bufferCompleted(CUcontext context, uint32_t streamId, uint8_t* buffer, size_t /*size*/,
                                       size_t validSize) {
    CuptiActivitySource* self = gSource.load(std::memory_order_acquire);
    if (self && buffer) {
      try {
        self->deliver(context, streamId, buffer, validSize);
      } catch (...) {
        // The buffer's records are lost; nothing may unwind into CUPTI.
      }
    }
    if (buffer) {
      std::free(buffer);
      if (self) self->outstanding_.fetch_sub(1);
    }
  }

 private:
  std::string describe(CUptiResult r) const {
    const char* text = nullptr;
    if (api_.resultString && api_.resultString(r, &text) == CUPTI_SUCCESS && text) return text;
    return "CUPTI error " + std::to_string(static_cast<int>(r));
  }

  ActivityStart startImpl(ActivitySink* sink) {
    if (std::string why = load(&api_); !why.empty()) return {ActivityStartState::Unavailable, why};
    CUpti_SubscriberHandle probe = nullptr;
    const CUptiResult sub = api_.subscribe(&probe, reinterpret_cast<CUpti_CallbackFunc>(&ignoreCallback), nullptr);
    if (sub == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
      return {ActivityStartState::HeldElsewhere,
              "CUPTI is held by another tool (torch.profiler or Nsight): backed off, GPU time is not attributed"};
    }
    if (sub != CUPTI_SUCCESS) return {ActivityStartState::Failed, "cuptiSubscribe: " + describe(sub)};
    api_.unsubscribe(probe);  // Note [GPU time from CUPTI]: never keep a subscription

    CuptiActivitySource* expected = nullptr;
    if (!gSource.compare_exchange_strong(expected, this)) {
      return {ActivityStartState::Failed, "a CUPTI activity source is already running in this process"};
    }
    sink_ = sink;
    auto refuse = [this](const char* what, CUptiResult r) {
      for (CUpti_ActivityKind kind : kKinds) api_.disable(kind);
      // A per-API enable collects its API's records even without the kind: undone too.
      for (CUpti_CallbackId id : kRuntimeLaunches) api_.enableRuntimeApi(id, 0);
      for (CUpti_CallbackId id : kDriverLaunches) api_.enableDriverApi(id, 0);
      gSource.store(nullptr);
      const ActivityStartState state = r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED
                                           ? ActivityStartState::HeldElsewhere
                                           : ActivityStartState::Failed;
      return ActivityStart{state, std::string(what) + ": " + describe(r) + ": GPU time is not attributed"};
    };
    if (CUptiResult r = api_.registerCallbacks(&bufferRequested, &bufferCompleted); r != CUPTI_SUCCESS) {
      return refuse("cuptiActivityRegisterCallbacks", r);
    }
    // Note [Launch API records only]: the kinds first, then the per-API narrowing.
    for (CUpti_ActivityKind kind : kKinds) {
      if (CUptiResult r = api_.enable(kind); r != CUPTI_SUCCESS) return refuse("cuptiActivityEnable", r);
    }
    for (uint32_t id = 1; id < CUPTI_RUNTIME_TRACE_CBID_SIZE; ++id) {
      if (CUptiResult r = api_.enableRuntimeApi(id, isOneOf(id, kRuntimeLaunches) ? 1 : 0); r != CUPTI_SUCCESS) {
        if (isOneOf(id, kRuntimeLaunches)) return refuse("cuptiActivityEnableRuntimeApi", r);
      }
    }
    for (uint32_t id = 1; id < CUPTI_DRIVER_TRACE_CBID_SIZE; ++id) {
      if (CUptiResult r = api_.enableDriverApi(id, isOneOf(id, kDriverLaunches) ? 1 : 0); r != CUPTI_SUCCESS) {
        if (isOneOf(id, kDriverLaunches)) return refuse("cuptiActivityEnableDriverApi", r);
      }
    }
    started_.store(true, std::memory_order_release);
    return {ActivityStartState::Started, ""};
  }

  void deliver(CUcontext context, uint32_t streamId, uint8_t* buffer, size_t validSize) {
    ActivityBatch batch;
    CUpti_Activity* record = nullptr;
    while (validSize > 0 && api_.nextRecord(buffer, validSize, &record) == CUPTI_SUCCESS) {
      if (record->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || record->kind == CUPTI_ACTIVITY_KIND_KERNEL) {
        const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
        batch.kernels.push_back({k->correlationId, k->start, k->end});
      } else if (record->kind == CUPTI_ACTIVITY_KIND_RUNTIME || record->kind == CUPTI_ACTIVITY_KIND_DRIVER) {
        ++batch.apiRecords;
      } else if (record->kind == CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION) {
        const auto* c = reinterpret_cast<const CUpti_ActivityExternalCorrelation*>(record);
        if (c->externalKind == kExternalKind) batch.correlations.push_back({c->correlationId, c->externalId});
      }
    }
    size_t dropped = 0;
    if (api_.droppedRecords(context, streamId, &dropped) == CUPTI_SUCCESS) batch.droppedRecords = dropped;
    sink_->onBatch(batch);
  }

  CuptiApi api_;
  ActivitySink* sink_ = nullptr;  // set before gSource publishes this source
  std::atomic<bool> started_{false};  // api_ is complete and the kinds enabled
  std::atomic<int> outstanding_{0};  // buffers handed to CUPTI and not yet completed
  std::atomic<bool> handedOver_{false};  // handOver ran: nothing is flushed or delivered from then on
};

}  // namespace

std::unique_ptr<ActivitySource> makeCuptiActivitySource() { return std::make_unique<CuptiActivitySource>(); }

}  // namespace hotkernel
