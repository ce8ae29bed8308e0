#pragma once
// One tuning target of chain fusion: a chain over an exact [rows, cols] in
// one memory layout on one device, and its cache identity (op, variant string).
//
// Note [Chain variant string]
// A fused chain is cached under op "hotkernel::chain" (no ATen op: the
// engine defers the chain's ops and launches one kernel) and the variant
// "chain=<sha256>;rows=R;cols=C;dev=N": the chain's key (Note [Chain key]:
// every op, dtype, shape class, scalar bit and the dataflow), the logical
// view's extents (Note [Chain shape classes]) and the device ordinal, as the
// families' variant strings name theirs. The key is a hash: the entry also
// stores the chain itself (Note [Chain entry params, v2] in ChainEntry.h),
// and a loader compares the stored chain with the one it asked for, so a
// colliding or edited entry is refused rather than launched for another chain.

#include <cstdint>
#include <string>

#include "hotkernel/chain/ChainIR.h"
#include "hotkernel/chain/ChainLayout.h"

namespace hotkernel::chain {

// The cache's op and family of fused chains.
inline constexpr const char* kChainOp = "hotkernel::chain";
inline constexpr const char* kChainFamily = "chain";

struct ChainVariant {
  ChainIR ir;
  int64_t rows = 0;
  int64_t cols = 0;
  int device = 0;
  ChainLayout layout;  // normalized (normalizeLayout); empty: contiguous
};

// "chain=<sha256>;rows=R;cols=C[;layout=L];dev=N" (Note [Chain variant
// string]); Error for an invalid chain, extents below 1, or a layout that is
// invalid or not normalized.
std::string chainVariantString(const ChainVariant& v);

}  // namespace hotkernel::chain
