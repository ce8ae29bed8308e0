/*
 * The count of CUDA graph captures in progress in this process, kept by the
 * cudaStreamBeginCapture / cudaStreamEndCapture wrappers (CaptureInterpose.c).
 * libc only (it is part of the preload shim); the CUDA calls are reached
 * through a table of function pointers, so the bookkeeping is tested on the
 * CPU with fakes (tests/interpose/CaptureTrackerTest.cpp).
 *
 * Note [Pausing during graph capture]
 * The background optimizer must not run while any thread of the process
 * captures a CUDA graph (its kernels would compete with the capture's eager
 * warm-up, and allocations and module loads during a capture are what makes
 * captures fragile). No CUDA or PyTorch API says "some stream of this process
 * is capturing": cudaStreamIsCapturing needs the stream, and torch's
 * capture status is per current stream. So the capture calls themselves are
 * interposed: libtorch_cuda.so (torch 2.11 wheels) imports
 * cudaStreamBeginCapture@libcudart.so.13 and cudaStreamEndCapture@libcudart.so.13
 * (undefined dynamic symbols, bound through its PLT/GOT; `nm -D`), and
 * at::cuda::CUDAGraph::capture_begin / capture_end (torch.cuda.graph,
 * CUDA graph trees) call them. The preload shim is first in the global
 * lookup scope, so its definitions of the two functions bind for every
 * library that imports them (an unversioned definition satisfies a versioned
 * reference); they forward to the next definition (libcudart's, through
 * dlsym(RTLD_NEXT), or the loaded libcudart itself) and keep the set of
 * streams capturing. libhotkernel.so reads the count through
 * hotkernel_captures_in_progress() (found with dlsym: Note [Capture signal]
 * in runtime/CaptureSignal.h) and the idle gate treats a non-zero count as
 * busy. Verified on torch 2.11.0+cu130 (CPU machine): with the shim preloaded
 * and LD_BIND_NOW=1 LD_DEBUG=bindings, `import torch` binds libtorch_cuda.so's
 * two imports to the shim, and the shim's calls reach
 * nvidia/cu13/lib/libcudart.so.13 (PreloadShimTest checks both). Not seen:
 * code that calls the driver API (cuStreamBeginCapture) directly, links the
 * CUDA runtime statically, or calls libcudart through pointers from its own
 * dlopen handle (cuda-python); such captures are only protected by the
 * optimizer's relaxed capture mode and own streams.
 *
 * A stream is counted once its real cudaStreamBeginCapture succeeded, and
 * uncounted when cudaStreamEndCapture ended its capture: it succeeded, or
 * cudaStreamIsCapturing now says the stream is not capturing, or (when that
 * query is unavailable or fails) it failed with anything but
 * cudaErrorStreamCaptureWrongThread (an invalidated capture still ends).
 */
#ifndef HOTKERNEL_CAPTURE_TRACKER_H
#define HOTKERNEL_CAPTURE_TRACKER_H

#ifdef __cplusplus
extern "C" {
#endif

/* cudaError_t values used here (driver_types.h). */
#define HK_CUDA_SUCCESS 0
#define HK_CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD 908
#define HK_CUDA_ERROR_UNKNOWN 999
/* cudaStreamCaptureStatusNone */
#define HK_CAPTURE_STATUS_NONE 0

/* The real CUDA runtime calls (cudaStream_t is a pointer, the enums are ints). */
typedef struct HkCaptureApi {
  int (*begin)(void* stream, int mode);
  int (*end)(void* stream, void** graph);
  int (*isCapturing)(void* stream, int* status); /* may be NULL */
} HkCaptureApi;

/* cudaStreamBeginCapture / cudaStreamEndCapture through `api`, with the bookkeeping. */
int hk_capture_begin(const HkCaptureApi* api, void* stream, int mode);
int hk_capture_end(const HkCaptureApi* api, void* stream, void** graph);

/* Streams capturing now (through these wrappers). Exported by the shim. */
int hotkernel_captures_in_progress(void);

/* Forgets every stream (tests only). */
void hk_capture_reset(void);

#ifdef __cplusplus
}
#endif
#endif
