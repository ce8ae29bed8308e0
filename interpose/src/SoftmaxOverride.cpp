#include "SoftmaxOverride.h"

#include <ATen/ops/_log_softmax_cuda_dispatch.h>
#include <ATen/ops/_softmax_cuda_dispatch.h>
#include <ATen/ops/empty.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include <array>
#include <atomic>
#include <mutex>

#include "hotkernel/kernels/DType.h"
#include "hotkernel/runtime/IdleGate.h"
#include "hotkernel/runtime/Check.h"
#include "hotkernel/runtime/Logging.h"
#include "FamilyDType.h"

namespace hotkernel {
namespace {

constexpr size_t kNumKeys = static_cast<size_t>(c10::DispatchKey::EndOfFunctionalityKeys) + 64;

using Op = SoftmaxOverride::Op;

// What each op has of its own.
struct OpState {
  PlanSlot plans;
  std::atomic<uint64_t> hits{0};
  std::atomic<uint64_t> misses{0};
  // Written once per key under State::installMu before the trampoline is
  // registered for that key; read-only afterwards.
  std::array<std::optional<c10::SafeKernelFunction>, kNumKeys> originals;
  std::array<std::atomic<bool>, kNumKeys> installed{};
  std::optional<c10::OperatorHandle> op;  // Precondition for writing: State::installMu held
};

struct State {
  std::array<OpState, 2> ops;  // indexed by Op
  std::atomic<bool> enabled{true};
  std::mutex installMu;
  std::atomic<SoftmaxOverride::DeviceHook> deviceHook{nullptr};
  static constexpr int kMaxDevices = 64;
  std::array<std::atomic<bool>, kMaxDevices> deviceReady{};
};

State& state() {
  // Leaked on purpose: the dispatcher may call the trampoline during exit.
  static State* s = new State();
  return *s;
}

OpState& opState(Op op) { return state().ops[static_cast<size_t>(op)]; }

const char* schemaName(Op op) { return op == Op::LogSoftmax ? "aten::_log_softmax" : "aten::_softmax"; }

class SilentWarnings : public c10::WarningHandler {
 public:
  void process(const c10::Warning&) override {}
};

// Tries the planned kernel; an undefined tensor means "run the original".
at::Tensor tryPlan(Op op, const at::Tensor& self, int64_t dim, bool halfToFloat) noexcept {
  try {
    std::optional<VariantKey> key = softmaxVariantOf(self, dim, halfToFloat);
    if (!key) return {};
    if (key->device >= 0) IdleGate::instance().noteActivity();
    if (key->device >= 0 && key->device < State::kMaxDevices &&
        !state().deviceReady[key->device].load(std::memory_order_acquire)) {
      SoftmaxOverride::DeviceHook hook = state().deviceHook.load();
      if (hook && hook(key->device)) state().deviceReady[key->device].store(true, std::memory_order_release);
    }
    const Plan* plan = opState(op).plans.load()->find(*key);
    if (!plan) return {};
    const size_t align = plan->launcher->alignment();
    if (reinterpret_cast<uintptr_t>(self.const_data_ptr()) % align != 0) return {};
    at::Tensor out = at::empty(self.sizes(), self.options());
    if (reinterpret_cast<uintptr_t>(out.const_data_ptr()) % align != 0) return {};
    void* stream = nullptr;
    if (self.is_cuda()) stream = c10::cuda::getCurrentCUDAStream(self.device().index()).stream();
    if (!plan->launcher->launch(RowKernelArgs{self.const_data_ptr(), out.mutable_data_ptr(), key->rows, key->cols},
                                stream)) {
      return {};
    }
    return out;
  } catch (const std::exception& e) {
    HOTKERNEL_LOG_ONCE(Warn, "softmax-trampoline-error")
        << "error in the _softmax trampoline, using the ATen kernel: " << e.what();
  } catch (...) {
    HOTKERNEL_LOG_ONCE(Warn, "softmax-trampoline-error") << "unknown error in the _softmax trampoline; using ATen";
  }
  return {};
}

template <Op kOp>
at::Tensor trampoline(c10::DispatchKeySet ks, const at::Tensor& self, int64_t dim, bool halfToFloat) {
  OpState& s = opState(kOp);
  if (state().enabled.load(std::memory_order_relaxed)) {
    at::Tensor out = tryPlan(kOp, self, dim, halfToFloat);
    if (out.defined()) {
      s.hits.fetch_add(1, std::memory_order_relaxed);
      return out;
    }
  }
  s.misses.fetch_add(1, std::memory_order_relaxed);
  return SoftmaxOverride::callOriginal(ks, self, dim, halfToFloat, kOp);
}

}  // namespace

std::optional<VariantKey> softmaxVariantOf(const at::Tensor& self, int64_t dim, bool halfToFloat) {
  if (halfToFloat || !self.defined() || self.dim() < 1) return std::nullopt;
  const int64_t nd = self.dim();
  const int64_t wrapped = dim < 0 ? dim + nd : dim;
  if (wrapped != nd - 1) return std::nullopt;
  if (!self.is_contiguous() || self.numel() == 0) return std::nullopt;
  std::optional<kernels::DType> code = familyDTypeOf(self.scalar_type());
  if (!code) return std::nullopt;
  VariantKey k;
  k.dtype = static_cast<int32_t>(*code);
  k.device = self.is_cpu() ? -1 : self.device().index();
  k.cols = self.size(nd - 1);
  k.rows = self.numel() / k.cols;
  return k;
}

std::optional<SoftmaxOverride::Op> SoftmaxOverride::opOf(const std::string& name) {
  if (name == kOpName || name == "_softmax") return Op::Softmax;
  if (name == kLogOpName || name == "_log_softmax") return Op::LogSoftmax;
  return std::nullopt;
}

at::Tensor SoftmaxOverride::callOriginal(c10::DispatchKeySet ks, const at::Tensor& self, int64_t dim,
                                         bool halfToFloat, Op op) {
  const c10::DispatchKey key = ks.highestPriorityTypeId();
  if (key == c10::DispatchKey::CUDA) {
    return op == Op::LogSoftmax ? at::cuda::_log_softmax(self, dim, halfToFloat)
                                : at::cuda::_softmax(self, dim, halfToFloat);
  }
  OpState& s = opState(op);
  const auto& original = s.originals[static_cast<size_t>(key)];
  TORCH_CHECK(original.has_value() && s.op.has_value(), "hotkernel: no original ", schemaName(op), " kernel for ",
              c10::toString(key));
  torch::jit::Stack stack{self, dim, halfToFloat};
  original->callBoxed(*s.op, ks, &stack);
  return std::move(stack[0]).toTensor();
}

void SoftmaxOverride::install(c10::DispatchKey key, Op op) {
  OpState& s = opState(op);
  const size_t idx = static_cast<size_t>(key);
  HOTKERNEL_CHECK(idx < kNumKeys, "dispatch key out of range");
  std::lock_guard<std::mutex> guard(state().installMu);
  if (s.installed[idx].load()) return;
  if (!s.op) s.op = c10::Dispatcher::singleton().findSchemaOrThrow(schemaName(op), "");
  // Capture the original before the override replaces it.
  s.originals[idx] = s.op->getComputedKernelForDispatchKey(key);
  SilentWarnings silent;
  c10::WarningUtils::WarningHandlerGuard warnings(&silent);
  // Leaked: deregistering while serving is unsafe, and libhotkernel is never unloaded.
  auto* lib = new torch::Library(torch::Library::IMPL, "aten", key, __FILE__, __LINE__);
  if (op == Op::LogSoftmax) {
    lib->impl("_log_softmax", TORCH_FN(trampoline<Op::LogSoftmax>));
  } else {
    lib->impl("_softmax", TORCH_FN(trampoline<Op::Softmax>));
  }
  s.installed[idx].store(true);
  HOTKERNEL_LOG(Debug) << "installed the " << schemaName(op) << " trampoline for " << c10::toString(key);
}

bool SoftmaxOverride::installed(c10::DispatchKey key, Op op) {
  return opState(op).installed[static_cast<size_t>(key)].load();
}

PlanSlot& SoftmaxOverride::plans(Op op) { return opState(op).plans; }
void SoftmaxOverride::setDeviceHook(DeviceHook hook) { state().deviceHook.store(hook); }
bool SoftmaxOverride::setEnabled(bool enabled) { return state().enabled.exchange(enabled); }
bool SoftmaxOverride::enabled() { return state().enabled.load(); }
uint64_t SoftmaxOverride::hits(Op op) { return opState(op).hits.load(); }
uint64_t SoftmaxOverride::misses(Op op) { return opState(op).misses.load(); }

}  // namespace hotkernel
