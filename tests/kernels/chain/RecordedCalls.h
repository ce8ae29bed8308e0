#pragma once
// Recorded calls and tensor metadata as the builder tests write them by hand.

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "hotkernel/chain/RecordedCall.h"

namespace hotkernel::chain::testutil {

// A contiguous tensor of `type` and `sizes`.
inline TensorMeta contiguous(const std::string& type, std::vector<int64_t> sizes) {
  std::vector<int64_t> strides(sizes.size());
  int64_t s = 1;
  for (size_t d = sizes.size(); d-- > 0;) {
    strides[d] = s;
    s *= sizes[d];
  }
  return TensorMeta{type, std::move(sizes), std::move(strides)};
}

// A call of `op` returning one value, `out`.
inline RecordedCall call(std::string op, std::vector<RecordedArg> args, int64_t out) {
  return RecordedCall{std::move(op), std::move(args), {out}};
}

}  // namespace hotkernel::chain::testutil
