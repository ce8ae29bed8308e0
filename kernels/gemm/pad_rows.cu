// A 2-D copy into a contiguous, larger-or-equal destination, zero-filled past
// the source: what a GEMM padded to aligned extents needs on both sides
// (Note [Padded GEMMs] in src/MmPadFamily.cpp):
//   dst[r, c] = src[r * srcLd + c]   for r < srcRows and c < srcCols
//   dst[r, c] = +0                   elsewhere in [dstRows, dstCols]
// The weight [N, K] becomes [N8, K] (srcRows = N, zero rows after it), and the
// GEMM's [M, N8] output becomes eager's contiguous [M, N] (srcCols = N,
// srcLd = N8). A copy of 16-bit elements by their bits: no arithmetic.
//
// Compiled by NVRTC with:
//   HK_THREADS threads per CTA: 128, 256, 512 or 1024
//   HK_VEC     destination elements a thread stores at once: 1, 2, 4 or 8 (16 bytes)
// Entry point (MmPadFamily::kKernelName):
//   extern "C" __global__ void hk_pad_rows(const void* src, void* dst, long long dstRows, long long dstCols,
//                                          long long srcRows, long long srcCols, long long srcLd)
// Preconditions (MmPadFamily's guards, on the host): dst aligned to HK_VEC * 2
// bytes, src to 2; srcRows <= dstRows, srcCols <= dstCols <= srcLd or srcRows
// <= 1; dst does not overlap src. The grid is any size: a grid-stride loop
// covers the destination, each thread HK_VEC consecutive elements of it (one
// aligned vector store), then the last dstRows * dstCols % HK_VEC elements one
// each.

#if !defined(HK_THREADS) || !defined(HK_VEC)
#error "pad_rows.cu needs HK_THREADS and HK_VEC"
#endif
static_assert(HK_VEC == 1 || HK_VEC == 2 || HK_VEC == 4 || HK_VEC == 8, "HK_VEC must be 1, 2, 4 or 8");

typedef unsigned short hk_bits;  // a float16 / bfloat16 by its bits
struct alignas(HK_VEC * 2) hk_bits_pack {
  hk_bits v[HK_VEC];
};

__device__ __forceinline__ hk_bits hk_source_at(const hk_bits* src, long long r, long long c, long long srcRows,
                                                long long srcCols, long long srcLd) {
  return (r < srcRows && c < srcCols) ? src[r * srcLd + c] : (hk_bits)0;
}

extern "C" __global__ void __launch_bounds__(HK_THREADS)
    hk_pad_rows(const void* srcPtr, void* dstPtr, long long dstRows, long long dstCols, long long srcRows,
                long long srcCols, long long srcLd) {
  const hk_bits* src = static_cast<const hk_bits*>(srcPtr);
  hk_bits* dst = static_cast<hk_bits*>(dstPtr);
  const long long total = dstRows * dstCols;
  const long long packs = total / HK_VEC;
  const long long stride = (long long)gridDim.x * HK_THREADS;
  const long long first = (long long)blockIdx.x * HK_THREADS + threadIdx.x;
  for (long long p = first; p < packs; p += stride) {
    long long r = (p * HK_VEC) / dstCols;
    long long c = p * HK_VEC - r * dstCols;
    hk_bits_pack out;
#pragma unroll
    for (int j = 0; j < HK_VEC; ++j) {
      out.v[j] = hk_source_at(src, r, c, srcRows, srcCols, srcLd);
      if (++c == dstCols) {
        c = 0;
        ++r;
      }
    }
    reinterpret_cast<hk_bits_pack*>(dst)[p] = out;
  }
  const long long i = packs * HK_VEC + first;  // the tail: fewer than HK_VEC elements
  if (i < total) {
    const long long r = i / dstCols;
    dst[i] = hk_source_at(src, r, i - r * dstCols, srcRows, srcCols, srcLd);
  }
}
