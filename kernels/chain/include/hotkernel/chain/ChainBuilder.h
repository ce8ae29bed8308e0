#pragma once
// From recorded dispatcher calls to a ChainIR, or the precise reason why not.
//
// Note [Building a chain from calls]
// buildChain reads the calls in order and adds one node per call
// (ChainIR's adders: they check dtypes and broadcasts), mapping value ids
// to nodes. The chain's logical [rows, cols] view comes from its widest
// tensor (the most elements, then the most dims): its last dim is cols, the
// others fold into rows (the row dims of Note [Chain layouts]). Every tensor
// is then classified against it (Note [Chain shape classes]) and every
// recorded result is checked against the node: its dtype must be the one
// ATen's promotion gives, its sizes the class's, its strides the ones ATen
// allocates (Note [Result layouts as ATen allocates them]). A sequence
// holding an `aten::cat` along the last dim (any number of parts, the dim
// as -1 or positive) builds a width-fixed chain (Note [Chain column
// extents]): every full and column value has its own last dim as extent.
// With `options.layouts`, a full tensor may be strided over the leading
// dims (last-dim stride 1, strides >= 0) and broadcast over any of them
// (TensorIterator's alignment from the right, size 1 against a larger
// dim), and the build's layout says where each argument lies (normalized:
// contiguous chains have the empty layout); without it (what the engine
// asks for until it allocates and launches with layouts) such a tensor is
// refused as before. A call is refused, and with it the sequence, for:
//   an op outside the chain's vocabulary (the message says "unsupported op"),
//   a view op (view, reshape's alias, expand, slice, select, transpose, ...),
//   an out= op (*.out), an in-place op (aten::add_) on a chain input or
//   one no chain step takes in place (Note [In-place steps] in src/CallWrites.h:
//   one on a value an earlier call returned is a step), a result that
//   aliases an argument, a tensor that is not contiguous (strided without
//   `options.layouts`, or a Row, RowFlat or Column value), a result whose
//   strides are not ATen's, an output whose rows overlap, a cat along
//   another dim, a dtype that is not float32 /
//   float16 / bfloat16, a broadcast that is no chain class, a reduction that
//   is not over the last dim alone or has a narrowing dtype=, gelu with an
//   unknown approximation, a value returned twice or read before it is
//   returned, a call that returns other than one tensor.
// The outputs are the values in `liveOutputs` (what the caller knows is
// read after the chain), or, when it is empty, every returned value that no
// later call of the sequence reads. Nodes that reach no output are dropped
// (dead intermediates are never computed), and so are inputs that only they
// read.

#include <cstdint>
#include <string>
#include <vector>

#include "hotkernel/chain/ChainIR.h"
#include "hotkernel/chain/ChainLayout.h"
#include "hotkernel/chain/RecordedCall.h"

namespace hotkernel::chain {

// Note [The group view]
// A sequence holding an aten::native_group_norm (Note [GroupNorm in a
// chain]) is built over the norm's group view instead: its x, a contiguous
// [N, C, *spatial] of HxW = prod(spatial) >= 2 elements a channel in G
// groups, is [N * G, (C / G) * HxW], a group a row (the row dims [N, G]).
// Every other tensor is read against x's sizes (aligned from the right,
// broadcasting as TensorIterator does) and placed in the view by its
// strides over N, C and the spatial dims: varying over the spatial dims
// densely and over C at stride HxW (x's own layout, any N stride), a Full
// value; constant over the spatial dims and contiguous over C (a [C, 1, 1]
// or [N, C, 1, 1] addend), a Full value of column repeat HxW (Note
// [Repeated columns]) with row strides (its N stride, C / G); constant over
// C and the spatial dims, column repeat the row's width; anything else
// (a spatial map shared by the channels, C at another stride) is refused.
// The norm's weight and bias ([C], contiguous) are per-channel values
// (row strides 0 and C / G, repeat HxW); its mean and rstd ([N, G]) are
// rows, results only (a call that reads them is refused). Every group norm
// of the sequence has x's geometry, and the view has no other reduction,
// softmax, layer_norm or cat (they reduce or join over x's last dim, not a
// group). A layout with a per-channel value is not contiguous (it
// repeats), so such chains need `options.layouts`. An eval batch norm
// (Note [Eval BatchNorm in a chain]) takes the same view with one channel a
// group (G = C), its weight, bias and running statistics per-channel values
// and its empty results no value (a call that reads one is refused).

struct ChainBuild {
  ChainIR chain;
  // Empty when the chain was built; otherwise "call 3 (aten::add_.Tensor(...)): in-place op on %2 ..."
  std::string reason;
  std::vector<int64_t> inputValues;   // the value id behind each chain input, in input order
  std::vector<int64_t> outputValues;  // the value id behind each chain output, in output order
  int64_t rows = 0;
  int64_t cols = 0;
  ChainLayout layout;  // normalized (Note [Chain layouts]); empty for a contiguous chain

  bool ok() const { return reason.empty(); }
};

struct ChainBuildOptions {
  bool layouts = false;  // accept strided and broadcast full tensors (Note [Building a chain from calls])
};

// Note [Relayout copies]
// A clone (or a _to_copy, to the same dtype or another) of a strided or
// broadcast value is a chain of one cast whose kernel reads the value through
// the variant's layout and writes the copy in the result's strides. Eager
// runs such copies with TensorIterator's strided kernel, element by element;
// the chain kernel reads and writes whole vectors of each row. The learner
// and the segments take one such call as a chain of its own (as the lone
// normalizations below; any other lone call is nothing to fuse), and the
// tuner keeps its kernel only where it beats
// eager's copy (the ATen reference clones for a cast to the same dtype, casts
// otherwise). HF's eager attention makes three a layer: matmul's reshape of q
// and of v (head views of the fused QKV projection) and the output's
// transpose back to [batch, seq, hidden]; a `.float()` of a strided view is
// the cast kind.
// Whether `build` is one such copy: one input, one cast of it, and a layout
// that is not contiguous.
bool isRelayoutCopy(const ChainBuild& build);

// Note [Lone normalizations]
// A group norm or an eval batch norm is a chain of its own too, with nothing
// after it (diffusers' GroupNorm before an attention block's projection; a
// ResNet's batch norm before an in-place ReLU or residual add_, which end a
// chain). Eager runs a group norm as three kernels (the groups' statistics,
// the per-channel scale and shift, then an elementwise pass reading x again)
// and an eval batch norm as one elementwise pass whose four per-channel
// operands TensorIterator broadcasts element by element; the chain kernel is
// one pass over the group view (Note [The group view]) with the per-channel
// values as repeated columns. The learner and the segments take such a call
// alone, and the tuner keeps its kernel only where it beats eager.
// Whether `calls` (the calls `build` was built from) are a chain although
// they are one call: a relayout copy or one of these normalizations.
bool isLoneChain(const std::vector<RecordedCall>& calls, const ChainBuild& build);

// Never throws for a bad recording (the reason says what is wrong).
ChainBuild buildChain(const std::vector<RecordedCall>& calls, const TensorMetas& tensors,
                      const std::vector<int64_t>& liveOutputs = {}, const ChainBuildOptions& options = {});

}  // namespace hotkernel::chain
