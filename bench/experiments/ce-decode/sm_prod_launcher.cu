// The production softmax template (kernels/softmax/softmax_lastdim.cu) compiled
// by nvcc for ce_decode_probe, like ce_prod_launcher.cu: the configuration in
// -D flags, the kernel renamed by -Dhk_softmax_lastdim=<name>, the launcher by
// -DPROBE_LAUNCHER=<name>.
#include "softmax_lastdim.cu"

#include <cuda_runtime.h>

extern "C" cudaError_t PROBE_LAUNCHER(unsigned grid, cudaStream_t stream, const void* in, void* out, long long rows,
                                      long long cols) {
#if HK_CLUSTER == 16
  static bool once = [] {
    cudaFuncSetAttribute(hk_softmax_lastdim, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
    return true;
  }();
  (void)once;
#endif
  hk_softmax_lastdim<<<grid, HK_THREADS, 0, stream>>>(in, out, rows, cols);
  return cudaGetLastError();
}
