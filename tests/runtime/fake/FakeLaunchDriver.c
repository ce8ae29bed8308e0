/*
 * libcuda.so.1 for CPU tests and benchmarks of CudaKernelLauncher: the driver
 * calls hotkernel's runtime resolves (CudaDriver.cpp), answering as one
 * compute capability 9.0 device whose modules load any image and whose
 * launches run nothing. A launch counts, calls the hook a test set (from
 * inside the launch: what is around it), and returns the status set with
 * hk_fake_driver_set_launch_status. Loaded by path before the runtime's
 * dlopen("libcuda.so.1"), so that the loader hands the runtime this library.
 * No cuda.h: plain C types with the driver's ABI (handles are pointers,
 * statuses int).
 */
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))

static _Atomic unsigned long long g_launches;
static _Atomic int g_launchStatus;
static void (*_Atomic g_launchHook)(void);
static _Thread_local void* g_current;
static char g_context, g_module, g_function;

EXPORT unsigned long long hk_fake_driver_launches(void) { return atomic_load(&g_launches); }
EXPORT void hk_fake_driver_set_launch_status(int status) { atomic_store(&g_launchStatus, status); }
EXPORT void hk_fake_driver_set_launch_hook(void (*hook)(void)) { atomic_store(&g_launchHook, hook); }

EXPORT int cuInit(unsigned flags) { return flags == 0 ? 0 : 1; }
EXPORT int cuDriverGetVersion(int* v) { *v = 13000; return 0; }
EXPORT int cuDeviceGet(int* dev, int ordinal) { *dev = ordinal; return ordinal == 0 ? 0 : 101; }
EXPORT int cuDeviceGetCount(int* n) { *n = 1; return 0; }
EXPORT int cuDeviceGetName(char* name, int len, int dev) {
  (void)dev;
  snprintf(name, (size_t)len, "%s", "fake launch driver");
  return 0;
}
EXPORT int cuDeviceGetAttribute(int* v, int attribute, int dev) {
  (void)dev;
  /* 75, 76: compute capability major, minor; 16: multiprocessors. */
  *v = attribute == 75 ? 9 : attribute == 76 ? 0 : attribute == 16 ? 132 : 0;
  return 0;
}
EXPORT int cuDevicePrimaryCtxRetain(void** ctx, int dev) { (void)dev; *ctx = &g_context; return 0; }
EXPORT int cuCtxGetCurrent(void** ctx) { *ctx = g_current; return 0; }
EXPORT int cuCtxSetCurrent(void* ctx) { g_current = ctx; return 0; }
EXPORT int cuCtxSynchronize(void) { return 0; }
EXPORT int cuModuleLoadData(void** module, const void* image) { *module = &g_module; return image ? 0 : 1; }
EXPORT int cuModuleGetFunction(void** fn, void* module, const char* name) {
  (void)module;
  *fn = &g_function;
  return name && *name ? 0 : 500;
}
EXPORT int cuFuncSetAttribute(void* fn, int attribute, int value) { (void)fn; (void)attribute; (void)value; return 0; }
EXPORT int cuFuncGetAttribute(int* v, int attribute, void* fn) { (void)attribute; (void)fn; *v = 0; return 0; }
EXPORT int cuLaunchKernel(void* fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                          unsigned shared, void* stream, void** params, void** extra) {
  (void)fn; (void)gx; (void)gy; (void)gz; (void)bx; (void)by; (void)bz; (void)shared; (void)stream; (void)params;
  (void)extra;
  atomic_fetch_add(&g_launches, 1);
  void (*hook)(void) = atomic_load(&g_launchHook);
  if (hook) hook();
  return atomic_load(&g_launchStatus);
}
EXPORT int cuLaunchCooperativeKernel(void* fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                                     unsigned bz, unsigned shared, void* stream, void** params) {
  return cuLaunchKernel(fn, gx, gy, gz, bx, by, bz, shared, stream, params, 0);
}
EXPORT int cuGetErrorString(int status, const char** text) {
  *text = status == 0 ? "no error" : "fake launch driver error";
  return 0;
}
