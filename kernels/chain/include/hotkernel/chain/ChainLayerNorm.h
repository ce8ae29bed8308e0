#pragma once
// The layer_norm subgraphs of a chain: where the chain computes what one
// aten::native_layer_norm call computed.
//
// Note [LayerNorm groups]
// The builder turns a native_layer_norm call into a dozen nodes (Note
// [LayerNorm in a chain]); findLayerNormGroups recognizes their shape again:
// [cast to float32 of a 16-bit x], mean (keepdim), sub, mul of the
// difference by itself, mean (keepdim), add of a constant (eps), rsqrt, mul,
// [mul by a float32 column (weight), possibly a cast], [add of a float32
// column (bias), possibly a cast], [cast to x's dtype], where every node but
// the result is read only inside the group and is no output. As for softmax
// (Note [Softmax groups]), the chain's ATen reference runs such a group as
// the one call eager made, so that a fused kernel is timed against eager's
// layer_norm kernel, not a dozen of ATen's.

#include <vector>

#include "hotkernel/chain/ChainIR.h"

namespace hotkernel::chain {

struct LayerNormGroup {
  int input = -1;             // the node the norm reads (x)
  int weight = -1;            // the weight's node as the call read it, or -1
  int bias = -1;              // the bias's node as the call read it, or -1
  double eps = 0.0;
  int result = -1;            // the node holding the norm's result, in x's dtype
  std::vector<int> internal;  // the group's other nodes, ascending: read only by the group
};

// The groups of `ir`, by result node ascending; they share no node.
std::vector<LayerNormGroup> findLayerNormGroups(const ChainIR& ir);

}  // namespace hotkernel::chain
