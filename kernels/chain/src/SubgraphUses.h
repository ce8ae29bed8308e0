#pragma once
// Who reads each node of a chain and which nodes are outputs (internal): what
// the group finders (ChainSoftmax.cpp, ChainLayerNorm.cpp) ask of a subgraph
// that one ATen call computed.

#include <algorithm>
#include <utility>
#include <vector>

#include "hotkernel/chain/ChainIR.h"

namespace hotkernel::chain::detail {

class SubgraphUses {
 public:
  explicit SubgraphUses(const ChainIR& ir) : ir_(ir), users_(ir.size()), isOutput_(ir.size(), false) {
    for (size_t i = 0; i < ir.size(); ++i) {
      for (int o : ir.nodes()[i].operands) users_[static_cast<size_t>(o)].push_back(static_cast<int>(i));
    }
    for (int o : ir.outputs()) isOutput_[static_cast<size_t>(o)] = true;
  }

  const Node& node(int i) const { return ir_.node(i); }
  bool isOutput(int n) const { return isOutput_[static_cast<size_t>(n)]; }
  const std::vector<int>& users(int n) const { return users_[static_cast<size_t>(n)]; }

  // Whether node n is no output and read only by `readers`.
  bool readOnlyBy(int n, const std::vector<int>& readers) const {
    if (isOutput(n)) return false;
    for (int u : users(n)) {
      if (std::find(readers.begin(), readers.end(), u) == readers.end()) return false;
    }
    return true;
  }

  // Whether node n is a row mean: a keepdim mean of one operand.
  bool isRowMean(int n) const {
    const Node& m = node(n);
    return m.op == OpKind::Mean && m.keepdim && m.operands.size() == 1;
  }

  // The value a norm's result r was before its cast back to x's dtype (the cast's operand, which joins
  // `internal`), or r when r is no cast (a float32 x).
  int beforeCastBack(int r, std::vector<int>& internal) const {
    if (node(r).op != OpKind::Cast) return r;
    const int y = node(r).operands.at(0);
    internal.push_back(y);
    return y;
  }

  // Value v as a call read it: a widened 16-bit value's source (the widening cast joins `internal`), else v.
  int asCalled(int v, std::vector<int>& internal) const {
    const Node& n = node(v);
    if (n.op == OpKind::Cast && node(n.operands.at(0)).dtype != DType::Float32) {
      internal.push_back(v);
      return n.operands[0];
    }
    return v;
  }

  // Whether node n is `op` of two operands (add's and sub's alpha 1), and which.
  bool binary(int n, OpKind op, int& a, int& b) const {
    const Node& v = node(n);
    if (v.op != op || v.operands.size() != 2 || ((op == OpKind::Add || op == OpKind::Sub) && v.scalar != 1.0)) {
      return false;
    }
    a = v.operands[0];
    b = v.operands[1];
    return true;
  }

  // Whether a group is what one call computed: every node of `internal` is no output and read only by the
  // group (its internal nodes and its result).
  bool closed(const std::vector<int>& internal, int result) const {
    std::vector<int> members = internal;
    members.push_back(result);
    return std::all_of(internal.begin(), internal.end(), [&](int n) { return readOnlyBy(n, members); });
  }

 private:
  const ChainIR& ir_;
  std::vector<std::vector<int>> users_;
  std::vector<bool> isOutput_;
};

// The groups `matcher` finds ending at each node of `ir`, in node order
// (Matcher::match(int node, Group&) -> bool).
template <typename Group, typename Matcher>
std::vector<Group> groupsAtEachNode(const ChainIR& ir, const Matcher& matcher) {
  std::vector<Group> groups;
  for (size_t r = 0; r < ir.size(); ++r) {
    Group g;
    if (matcher.match(static_cast<int>(r), g)) groups.push_back(std::move(g));
  }
  return groups;
}

// The groups whose result is no other group's internal node: where a norm without its bias (or weight) is a norm
// too, the largest (Group: .result, .internal).
template <typename Group>
std::vector<Group> outermostGroups(std::vector<Group> groups, size_t nodes) {
  std::vector<bool> internal(nodes, false);
  for (const Group& g : groups) {
    for (int n : g.internal) internal[static_cast<size_t>(n)] = true;
  }
  groups.erase(std::remove_if(groups.begin(), groups.end(),
                              [&](const Group& g) { return internal[static_cast<size_t>(g.result)]; }),
               groups.end());
  return groups;
}

}  // namespace hotkernel::chain::detail
