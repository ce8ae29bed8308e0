#pragma once
// The group_norm subgraphs of a chain: where the chain computes what one
// aten::native_group_norm call computed.
//
// Note [GroupNorm groups]
// The builder turns a native_group_norm call into the nodes of Note
// [GroupNorm in a chain]; findGroupNormGroups recognizes them again:
// [cast of a 16-bit x to float32] xf, mean = mean(xf) (keepdim), d = xf -
// mean, var = mean(d * d), rstd = rsqrt(var + eps constant), each of mean
// and rstd [rounded to x's dtype and back], then either a = rstd [* weight],
// b = [bias] - a * mean (or -(a * mean)), a * xf + b, or (xf - mean) * rstd;
// [cast to x's dtype]. Every node but the result is read only inside the
// group and is no output (a chain that keeps the statistics runs them op by
// op in the reference). As for LayerNorm (Note [LayerNorm groups]), the
// chain's ATen reference runs such a group as the one call eager made. A
// LayerNorm group never matches: its normalized value is d * rstd.

#include <vector>

#include "hotkernel/chain/ChainIR.h"

namespace hotkernel::chain {

struct GroupNormGroup {
  int input = -1;             // the node the norm reads (x)
  int weight = -1;            // the weight's node as the call read it, or -1
  int bias = -1;              // the bias's node as the call read it, or -1
  double eps = 0.0;           // as the chain adds it (rounded to x's dtype)
  int result = -1;            // the node holding the norm's result, in x's dtype
  std::vector<int> internal;  // the group's other nodes, ascending: read only by the group
};

// The groups of `ir`, by result node ascending; they share no node.
std::vector<GroupNormGroup> findGroupNormGroups(const ChainIR& ir);

}  // namespace hotkernel::chain
