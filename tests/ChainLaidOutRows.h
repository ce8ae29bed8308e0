#pragma once
// The memory a chain kernel leaves in an output argument, from the reference
// interpreter's values: what the tests' interpreter kernels (FusionEngineTest,
// the fusion fuzz) write in place of a generated kernel.
//
// The interpreter computes rows in the layout's row order, which need not be
// the tensor's: the builder moves the row dim where a transposed copy's input
// has stride 1 last (Note [Transposed layouts] in ChainLayout.h), so an
// NHWC->NCHW copy's interpreter rows run over the channels fastest. A kernel
// writes row r at the argument's layoutRowOffset; so does this.

#include <ATen/ATen.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "hotkernel/chain/ChainIR.h"
#include "hotkernel/chain/ChainLayout.h"

namespace hotkernel::chain::testutil {

// Writes `values` (the interpreter's output: `rows` rows of `extent`
// elements, float32, in the layout's row order) into `memory` (a 1-d tensor
// of any dtype over tensor argument `arg`'s span, from its data pointer) at
// the offsets `layout` gives each row.
inline void writeLaidOutRows(const chain::ChainIR& ir, const chain::ChainLayout& layout, size_t arg, int64_t rows,
                             int64_t cols, int64_t extent, const std::vector<float>& values,
                             const at::Tensor& memory) {
  const std::vector<int64_t> dims = chain::layoutRowDims(layout, rows);
  const std::vector<int64_t> strides = chain::layoutStrides(ir, layout, arg, rows, cols);
  const at::Tensor from =
      at::from_blob(const_cast<float*>(values.data()), {rows, extent}, at::TensorOptions().dtype(at::kFloat));
  for (int64_t r = 0; r < rows; ++r) {
    memory.narrow(0, chain::layoutRowOffset(dims, strides, r), extent).copy_(from[r]);
  }
}

// The value of output `k` of a launch (sizes and strides of the pattern's
// value, float32), its memory written as a kernel writes it; elements of the
// span no row covers stay NaN.
inline at::Tensor laidOutValue(const chain::ChainIR& ir, const chain::ChainLayout& layout, size_t arg, int64_t rows,
                               int64_t cols, int64_t extent, const std::vector<float>& values,
                               at::IntArrayRef sizes, at::IntArrayRef strides) {
  const at::Tensor memory =
      at::full({chain::layoutSpan(ir, layout, arg, rows, cols)}, NAN, at::TensorOptions().dtype(at::kFloat));
  writeLaidOutRows(ir, layout, arg, rows, cols, extent, values, memory);
  return memory.as_strided(sizes, strides);
}

}  // namespace hotkernel::chain::testutil
