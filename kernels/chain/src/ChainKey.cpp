#include "hotkernel/chain/ChainKey.h"

#include <cstdio>
#include <utility>
#include <vector>

#include "hotkernel/runtime/Hash.h"

namespace hotkernel::chain {
namespace {

std::string hexDouble(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%a", v);
  return buf;
}

// The canonical order: inputs first, in input order (their argument
// positions), then the other nodes in a depth-first post-order from the
// outputs. `order[k]` is the original index of canonical node k.
std::vector<int> canonicalOrder(const ChainIR& ir) {
  const std::vector<Node>& nodes = ir.nodes();
  std::vector<bool> placed(nodes.size(), false);
  std::vector<int> order;
  for (int in : ir.inputs()) {
    placed[static_cast<size_t>(in)] = true;
    order.push_back(in);
  }
  // Iterative post-order: (node, next operand to visit).
  std::vector<std::pair<int, size_t>> stack;
  for (int out : ir.outputs()) {
    if (placed[static_cast<size_t>(out)]) continue;
    stack.emplace_back(out, 0);
    while (!stack.empty()) {
      auto& [index, next] = stack.back();
      const Node& n = nodes[static_cast<size_t>(index)];
      if (next < n.operands.size()) {
        const int operand = n.operands[next++];
        if (!placed[static_cast<size_t>(operand)]) stack.emplace_back(operand, 0);
        continue;
      }
      if (!placed[static_cast<size_t>(index)]) {
        placed[static_cast<size_t>(index)] = true;
        order.push_back(index);
      }
      stack.pop_back();
    }
  }
  return order;
}

}  // namespace

ChainIR canonicalChain(const ChainIR& ir) {
  ir.validate();
  const std::vector<int> order = canonicalOrder(ir);
  std::vector<int> renumber(ir.size(), -1);
  for (size_t k = 0; k < order.size(); ++k) renumber[static_cast<size_t>(order[k])] = static_cast<int>(k);
  ChainIR out;
  for (int original : order) {
    Node n = ir.node(original);
    for (int& operand : n.operands) operand = renumber[static_cast<size_t>(operand)];
    if (opInfo(n.op).category == OpCategory::Reduction) n.dim = -1;
    out.appendUnchecked(n);
  }
  for (int o : ir.outputs()) out.appendOutputUnchecked(renumber[static_cast<size_t>(o)]);
  out.validate();
  return out;
}

ChainKey chainKey(const ChainIR& ir) {
  const ChainIR canonical = canonicalChain(ir);
  std::string text = "hotkernel-chain 1\n";
  int inputIndex = 0;
  for (size_t k = 0; k < canonical.size(); ++k) {
    const Node& n = canonical.nodes()[k];
    std::string line = "%" + std::to_string(k) + " = " + opInfo(n.op).name;
    if (n.op == OpKind::Input) line += " " + std::to_string(inputIndex++);
    line += std::string(" ") + shortDTypeName(n.dtype) + " " + shapeClassName(n.shape);
    if (n.cols > 0) line += " cols=" + std::to_string(n.cols);
    for (int operand : n.operands) line += " %" + std::to_string(operand);
    switch (n.op) {
      case OpKind::Constant:
        line += " value=" + hexDouble(n.scalar);
        break;
      case OpKind::PowScalar:
        line += " exponent=" + hexDouble(n.scalar);
        break;
      case OpKind::LeakyRelu:
        line += " slope=" + hexDouble(n.scalar);
        break;
      case OpKind::Add:
      case OpKind::Sub:
        if (n.scalar != 1.0) line += " alpha=" + hexDouble(n.scalar);
        break;
      default:
        break;
    }
    if (opInfo(n.op).category == OpCategory::Reduction) line += n.keepdim ? " keepdim" : " flat";
    text += line + "\n";
  }
  for (int o : canonical.outputs()) text += "out %" + std::to_string(o) + "\n";
  return ChainKey{text, sha256Hex(text)};
}

}  // namespace hotkernel::chain
