#pragma once
// The softmax subgraphs of a chain: where the chain computes what one
// aten::_softmax or aten::_log_softmax call computed.
//
// Note [Softmax groups]
// The builder turns a softmax call into seven nodes (Note [Softmax in a
// chain]); the IR keeps no trace of the call. findSoftmaxGroups recognizes
// the shape again: [cast to float32 of a 16-bit x], amax (keepdim), sub,
// exp, sum (keepdim), then div (softmax) or sub of the sum's log
// (log_softmax), [cast to x's dtype], where every node but the result is
// read only inside the group and is no output. The chain's ATen reference
// runs such a group as the one call eager made (Note [The chain's ATen
// reference]): a fused kernel is timed against what eager runs, never
// against seven kernels it does not. A chain that spells softmax out op by
// op has the same IR, so it is timed against the faster baseline: a fused
// kernel is then accepted only where it beats the single call.

#include <vector>

#include "hotkernel/chain/ChainIR.h"

namespace hotkernel::chain {

struct SoftmaxGroup {
  int input = -1;             // the node softmax reads (x)
  int result = -1;            // the node holding softmax's result
  bool log = false;           // log_softmax
  bool halfToFloat = false;   // a 16-bit x, a float32 result (aten::_softmax's half_to_float)
  std::vector<int> internal;  // the group's other nodes, ascending: read only by the group
};

// The groups of `ir`, by result node ascending; they share no node.
std::vector<SoftmaxGroup> findSoftmaxGroups(const ChainIR& ir);

}  // namespace hotkernel::chain
