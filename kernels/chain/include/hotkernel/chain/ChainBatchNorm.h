#pragma once
// The eval batch_norm subgraphs of a chain: where the chain computes what one
// aten::native_batch_norm (or cudnn_batch_norm) call in eval mode computed.
//
// Note [Eval BatchNorm groups]
// The builder turns an eval batch norm into the nodes of Note [Eval BatchNorm
// in a chain]; findBatchNormGroups recognizes them again: (x - mean) * invstd,
// invstd = rsqrt(var + eps constant), [* weight], [+ bias], [cast to x's
// dtype], where x, mean, var, weight and bias are inputs as the call read them
// (each possibly widened to float32: the cast joins the group) and every other
// node is read only inside the group and is no output. No reduction: a group
// norm's or layer norm's mean is a row mean, never an input. As for the other
// norms, the chain's ATen reference runs such a group as the one call eager
// made.

#include <vector>

#include "hotkernel/chain/ChainIR.h"

namespace hotkernel::chain {

struct BatchNormGroup {
  int input = -1;             // x as the call read it
  int mean = -1;              // the running mean as the call read it
  int var = -1;               // the running variance as the call read it
  int weight = -1;            // or -1
  int bias = -1;              // or -1
  double eps = 0.0;
  int result = -1;            // the node holding the norm's result, in x's dtype
  std::vector<int> internal;  // the group's other nodes, ascending: read only by the group
};

// The groups of `ir`, by result node ascending; they share no node.
std::vector<BatchNormGroup> findBatchNormGroups(const ChainIR& ir);

}  // namespace hotkernel::chain
