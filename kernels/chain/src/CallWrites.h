#pragma once
// What a recorded call writes, as the chain builder reads it (internal to the
// builder): an out= op writes a caller's tensor and a view op returns an
// alias, which end a chain; an in-place op is a step of its own when it writes
// a value an earlier call of the chain returned.
//
// Note [In-place steps]
// An in-place op (`relu_`, `add_.Tensor`: torchvision's ReLU(inplace=True),
// a residual `x += identity`) on a value an earlier call of the chain
// returned is a step of its own: the functional op's node, its result a new
// value in the storage of the one it overwrites (the kernel writes only the
// new value, the overwritten one is never written nor read again). Eager
// computes the functional op and writes it into its argument, so the node is
// the functional op's, with three more conditions: the result has exactly
// the argument's dtype, sizes and strides (no promotion past the argument's
// dtype: the recorded result's dtype is checked against the node's as any
// result's), the argument is no chain input (the kernel would write a tensor
// it reads and the caller made), and no later call reads the overwritten
// value nor is it an output. The forms that have such ops: unary ops,
// gelu, leaky_relu, pow, binary ops and the clamps.

#include <cstdint>
#include <string>
#include <vector>

#include "OpRules.h"
#include "hotkernel/chain/RecordedCall.h"

namespace hotkernel::chain::detail {

// Error for an out= op or a view op: what they write ends a chain.
void refuseOutAndViewOps(const std::string& schema);

// The functional schema of in-place op `schema` ("aten::add_.Tensor" ->
// "aten::add.Tensor"), or "" when `schema` is not an in-place op's.
std::string functionalOfInPlace(const std::string& schema);

// Error unless in-place `call` (whose functional op has `rule`, null for
// none) is a step (Note [In-place steps]); `produced` are the values earlier
// calls of the chain returned.
void checkInPlaceStep(const RecordedCall& call, const rules::OpRule* rule, const std::vector<int64_t>& produced,
                      const TensorMetas& metas);

}  // namespace hotkernel::chain::detail
