#pragma once
// Where a recorded tensor lies against a chain's view (internal to the builder).

#include <cstdint>
#include <string>
#include <vector>

#include "hotkernel/chain/ChainTypes.h"
#include "hotkernel/chain/RecordedCall.h"

namespace hotkernel::chain::detail {

// A tensor's class, its column extent (0 in a width-free chain) and, for a
// Full value, its row strides over the view's leading dims (Note [Chain layouts]).
struct Placement {
  ShapeClass shape = ShapeClass::Full;
  int64_t cols = 0;
  std::vector<int64_t> strides;
  int64_t colStride = 1;  // a Full value's last-dim stride (Note [Transposed layouts])
  int64_t colRepeat = 1;  // a Full value's column repeat (Note [Repeated columns])
};

// "[a, b, c]", for messages.
std::string join(const std::vector<int64_t>& v);
// The product of sizes.
int64_t numel(const std::vector<int64_t>& sizes);

// Tensor `m` (value `id`, for messages) against the view `full` (the widest
// tensor's sizes): Row, RowFlat and Column values contiguous, a Full value
// contiguous or, with `layouts`, strided and broadcast over leading dims
// (aligned from the right; last-dim stride 1, or another with `layouts`: a
// transposed copy's input, Note [Transposed layouts]). Error (HOTKERNEL_REQUIRE)
// saying why a tensor is no chain value (Note [Building a chain from calls]).
Placement placeTensor(const TensorMeta& m, int64_t id, const std::vector<int64_t>& full, bool widthFixed, bool layouts);

}  // namespace hotkernel::chain::detail
