/*
 * Driver entry points handed out by pointer, wrapped (DriverInterpose.c).
 * libc only.
 *
 * Note [Driver entry points handed out by pointer]
 * cuGetProcAddress, cudaGetDriverEntryPoint* and dlsym on libcuda's handle
 * return the driver's function for a name (and, for cuGetProcAddress, a
 * CUDA version and per-thread-stream flags, so one name can yield the
 * plain, _v2, _ptsz or _ptds function). The shim replaces a command's
 * function by a wrapper that calls the hook and then exactly that
 * function: each entry point has HK_DRIVER_SLOTS wrappers, each bound to
 * one real function the first time it is handed out (a compare-and-swap
 * on the slot, never rebound), so a pointer handed out once always calls
 * the same real function. A function that is already the shim's (the
 * runtime's cudaGetDriverEntryPoint answering from a wrapped
 * cuGetProcAddress) is returned as it is. Should an entry point yield
 * more distinct functions than it has slots, the function is returned
 * unwrapped and counted (hotkernel_shim_unwrapped_entry_points), and the
 * library does not defer.
 */
#ifndef HOTKERNEL_DRIVER_ENTRY_POINTS_H
#define HOTKERNEL_DRIVER_ENTRY_POINTS_H

#ifdef __cplusplus
extern "C" {
#endif

/* Wrappers per entry point: the plain, _v2, _ptsz / _ptds and _v2 per-thread
 * functions, with room to spare. */
#define HK_DRIVER_SLOTS 6

/* What to hand out for the driver's function `real` of `symbol` (an entry
 * point's name as cuGetProcAddress takes it, or an exported name such as
 * cuMemcpyHtoD_v2_ptds): the shim's wrapper for a command or for
 * cuGetProcAddress, else `real`. */
void* hkWrapDriverEntryPoint(const char* symbol, void* real);

/* Whether `symbol` names a command or cuGetProcAddress (exported name or entry point). */
int hkIsWrappedDriverSymbol(const char* symbol);

#ifdef __cplusplus
}
#endif
#endif
