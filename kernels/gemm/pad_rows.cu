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
// <= 1; dst does not overlap src. A 16-byte aligned source is read in whole
// aligned 16-byte vectors (Note [Shifted source vectors]): up to 7 elements
// past a row's srcCols, within the vector that holds its last element (no
// page boundary crossed; the values are not used). The grid is any size: a grid-stride loop
// covers the destination, each thread HK_VEC consecutive elements of it (one
// aligned vector store), then the last dstRows * dstCols % HK_VEC elements one
// each.
//
// Note [Shifted source vectors]
// With N odd, the output copy's destination rows start at every 2-byte
// offset, so a destination vector and its source elements are never aligned
// alike. A thread keeps the (row, column) of its vector and steps it by the
// grid stride (one division per thread, not one per vector). A vector inside
// one destination row whose elements all come from the source is read, when
// HK_VEC is 8, the source 16-byte aligned and srcLd a multiple of 8, as the
// one or two aligned 16-byte source vectors that hold it, shifted by the
// column's offset in them (c % 8: the same for the whole row, so a warp
// takes one branch of the shift's switch); the second vector is the next
// thread's first, which the L1 serves. Vectors that cross a row end or reach
// past the source (one a row, and the zero padding) are built element by
// element; vectors wholly past the source are zeros.

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

#if HK_VEC == 8
// Elements [SH, SH + 8) of the concatenation a, b (Note [Shifted source vectors]).
template <int SH>
__device__ __forceinline__ hk_bits_pack hk_shifted(const hk_bits_pack& a, const hk_bits_pack& b) {
  hk_bits_pack out;
#pragma unroll
  for (int j = 0; j < 8; ++j) out.v[j] = j + SH < 8 ? a.v[(j + SH) % 8] : b.v[(j + SH) % 8];
  return out;
}

// The 8 source elements from index s on, from the aligned vectors that hold them; sh = s % 8.
__device__ __forceinline__ hk_bits_pack hk_load_shifted(const hk_bits* src, long long s, int sh) {
  const hk_bits_pack* at = reinterpret_cast<const hk_bits_pack*>(src + (s - sh));
  const hk_bits_pack a = at[0];
  if (sh == 0) return a;
  const hk_bits_pack b = at[1];
  switch (sh) {
    case 1: return hk_shifted<1>(a, b);
    case 2: return hk_shifted<2>(a, b);
    case 3: return hk_shifted<3>(a, b);
    case 4: return hk_shifted<4>(a, b);
    case 5: return hk_shifted<5>(a, b);
    case 6: return hk_shifted<6>(a, b);
    default: return hk_shifted<7>(a, b);
  }
}
#endif

extern "C" __global__ void __launch_bounds__(HK_THREADS)
    hk_pad_rows(const void* srcPtr, void* dstPtr, long long dstRows, long long dstCols, long long srcRows,
                long long srcCols, long long srcLd) {
  const hk_bits* src = static_cast<const hk_bits*>(srcPtr);
  hk_bits* dst = static_cast<hk_bits*>(dstPtr);
  const long long total = dstRows * dstCols;
  const long long packs = total / HK_VEC;
  const long long stride = (long long)gridDim.x * HK_THREADS;
  const long long first = (long long)blockIdx.x * HK_THREADS + threadIdx.x;
#if HK_VEC == 8
  const bool vectorSource = ((unsigned long long)srcPtr % 16) == 0 && srcLd % 8 == 0;
#endif
  // The pack's first element at (r, c), stepped by the stride's (dr, dc) rows and columns.
  const long long strideElements = stride * HK_VEC;
  const long long dr = strideElements / dstCols, dc = strideElements - dr * dstCols;
  long long r = (first * HK_VEC) / dstCols;
  long long c = first * HK_VEC - r * dstCols;
  for (long long p = first; p < packs; p += stride) {
    hk_bits_pack out;
    if (c + HK_VEC <= dstCols && (r >= srcRows || c >= srcCols)) {
#pragma unroll
      for (int j = 0; j < HK_VEC; ++j) out.v[j] = 0;
#if HK_VEC == 8
    } else if (vectorSource && c + 8 <= dstCols && r < srcRows && c + 8 <= srcCols) {  // in the row and the source
      out = hk_load_shifted(src, r * srcLd + c, (int)(c % 8));
#endif
    } else {
      long long er = r, ec = c;
#pragma unroll
      for (int j = 0; j < HK_VEC; ++j) {
        out.v[j] = hk_source_at(src, er, ec, srcRows, srcCols, srcLd);
        if (++ec == dstCols) {
          ec = 0;
          ++er;
        }
      }
    }
    reinterpret_cast<hk_bits_pack*>(dst)[p] = out;
    c += dc;
    r += dr;
    if (c >= dstCols) {
      c -= dstCols;
      ++r;
    }
  }
  const long long i = packs * HK_VEC + first;  // the tail: fewer than HK_VEC elements
  if (i < total) {
    const long long tr = i / dstCols;
    dst[i] = hk_source_at(src, tr, i - tr * dstCols, srcRows, srcCols, srcLd);
  }
}
