#pragma once
// A chain run by ATen, op by op, as eager PyTorch runs it: the reference a
// fused chain kernel is checked and timed against (issue 20's harness), and
// the check that the chain IR's rules (Note [Chain dtypes] in
// hotkernel/chain/ChainIR.h) are ATen's.
//
// Note [The chain's ATen reference]
// Each node becomes the ATen call the dispatcher saw when the chain was
// recorded: neg, exp, log, rsqrt, sqrt, tanh, sigmoid, silu, gelu (approximate
// "none" or "tanh"), relu, abs, pow(x, exponent), reciprocal, add / sub with
// alpha, mul, div, `to(dtype)` (a clone for a cast to the value's own
// dtype: Note [Relayout copies]), sum / mean / amax over the last dim with
// the node's keepdim, and cat along the last dim; a softmax group (Note
// [Softmax groups]) is one aten::_softmax or aten::_log_softmax, a layer_norm
// group (Note [LayerNorm groups]) one aten::native_layer_norm (through the
// dispatcher: a variant hotkernel serves runs its kernel). A Scalar operand (a constant, or a Scalar input's float
// value) is a wrapped number, a 0-dim double CPU tensor marked as Python
// wraps a number, so TensorIterator casts it to the common dtype exactly as
// it does in eager code. Every intermediate is materialized in its dtype, as
// in eager mode. Runs on the inputs' device (CPU or CUDA) and stream.

#include <vector>

#include <ATen/ATen.h>

#include "hotkernel/chain/ChainIR.h"

namespace hotkernel {

// The values of a chain's inputs for one call: one per ir.inputs() in order;
// a tensor input's tensor ([rows, extent] for Full, [extent] for Column, the
// extent its own or cols: Note [Chain column extents]; [rows, 1] for Row),
// or a Scalar input's value.
struct ChainReferenceInput {
  at::Tensor tensor;
  double scalar = 0.0;
};

// The chain's outputs (ir.outputs() order), computed by ATen op by op.
// Full inputs are [rows, extent], or all of one row shape rowDims + [extent]
// (rowDims' product rows, any strides: Note [Chain values in a layout]); Row
// inputs are then viewed as rowDims + [1], and the outputs come in the row
// shape (chainValueOf makes them [rows, extent] again). Error
// (HOTKERNEL_CHECK) on a wrong count of inputs or a tensor of the wrong
// dtype or shape for its input.
// With `split` > 0 (Note [Chain values in a group view] in
// ChainLayoutValues.h) every value's columns come as [cols / split, split]:
// Full inputs rowDims + [extent / split, split], Row inputs rowDims + [1, 1],
// Column inputs [extent / split, split]; a reduction is over both. A group
// norm (Note [GroupNorm groups]) then runs as aten::native_group_norm of x
// viewed [N, C, split], its groups read from the weight's (or the bias's)
// row strides.
std::vector<at::Tensor> runChainWithAten(const chain::ChainIR& ir, const std::vector<ChainReferenceInput>& inputs,
                                         int64_t rows, int64_t cols, int64_t split = 0);

// The sizes of a chain value of `shape` over [rows, cols]: [rows, cols] Full,
// [cols] Column, [rows, 1] Row, [rows] RowFlat, [] Scalar.
std::vector<int64_t> chainValueSizes(chain::ShapeClass shape, int64_t rows, int64_t cols);

// The torch dtype of a chain dtype.
at::ScalarType chainScalarType(chain::DType dtype);

}  // namespace hotkernel
