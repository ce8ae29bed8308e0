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
// calls, is the highest dense backend key of the set when the trampoline is
// installed there. The Python dispatcher may also ask for one backend's
// kernel with arguments of another (CUDA's `_to_copy` of a CPU tensor to the
// GPU): the set has no key the trampoline is installed on, and the key it
// was found for is the one key it is installed on (CUDA in a serving
// process); with several installed (tests) nothing tells which, and the
// set's backend key is returned.

#include <c10/core/DispatchKey.h>
#include <c10/core/DispatchKeySet.h>

#include <array>
#include <atomic>
#include <cstddef>

namespace hotkernel {

inline c10::DispatchKey backendKeyOf(c10::DispatchKeySet ks) {
  constexpr c10::DispatchKeySet kDenseBackends = c10::DispatchKeySet(c10::DispatchKey::Dense) | c10::backend_bitset_mask;
  return (ks & kDenseBackends).highestPriorityTypeId();
}

// The key whose original a trampoline calls; `installed[k]`: whether it is
// registered on key k (set after that key's original is captured).
template <size_t N>
c10::DispatchKey installedKeyOf(c10::DispatchKeySet ks, const std::array<std::atomic<bool>, N>& installed) {
  const c10::DispatchKey key = backendKeyOf(ks);
  const size_t k = static_cast<size_t>(key);
  if (k < N && installed[k].load(std::memory_order_acquire)) return key;
  size_t only = N;
  for (size_t i = 0; i < N; ++i) {
    if (!installed[i].load(std::memory_order_acquire)) continue;
    if (only != N) return key;
    only = i;
  }
  return only == N ? key : static_cast<c10::DispatchKey>(only);
}

}  // namespace hotkernel
