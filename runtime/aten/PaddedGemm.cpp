#include "hotkernel/runtime/PaddedGemm.h"

#include <ATen/ops/empty.h>

namespace hotkernel {
namespace {

// src [srcRows, srcCols] with row stride srcLd into a contiguous dst [dstRows, dstCols], zero past the source.
bool padRows(const KernelLauncher& pad, const void* src, void* dst, int64_t dstRows, int64_t dstCols, int64_t srcRows,
             int64_t srcCols, int64_t srcLd, void* stream) {
  return pad.launchArgs(KernelArgs()
                            .pointer(src)
                            .pointer(dst)
                            .int64(dstRows)
                            .int64(dstCols)
                            .int64(srcRows)
                            .int64(srcCols)
                            .int64(srcLd),
                        stream);
}

bool aligned(const at::Tensor& t, size_t alignment) {
  return reinterpret_cast<uintptr_t>(t.const_data_ptr()) % alignment == 0;
}

}  // namespace

at::Tensor runPaddedMm(const KernelLauncher& pad, const at::Tensor& self, const at::Tensor& mat2,
                       const at::Tensor& bias, int64_t n8, const MmKernel& mm, void* stream, at::Tensor w8,
                       at::Tensor out) {
  const int64_t m = self.size(0), k = self.size(1), n = mat2.size(1);
  const size_t alignment = pad.alignment();
  if (!w8.defined()) w8 = at::empty({n8, k}, self.options());
  if (!out.defined()) out = at::empty({m, n}, self.options());
  if (!aligned(w8, alignment) || !aligned(out, alignment)) return {};
  // mat2 = w.t(): its storage is w [N, K], row-major.
  if (!padRows(pad, mat2.const_data_ptr(), w8.mutable_data_ptr(), n8, k, n, k, k, stream)) return {};
  at::Tensor b8;
  if (bias.defined()) {
    b8 = at::empty({n8}, bias.options());
    if (!aligned(b8, alignment)) return {};
    if (!padRows(pad, bias.const_data_ptr(), b8.mutable_data_ptr(), 1, n8, 1, n, n, stream)) return {};
  }
  const at::Tensor wide = mm(self, w8.t(), b8);
  if (!wide.defined() || wide.dim() != 2 || wide.size(0) != m || wide.size(1) != n8 || !wide.is_contiguous()) {
    return {};
  }
  if (!padRows(pad, wide.const_data_ptr(), out.mutable_data_ptr(), m, n, m, n, n8, stream)) return {};
  return out;
}

}  // namespace hotkernel
