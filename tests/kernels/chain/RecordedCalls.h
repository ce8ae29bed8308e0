#pragma once
// Recorded calls and tensor metadata as the builder tests write them by hand, and the check of a refused build.

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "hotkernel/chain/ChainBuilder.h"
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

// `calls` do not build, and the reason holds `needle`.
inline void expectRefused(const std::vector<RecordedCall>& calls, const TensorMetas& metas, const std::string& needle,
                          const std::vector<int64_t>& live = {}) {
  const ChainBuild b = buildChain(calls, metas, live);
  EXPECT_FALSE(b.ok()) << "built a chain; expected a refusal holding '" << needle << "'";
  EXPECT_NE(b.reason.find(needle), std::string::npos) << b.reason;
}

}  // namespace hotkernel::chain::testutil
