// The production cross_entropy template (kernels/cross_entropy/cross_entropy.cu)
// compiled by nvcc for ce_decode_probe: one object per configuration, the
// configuration in -D flags (HK_*), the kernel renamed by
// -Dhk_cross_entropy=<name> and its launcher by -DPROBE_LAUNCHER=<name>.
#include "cross_entropy.cu"

#include <cuda_runtime.h>

extern "C" cudaError_t PROBE_LAUNCHER(unsigned grid, cudaStream_t stream, const void* logits, const long long* target,
                                      void* out, float* work, long long rows, long long cols, long long ignoreIndex) {
#if HK_CLUSTER == 16
  static bool once = [] {
    cudaFuncSetAttribute(hk_cross_entropy, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
    return true;
  }();
  (void)once;
#endif
  hk_cross_entropy<<<grid, HK_THREADS, 0, stream>>>(logits, target, out, work, rows, cols, ignoreIndex);
  return cudaGetLastError();
}
