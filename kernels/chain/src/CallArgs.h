#pragma once
// A recorded call's arguments and tensors as the chain builder reads them
// (internal to the builder): what each op's arguments must be, checked
// with HOTKERNEL_REQUIRE (the message becomes the build's reason).

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "hotkernel/chain/ChainLayout.h"
#include "hotkernel/chain/ChainTypes.h"
#include "hotkernel/chain/RecordedCall.h"

namespace hotkernel::chain::detail {

// Value id's metadata; Error when the recording has none.
const TensorMeta& metaOf(const TensorMetas& metas, int64_t id);
// A tensor's dtype; Error (naming value `id`) for one a chain does not hold.
DType dtypeOf(const TensorMeta& m, int64_t id);
// Note [Transposed layouts]: a transposed copy's kernel reads along the input's row dim at stride 1, which must
// be the innermost; a lone copy's rows are independent, so its row dims may come in any order (NHWC's channels, a
// middle dim of NCHW's view of it, go last). Moves the last dim of extent above 1 at input stride 1 there.
void unitStrideDimLast(ChainLayout& layout);
// Argument i, or null past the recorded ones (trailing defaults).
const RecordedArg* argAt(const RecordedCall& call, size_t i);
// Argument i as a number, `fallback` when absent or None; `what` names it in the error.
double scalarArg(const RecordedCall& call, size_t i, double fallback, const char* what);
// Error unless the call has 1 to `most` arguments.
void argCount(const RecordedCall& call, size_t most);
// A unary op's arguments: its tensor alone, or softplus's with ATen's default beta 1 and threshold 20 (Note
// [Softplus and Mish in a chain]).
void unaryArgs(const RecordedCall& call);
// sum / mean / amax (self, dim, keepdim, dtype?): whether it keeps the dim; Error unless it reduces the last dim
// of self alone.
bool reduceKeepdim(const RecordedCall& call, const TensorMetas& metas);
// cat (tensors, dim): the parts' value ids; Error unless it joins one or more tensors along the last dim, equal
// in every leading dim.
std::vector<int64_t> catParts(const RecordedCall& call, const TensorMetas& metas);

// clamp / clamp_min / clamp_max / hardtanh (self, bounds...): the bounds given (Note [Clamp in a chain]);
// `lowerFirst`: the op's first bound is a lower one (clamp, clamp_min, hardtanh). Error unless at least one bound
// is given, each a finite number.
struct ClampBounds {
  std::optional<double> lower, upper;
};
ClampBounds clampBounds(const RecordedCall& call, bool lowerFirst);

}  // namespace hotkernel::chain::detail
