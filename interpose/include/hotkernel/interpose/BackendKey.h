#pragma once
// The backend key a trampoline registered on a backend key runs for.
//
// Note [The key a trampoline runs for]
// A trampoline registered on a backend key (CUDA in production, CPU in the
// tests) receives the keyset the dispatcher computed from the call's
// arguments and the thread's included keys, not only the key it was found
// for. Reached through OperatorHandle::callBoxedForDispatchKey, which is how
// torch's Python dispatcher runs a C++ kernel (torch.compile turns it on
// while it traces and lowers), the set still holds keys of higher priority
// such as PythonDispatcher, so the set's highest key is not the one the
// trampoline was registered on. The key it runs for, and whose original it
// calls, is the highest dense backend key of the set.

#include <c10/core/DispatchKey.h>
#include <c10/core/DispatchKeySet.h>

namespace hotkernel {

inline c10::DispatchKey backendKeyOf(c10::DispatchKeySet ks) {
  constexpr c10::DispatchKeySet kDenseBackends = c10::DispatchKeySet(c10::DispatchKey::Dense) | c10::backend_bitset_mask;
  return (ks & kDenseBackends).highestPriorityTypeId();
}

}  // namespace hotkernel
