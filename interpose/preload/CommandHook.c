/* The command hook's state (Note [Flush before foreign commands] in CommandHook.h). */
#include "CommandHook.h"

#include <stddef.h>

int g_hkPending = 0;                           /* atomic; Note [The command hook protocol] */
static HotkernelFlushHook g_hook = NULL;       /* atomic */
static long long g_unwrapped = 0;              /* atomic */
/* This thread's guard depth: > 0 while it issues hotkernel's own commands or runs the hook. */
static __thread int t_ownDepth __attribute__((tls_model("initial-exec"))) = 0;

void hkRunFlushHook(int kind) {
  if (t_ownDepth > 0) return;
  HotkernelFlushHook hook = __atomic_load_n(&g_hook, __ATOMIC_ACQUIRE);
  if (!hook) return;
  ++t_ownDepth;
  hook(kind);
  --t_ownDepth;
}

void hkNoteUnwrappedEntryPoint(void) { __atomic_add_fetch(&g_unwrapped, 1, __ATOMIC_RELAXED); }

__attribute__((visibility("default"))) void hotkernel_shim_set_flush_hook(HotkernelFlushHook hook) {
  __atomic_store_n(&g_hook, hook, __ATOMIC_RELEASE);
}

__attribute__((visibility("default"))) void hotkernel_shim_set_pending(int pending) {
  __atomic_store_n(&g_hkPending, pending > 0 ? pending : 0, __ATOMIC_RELAXED);
}

__attribute__((visibility("default"))) int hotkernel_shim_pending(void) {
  return __atomic_load_n(&g_hkPending, __ATOMIC_RELAXED);
}

__attribute__((visibility("default"))) void hotkernel_shim_enter_own(void) { ++t_ownDepth; }

__attribute__((visibility("default"))) void hotkernel_shim_leave_own(void) {
  if (t_ownDepth > 0) --t_ownDepth;
}

__attribute__((visibility("default"))) long long hotkernel_shim_unwrapped_entry_points(void) {
  return __atomic_load_n(&g_unwrapped, __ATOMIC_RELAXED);
}
