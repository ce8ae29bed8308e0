#pragma once
// A chain variant's values in its layout: the memory a fused kernel reads and
// writes, and the tensors ATen computes on over the same memory.
//
// Note [Chain values in a layout]
// A variant with a layout (Note [Chain layouts]) is checked and timed on
// memory laid out as the variant's calls had it: each tensor argument k
// (chainTensorArgs order: tensor inputs, then outputs) is a 1-d buffer of
// layoutSpan elements, the kernel's pointer its first element. Its value is
// the strided view of the buffer: sizes rowDims + [extent], strides k's row
// strides + [1] for a Full argument (a stride of 0 repeats the row over that
// dim, as eager's expanded tensors do: cos shared by the heads, an attention
// mask by the heads), [extent] for a Column, rowDims + [1] for a Row,
// rowDims for a RowFlat. Inputs are drawn as memory and read through their
// views, so the values of broadcast rows agree as eager's do, and ATen runs
// the chain on the views themselves: its timing is eager's (strided reads,
// broadcasts served from L2), not that of copies made contiguous. An output
// is checked through its view, and its buffer outside the view's elements
// (the guards around the span and any element between strided rows) must
// keep its bits. The empty layout is the contiguous one: rowDims [rows], a
// Full buffer is the [rows, extent] value row by row, and nothing changes for
// a contiguous variant (the same draws, the same reference).

//
// Note [Chain values in a group view]
// A layout with repeated columns (Note [Repeated columns]: a group norm's
// per-channel values over rows of C / G channels of HxW elements) has no
// strided view [extent] of a repeated value: element c is the buffer's
// c / R. So such a variant's values come with their columns split at the
// smallest repeat S (chainColumnSplit: HxW): a Full value is rowDims +
// [extent / S, S], a repeated one of R = S strides + [1, 0] (a [C, 1]
// broadcast over HxW, as eager's per-channel tensors are), one of R = its
// extent strides + [0, 0] (one value a row); a repeat between the two is
// copied into that shape. ATen runs the chain on those views with
// runChainWithAten's `split` (reductions over both column dims, a group
// norm as aten::native_group_norm), so the reference reads what eager read
// and times what eager ran.

#include <cstdint>
#include <vector>

#include <ATen/ATen.h>

#include "hotkernel/chain/ChainIR.h"
#include "hotkernel/chain/ChainLayout.h"
#include "hotkernel/optimizer/ChainReference.h"

namespace hotkernel {

// The index of output 0 among the kernel's tensor arguments (chainTensorArgs):
// the count of the chain's tensor inputs.
size_t chainFirstOutputArg(const chain::ChainIR& ir);

// The column split of a layout's values (Note [Chain values in a group
// view]): its smallest repeat above 1, or 0 for a layout without repeats;
// Error when a repeat is no multiple of it.
int64_t chainColumnSplit(const chain::ChainLayout& layout);

// The elements of tensor argument `arg`'s buffer (layoutSpan; for a Row or
// RowFlat argument rows, for a Column its extent).
int64_t chainArgumentElements(const chain::ChainIR& ir, const chain::ChainLayout& layout, size_t arg, int64_t rows,
                              int64_t cols);

// The value of tensor argument `arg` over `memory` (a 1-d tensor of at least
// chainArgumentElements elements, its first element the argument's): a view,
// never a copy (Note [Chain values in a layout]), but for a repeat between
// the split and the extent (Note [Chain values in a group view]).
at::Tensor chainArgumentView(const chain::ChainIR& ir, const chain::ChainLayout& layout, size_t arg,
                             const at::Tensor& memory, int64_t rows, int64_t cols);

// The inputs as ATen computes on them: each tensor input's view over its
// memory (`memory[k]`, the chain's inputs in order; Scalar inputs as given).
std::vector<ChainReferenceInput> chainInputViews(const chain::ChainIR& ir, const chain::ChainLayout& layout,
                                                 const std::vector<ChainReferenceInput>& memory, int64_t rows,
                                                 int64_t cols);

// ATen's outputs for inputs given as memory (runChainWithAten on their
// views), each as its [rows, extent] value: the reference the harness and
// the tuner's timed checks compare a kernel's outputs with.
std::vector<at::Tensor> chainAtenValues(const chain::ChainIR& ir, const chain::ChainLayout& layout,
                                        const std::vector<ChainReferenceInput>& memory, int64_t rows, int64_t cols);

// A chain value of any row shape (rowDims + [extent] and the like) as the
// chain's [rows, extent] / [extent] / [rows, 1] / [rows] value, for comparing.
at::Tensor chainValueOf(const chain::Node& n, const at::Tensor& value, int64_t rows, int64_t cols);

}  // namespace hotkernel
