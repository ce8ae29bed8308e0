#pragma once
// Whether a recorded result has the layout ATen allocates for it (internal to
// the builder; Note [Result layouts as ATen allocates them] in
// TensorIteratorLayout.h).

#include <cstddef>
#include <cstdint>

#include "OpRules.h"
#include "hotkernel/chain/RecordedCall.h"

namespace hotkernel::chain::detail {

// Throws (HOTKERNEL_REQUIRE) where `out`, the call's result number `result`,
// has other sizes or strides than ATen gives it.
void checkResultLayout(const rules::OpRule& rule, const RecordedCall& call, const TensorMetas& metas, int64_t out,
                       size_t result);

// clone's memory_format: true for torch.contiguous_format, false for none or
// torch.preserve_format (the result strides of empty_like); throws for another.
bool cloneContiguous(const RecordedCall& call);

}  // namespace hotkernel::chain::detail
