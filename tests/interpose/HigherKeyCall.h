#pragma once
// Calls an op's CPU kernel the way torch's Python dispatcher calls a C++
// kernel (OperatorHandle::callBoxedForDispatchKey) with a key of higher
// priority than CPU in the thread's included set, so that the kernel's keyset
// holds it (Note [The key a trampoline runs for]). Negative stands in for
// PythonDispatcher: it is above the backend keys, and its fallback passes
// calls on tensors without the negative bit through, so the original's own
// ops run as usual.
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <c10/core/impl/LocalDispatchKeySet.h>

#include <string>

namespace hotkernel {

inline torch::jit::Stack callCpuKernelUnderAHigherKey(const char* name, const char* overload,
                                                      torch::jit::Stack stack) {
  const c10::OperatorHandle op = c10::Dispatcher::singleton().findSchemaOrThrow(name, overload);
  c10::impl::IncludeDispatchKeyGuard higher(c10::DispatchKey::Negative);
  op.callBoxedForDispatchKey(c10::DispatchKey::CPU, stack);
  return stack;
}

}  // namespace hotkernel
