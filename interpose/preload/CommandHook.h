/*
 * The shim's command hook (Note [The command hook protocol] in
 * hotkernel/hotkernel_shim.h): the pending count, the flush hook and the
 * per-thread own-command guard, and hkBeforeCommand(), which every CUDA
 * command wrapper of the shim calls before it forwards. libc only.
 *
 * Note [Flush before foreign commands]
 * A deferred chain's outputs are allocated but not written until the chain
 * is launched. Whatever reads them (an ATen kernel hotkernel does not serve,
 * cuBLAS, NCCL, a Triton kernel, `.item()`, a copy to the host) does so by
 * a CUDA command, so the shim makes every command that can read, write or
 * order device memory call the hook first: the pending chains are then
 * enqueued before the command on their streams, and a command on another
 * stream is ordered after them by the event record or synchronize that
 * orders it (which call the hook too). Three ways lead to a command:
 *   - a runtime entry point (RuntimeInterpose.c): the shim's definition comes
 *     first in the global scope and binds every library that imports it
 *     (libtorch_cuda's `<<<>>>` launches go through __cudaLaunchKernel);
 *   - a driver entry point imported by symbol (DriverInterpose.c's exports);
 *   - a driver entry point handed out by pointer: cuGetProcAddress (how the
 *     runtime, static or shared, and so cuBLAS, cuDNN and NCCL reach the
 *     driver), cudaGetDriverEntryPoint*, and dlsym on libcuda's handle (how
 *     they get cuGetProcAddress, and how Triton's launcher gets cuLaunchKernelEx):
 *     DlsymInterpose.c and Note [Driver entry points handed out by pointer].
 * A runtime command usually reaches a wrapped driver entry point too; the
 * hook flushes and clears the count at the first, so the second costs one
 * load. The runtime also reaches the driver through private export tables,
 * which is why both levels are wrapped.
 *
 * With nothing pending a wrapper costs one relaxed load of g_hkPending and
 * the load of its resolved function. The guard is thread-local (initial-exec:
 * the shim is loaded at start, LD_PRELOAD or a direct dependency) and read
 * only when something is pending.
 */
#ifndef HOTKERNEL_COMMAND_HOOK_H
#define HOTKERNEL_COMMAND_HOOK_H

#include "hotkernel/hotkernel_shim.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The pending count published by hotkernel_shim_set_pending (atomic). */
extern int g_hkPending;

/* Calls the hook for `kind` unless this thread is inside the guard or no hook is set. */
void hkRunFlushHook(int kind);

/* What every command wrapper calls before it forwards. */
static inline void hkBeforeCommand(int kind) {
  if (__builtin_expect(__atomic_load_n(&g_hkPending, __ATOMIC_RELAXED) != 0, 0)) hkRunFlushHook(kind);
}

/* Counts a driver entry point handed out unwrapped (hotkernel_shim_unwrapped_entry_points). */
void hkNoteUnwrappedEntryPoint(void);

#ifdef __cplusplus
}
#endif
#endif
