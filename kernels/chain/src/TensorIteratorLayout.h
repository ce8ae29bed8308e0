#pragma once
// The sizes and strides ATen gives the result of a pointwise op, a cast and
// a cat, from its arguments' metadata (internal to the builder).
//
// Note [Result layouts as ATen allocates them]
// The builder checks every recorded result against the layout ATen gives
// it, so that a chain is built only from recordings whose metadata is
// consistent (the engine allocates a deferred result with the recorded
// metadata, and the kernel writes it through the variant's layout). A
// TensorIterator op (every unary and binary op of the vocabulary) allocates
// its output as TensorIteratorBase::build does: the broadcast shape of its
// tensor operands (a wrapped number is a 0-dim operand: it broadcasts, and
// makes the shapes unequal); when every operand has that shape, the fast
// setup: all contiguous gives a contiguous output, all channels-last (4-d)
// a channels-last one, all non-overlapping and dense with equal strides
// those strides; otherwise compute_strides (a broadcast dim has stride 0)
// and reorder_dimensions (an insertion sort of the dims, fastest first, by
// the operands' strides in argument order: the first operand whose strides
// of the two dims are both non-zero and differ decides; equal strides put
// the smaller dim first when that operand's dim is larger; broadcast
// strides abstain), then dense strides in that order (contiguous when the
// order is the identity). `_to_copy` and `clone` (preserve) are
// empty_like(self) with the preserved memory format: self's strides when self
// is non-overlapping and dense, else dense strides in self's order of dims
// (the order TensorIterator gives one operand: a head view of a projection
// keeps its (batch, seq, heads, dim) order; a broadcast dim abstains);
// channels-last suggestions are not modelled (such a recording is refused). `cat` along the last dim allocates contiguous
// output unless every part suggests channels-last (not modelled: refused).
// Operands are given in the order TensorIterator sees them (rsub's are
// (other, self)).

#include <cstdint>
#include <optional>
#include <vector>

#include "hotkernel/chain/RecordedCall.h"

namespace hotkernel::chain::detail {

bool isContiguous(const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides);
bool isNonOverlappingAndDense(const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides);
std::vector<int64_t> contiguousStrides(const std::vector<int64_t>& sizes);

// The result of a TensorIterator op over `operands` (nullptr for a wrapped
// number), in argument order; nullopt when the shapes do not broadcast.
std::optional<TensorMeta> tensorIteratorResult(const std::vector<const TensorMeta*>& operands);

// empty_like(self) with the preserved memory format (Note [Result layouts as ATen allocates them]).
std::vector<int64_t> emptyLikeStrides(const TensorMeta& self);

}  // namespace hotkernel::chain::detail
