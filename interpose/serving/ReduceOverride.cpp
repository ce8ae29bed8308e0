#include "ReduceOverride.h"

#include <ATen/ops/amax_cuda_dispatch.h>
#include <ATen/ops/amin_cuda_dispatch.h>
#include <ATen/ops/argmax_cuda_dispatch.h>
#include <ATen/ops/argmin_cuda_dispatch.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/max_cuda_dispatch.h>
#include <ATen/ops/mean_cuda_dispatch.h>
#include <ATen/ops/min_cuda_dispatch.h>
#include <ATen/ops/sum_cuda_dispatch.h>
#include <c10/cuda/CUDAStream.h>

#include "hotkernel/interpose/BackendKey.h"
#include "FamilyDType.h"
#include "RecordedArgs.h"
#include "hotkernel/kernels/ReduceDimFamily.h"
#include "hotkernel/runtime/KernelArgs.h"

namespace hotkernel {
namespace {

using kernels::ReduceOp;

OverrideState& state(ReduceOp op) { return ReduceOverride::state(op); }

// The refusals that need no allocation (Note [Reductions are everywhere]):
// anything but the last k dims or one middle dim of a contiguous tensor, or
// a dtype= argument. reduceKeyOf checks the rest (and these again).
bool maybeServed(const at::Tensor& self, bool hasDims, at::IntArrayRef dims, bool dtypeGiven) {
  if (!hasDims || dtypeGiven || !self.defined()) return false;
  if (kernels::ReduceFamily::trailingDims(self.dim(), dims.data(), dims.size()) >= 1) return true;
  return kernels::ReduceDimFamily::middleDim(self.dim(), dims.data(), dims.size()) >= 0 && self.is_contiguous();
}

// Launches `plan` for the call `key` stands for: the last-dim ABI (in, out,
// rows, cols), or the middle-dim one (in, out, outer, reduced, inner) for a
// key with an inner extent (Note [Two layouts, one family] in
// kernels/src/ReduceDescriptor.cpp); a pair op's indices follow its values
// (`indices` non-null). False: not launched.
bool launchPlan(const Plan& plan, const VariantKey& key, const void* in, void* out, void* indices,
                void* stream) noexcept {
  if (key.inner == 0 && indices == nullptr) {
    return plan.launcher->launch(RowKernelArgs{in, out, key.rows, key.cols}, stream);
  }
  KernelArgs args;
  args.pointer(in).pointer(out);
  if (indices != nullptr) args.pointer(indices);
  args.int64(key.rows).int64(key.cols);
  if (key.inner != 0) args.int64(key.inner);
  return plan.launcher->launchArgs(args, stream);
}

// A served call's results: one tensor, or a pair op's values and indices.
struct Served {
  at::Tensor out;
  at::Tensor indices;  // defined for the pair ops only
};

// Tries the planned kernel; an undefined `out` means "run the original".
Served tryPlan(ReduceOp op, const at::Tensor& self, at::IntArrayRef dims, bool keepdim, bool dtypeGiven) noexcept {
  try {
    std::optional<ReduceCallKey> call = reduceKeyOf(op, self, dims, keepdim, dtypeGiven);
    if (!call) return {};
    const VariantKey& key = call->key;
    OverrideState& s = state(op);
    s.noteDeviceUse(key.device);
    const Plan* plan = s.plans.load()->find(key);
    if (!plan) return {};
    const size_t inAlignment = plan->launcher->alignment();
    if (!pointerAligned(self.const_data_ptr(), inAlignment)) return {};
    const kernels::ReduceOpInfo& info = kernels::reduceOpInfo(op);
    Served r;
    r.out = at::empty(call->outSizes, info.index && !info.pair ? self.options().dtype(at::kLong) : self.options());
    const auto dtype = static_cast<kernels::DType>(key.dtype);
    // The last-dim kernel writes one element a row; the middle-dim one vectors of its input's width.
    const size_t outAlignment = key.inner == 0 ? kernels::ReduceFamily::outputElementSize(op, dtype)
                                               : kernels::ReduceDimFamily::outputAlignment(op, dtype, inAlignment);
    if (!pointerAligned(r.out.const_data_ptr(), outAlignment)) return {};
    void* indices = nullptr;
    if (info.pair) {
      r.indices = at::empty(call->outSizes, self.options().dtype(at::kLong));
      indices = r.indices.mutable_data_ptr();
      if (!kernels::ReduceFamily::guardIndices(self.const_data_ptr(), r.out.const_data_ptr(), indices)) return {};
    }
    void* stream = self.is_cuda() ? c10::cuda::getCurrentCUDAStream(self.device().index()).stream() : nullptr;
    if (!launchPlan(*plan, key, self.const_data_ptr(), r.out.mutable_data_ptr(), indices, stream)) return {};
    return r;
  } catch (const std::exception& e) {
    HOTKERNEL_LOG_ONCE(Warn, std::string("reduce-trampoline-error:") + kernels::reduceOpName(op))
        << "error in the " << ReduceOverride::opName(op) << " trampoline, using the ATen kernel: " << e.what();
  } catch (...) {
    HOTKERNEL_LOG_ONCE(Warn, std::string("reduce-trampoline-error:") + kernels::reduceOpName(op))
        << "unknown error in the " << ReduceOverride::opName(op) << " trampoline; using ATen";
  }
  return {};
}

// The served path of a trampoline: the plan's results, counted; or an
// undefined `out`. `dims` is the call's dim list when `hasDims` (None otherwise).
Served servedResults(ReduceOp op, const at::Tensor& self, bool hasDims, at::IntArrayRef dims, bool keepdim,
                     bool dtypeGiven) {
  OverrideState& s = state(op);
  if (servingEnabled() && maybeServed(self, hasDims, dims, dtypeGiven)) {
    Served r = tryPlan(op, self, dims, keepdim, dtypeGiven);
    if (r.out.defined()) {
      s.hits.fetch_add(1, std::memory_order_relaxed);
      return r;
    }
  }
  s.misses.fetch_add(1, std::memory_order_relaxed);
  return {};
}

at::Tensor served(ReduceOp op, const at::Tensor& self, bool hasDims, at::IntArrayRef dims, bool keepdim,
                  bool dtypeGiven) {
  return servedResults(op, self, hasDims, dims, keepdim, dtypeGiven).out;
}

at::Tensor sumTrampoline(c10::DispatchKeySet ks, const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                         std::optional<at::ScalarType> dtype) {
  at::Tensor out = served(ReduceOp::Sum, self, dim.has_value(), dim.value_or(at::IntArrayRef()), keepdim,
                          dtype.has_value());
  return out.defined() ? out : ReduceOverride::callOriginalSum(ks, self, dim, keepdim, dtype);
}

at::Tensor meanTrampoline(c10::DispatchKeySet ks, const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                          std::optional<at::ScalarType> dtype) {
  at::Tensor out = served(ReduceOp::Mean, self, dim.has_value(), dim.value_or(at::IntArrayRef()), keepdim,
                          dtype.has_value());
  return out.defined() ? out : ReduceOverride::callOriginalMean(ks, self, dim, keepdim, dtype);
}

// amax, amin (self, dim[], keepdim).
template <ReduceOp kOp>
at::Tensor extremumTrampoline(c10::DispatchKeySet ks, const at::Tensor& self, at::IntArrayRef dim, bool keepdim) {
  at::Tensor out = served(kOp, self, true, dim, keepdim, false);
  return out.defined() ? out : ReduceOverride::callOriginalExtremum(kOp, ks, self, dim, keepdim);
}

// argmax, argmin (self, dim?, keepdim).
template <ReduceOp kOp>
at::Tensor indexTrampoline(c10::DispatchKeySet ks, const at::Tensor& self, std::optional<int64_t> dim, bool keepdim) {
  const int64_t d = dim.value_or(0);
  at::Tensor out = served(kOp, self, dim.has_value(), at::IntArrayRef(&d, 1), keepdim, false);
  return out.defined() ? out : ReduceOverride::callOriginalIndex(kOp, ks, self, dim, keepdim);
}

// max.dim, min.dim (self, dim, keepdim) -> (values, indices).
template <ReduceOp kOp>
std::tuple<at::Tensor, at::Tensor> pairTrampoline(c10::DispatchKeySet ks, const at::Tensor& self, int64_t dim,
                                                  bool keepdim) {
  Served r = servedResults(kOp, self, true, at::IntArrayRef(&dim, 1), keepdim, false);
  if (r.out.defined()) return {std::move(r.out), std::move(r.indices)};
  return ReduceOverride::callOriginalPair(kOp, ks, self, dim, keepdim);
}

// The captured original for a key other than CUDA, called boxed; the stack
// holds its results after the call.
torch::jit::Stack callBoxedStack(ReduceOp op, c10::DispatchKeySet ks, torch::jit::Stack stack) {
  OverrideState& s = state(op);
  const c10::DispatchKey key = installedKeyOf(ks, s.installed);
  const auto& original = s.originals[static_cast<size_t>(key)];
  TORCH_CHECK(original.has_value() && s.op.has_value(), "hotkernel: no original ", ReduceOverride::opName(op),
              " kernel for ", c10::toString(key));
  original->callBoxed(*s.op, ks, &stack);
  return stack;
}

at::Tensor callBoxed(ReduceOp op, c10::DispatchKeySet ks, torch::jit::Stack stack) {
  torch::jit::Stack results = callBoxedStack(op, ks, std::move(stack));
  return std::move(results[0]).toTensor();
}

c10::IValue dimValue(at::OptionalIntArrayRef dim) { return dim ? c10::IValue(dim->vec()) : c10::IValue(); }
c10::IValue dtypeValue(std::optional<at::ScalarType> dtype) { return dtype ? c10::IValue(*dtype) : c10::IValue(); }

}  // namespace

std::optional<ReduceCallKey> reduceKeyOf(ReduceOp op, const at::Tensor& self, std::optional<at::IntArrayRef> dims,
                                         bool keepdim, bool dtypeGiven) {
  if (!self.defined()) return std::nullopt;
  const std::optional<kernels::DType> dtype = familyDTypeOf(self.scalar_type());
  // Strided layouts only (sparse, mkldnn and nested tensors have no strides to check).
  if (!dtype || self.layout() != at::kStrided || self.is_quantized() || self.is_nested()) return std::nullopt;
  // Every served call comes here: one description per thread whose vectors
  // keep their capacity (as crossEntropyKeyOf's). Every field is set below.
  thread_local kernels::ReduceCall call;
  call.op = op;
  call.floating = true;
  call.dtype = *dtype;
  call.sizes.assign(self.sizes().begin(), self.sizes().end());
  call.strides.assign(self.strides().begin(), self.strides().end());
  if (dims) {
    if (!call.dims) call.dims.emplace();
    call.dims->assign(dims->begin(), dims->end());
  } else {
    call.dims.reset();
  }
  call.keepdim = keepdim;
  call.dtypeGiven = dtypeGiven;
  const int32_t device = self.is_cuda() ? static_cast<int32_t>(self.device().index()) : -1;
  ReduceCallKey out;
  kernels::ReduceVariant v;
  if (kernels::ReduceFamily::guardCall(call, &v)) {
    out.key = VariantKey{static_cast<int32_t>(v.dtype), device, v.rows, v.cols};
    out.outSizes = kernels::ReduceFamily::outputSizes(call);
    return out;
  }
  kernels::ReduceDimVariant m;
  if (!kernels::ReduceDimFamily::guardCall(call, &m)) return std::nullopt;
  out.key = kernels::reduceDimKeyOf(m, device);
  out.outSizes = kernels::ReduceDimFamily::outputSizes(call);
  return out;
}

const char* ReduceOverride::opName(ReduceOp op) { return kernels::reduceAtenOpName(op); }

at::Tensor ReduceOverride::callOriginalSum(c10::DispatchKeySet ks, const at::Tensor& self, at::OptionalIntArrayRef dim,
                                           bool keepdim, std::optional<at::ScalarType> dtype) {
  if (installedKeyOf(ks, state(ReduceOp::Sum).installed) == c10::DispatchKey::CUDA) {
    return at::cuda::sum(self, dim, keepdim, dtype);
  }
  return callBoxed(ReduceOp::Sum, ks, {self, dimValue(dim), keepdim, dtypeValue(dtype)});
}

at::Tensor ReduceOverride::callOriginalMean(c10::DispatchKeySet ks, const at::Tensor& self,
                                            at::OptionalIntArrayRef dim, bool keepdim,
                                            std::optional<at::ScalarType> dtype) {
  if (installedKeyOf(ks, state(ReduceOp::Mean).installed) == c10::DispatchKey::CUDA) {
    return at::cuda::mean(self, dim, keepdim, dtype);
  }
  return callBoxed(ReduceOp::Mean, ks, {self, dimValue(dim), keepdim, dtypeValue(dtype)});
}

at::Tensor ReduceOverride::callOriginalExtremum(ReduceOp op, c10::DispatchKeySet ks, const at::Tensor& self,
                                                at::IntArrayRef dim, bool keepdim) {
  if (installedKeyOf(ks, state(op).installed) == c10::DispatchKey::CUDA) {
    return op == ReduceOp::Amin ? at::cuda::amin(self, dim, keepdim) : at::cuda::amax(self, dim, keepdim);
  }
  return callBoxed(op, ks, {self, c10::IValue(dim.vec()), keepdim});
}

at::Tensor ReduceOverride::callOriginalIndex(ReduceOp op, c10::DispatchKeySet ks, const at::Tensor& self,
                                             std::optional<int64_t> dim, bool keepdim) {
  if (installedKeyOf(ks, state(op).installed) == c10::DispatchKey::CUDA) {
    return op == ReduceOp::Argmin ? at::cuda::argmin(self, dim, keepdim) : at::cuda::argmax(self, dim, keepdim);
  }
  return callBoxed(op, ks, {self, dim ? c10::IValue(*dim) : c10::IValue(), keepdim});
}

std::tuple<at::Tensor, at::Tensor> ReduceOverride::callOriginalPair(ReduceOp op, c10::DispatchKeySet ks,
                                                                   const at::Tensor& self, int64_t dim,
                                                                   bool keepdim) {
  if (installedKeyOf(ks, state(op).installed) == c10::DispatchKey::CUDA) {
    return op == ReduceOp::Min ? at::cuda::min(self, dim, keepdim) : at::cuda::max(self, dim, keepdim);
  }
  torch::jit::Stack results = callBoxedStack(op, ks, {self, dim, keepdim});
  return {std::move(results[0]).toTensor(), std::move(results[1]).toTensor()};
}

void ReduceOverride::install(c10::DispatchKey key, ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
      state(op).installOnce(
          key, "aten::sum", [](torch::Library& lib) { lib.impl("sum.dim_IntList", TORCH_FN(sumTrampoline)); },
          "dim_IntList");
      return;
    case ReduceOp::Mean:
      state(op).installOnce(
          key, "aten::mean", [](torch::Library& lib) { lib.impl("mean.dim", TORCH_FN(meanTrampoline)); }, "dim");
      return;
    case ReduceOp::Amax:
      state(op).installOnce(
          key, "aten::amax", [](torch::Library& lib) { lib.impl("amax", TORCH_FN(extremumTrampoline<ReduceOp::Amax>)); });
      return;
    case ReduceOp::Amin:
      state(op).installOnce(
          key, "aten::amin", [](torch::Library& lib) { lib.impl("amin", TORCH_FN(extremumTrampoline<ReduceOp::Amin>)); });
      return;
    case ReduceOp::Argmax:
      state(op).installOnce(key, "aten::argmax", [](torch::Library& lib) {
        lib.impl("argmax", TORCH_FN(indexTrampoline<ReduceOp::Argmax>));
      });
      return;
    case ReduceOp::Argmin:
      state(op).installOnce(key, "aten::argmin", [](torch::Library& lib) {
        lib.impl("argmin", TORCH_FN(indexTrampoline<ReduceOp::Argmin>));
      });
      return;
    case ReduceOp::Max:
      state(op).installOnce(
          key, "aten::max", [](torch::Library& lib) { lib.impl("max.dim", TORCH_FN(pairTrampoline<ReduceOp::Max>)); },
          "dim");
      return;
    case ReduceOp::Min:
      state(op).installOnce(
          key, "aten::min", [](torch::Library& lib) { lib.impl("min.dim", TORCH_FN(pairTrampoline<ReduceOp::Min>)); },
          "dim");
      return;
  }
  HOTKERNEL_THROW("unknown reduction op ", static_cast<int>(op));
}

OverrideState& ReduceOverride::state(ReduceOp op) {
  // Leaked on purpose: the dispatcher may call a trampoline during exit.
  // Every trampoline call asks for its state: an index, no lookup (op is a ReduceOp constant).
  static OverrideState* const* states = [] {
    auto* s = new OverrideState*[kernels::kReduceOpCount];
    for (size_t i = 0; i < kernels::kReduceOpCount; ++i) s[i] = new OverrideState();
    return s;
  }();
  const auto i = static_cast<size_t>(op);
  HOTKERNEL_INTERNAL_ASSERT(i < kernels::kReduceOpCount, "unknown reduction op ", static_cast<int>(op));
  return *states[i];
}

// Note [Recording reductions]
// RecordFunction names an op without its overload ("aten::sum" for every sum);
// the overload comes from operator_name(). aten::sum.dim_IntList and
// aten::mean.dim (self, dim?, keepdim, dtype?), aten::amax / aten::amin
// (self, dim[], keepdim), aten::argmax / aten::argmin (self, dim?,
// keepdim) and aten::max.dim / aten::min.dim (self, dim, keepdim): the key
// reduceKeyOf gives (a middle-dim call's has its inner extent), under the
// overload-qualified name the engine and the cache use. Other overloads (a
// full sum or max, named dims, out=) are not served and not recorded.
std::optional<VariantKey> ReduceOverride::recordedKey(const at::RecordFunction& call, ReduceOp op) {
  const size_t need = op == ReduceOp::Sum || op == ReduceOp::Mean ? 4 : 3;
  if (call.num_inputs() < need) return std::nullopt;
  const std::optional<c10::OperatorName> name = call.operator_name();
  const bool pair = kernels::reduceOpInfo(op).pair;
  const char* overload = op == ReduceOp::Sum ? "dim_IntList" : op == ReduceOp::Mean || pair ? "dim" : "";
  if (!name || name->overload_name != overload) return std::nullopt;
  auto inputs = call.inputs();
  if (!inputs[0].isTensor() || !inputs[2].isBool()) return std::nullopt;
  std::optional<std::vector<int64_t>> dims;
  if (kernels::reduceOpInfo(op).index) {
    if (inputs[1].isInt()) {
      dims = std::vector<int64_t>{inputs[1].toInt()};
    } else if (!inputs[1].isNone()) {
      return std::nullopt;
    }
  } else if (!inputs[1].isNone()) {
    dims = recordedSizes(inputs[1]);
    if (!dims) return std::nullopt;
  }
  const bool dtypeGiven = need == 4 && !inputs[3].isNone();
  std::optional<ReduceCallKey> reduceCall = reduceKeyOf(op, inputs[0].toTensor(), dims, inputs[2].toBool(), dtypeGiven);
  if (!reduceCall) return std::nullopt;
  return reduceCall->key;
}

}  // namespace hotkernel
