#include "hotkernel/chain/ChainLayerNorm.h"

#include <algorithm>

#include "SubgraphUses.h"

namespace hotkernel::chain {
namespace {

class Matcher {
 public:
  explicit Matcher(const ChainIR& ir) : uses_(ir) {}

  // A group whose result is node r (for a 16-bit x the cast back to x's dtype, for a float32 x the float32 norm),
  // or none.
  bool match(int r, LayerNormGroup& g) const {
    std::vector<int> internal;
    int y = uses_.beforeCastBack(r, internal);
    const bool castBack = y != r;
    if (node(y).dtype != DType::Float32) return false;
    g = LayerNormGroup{};
    // Unwind [add bias], then [mul weight], down to mul(d, rstd).
    if (const int bias = columnOperand(y, OpKind::Add); bias >= 0) {
      g.bias = uses_.asCalled(bias, internal);
      y = node(y).operands[0];
      internal.push_back(y);
    }
    if (const int weight = columnOperand(y, OpKind::Mul); weight >= 0) {
      g.weight = uses_.asCalled(weight, internal);
      y = node(y).operands[0];
      internal.push_back(y);
    }
    const Node& normed = node(y);
    if (normed.op != OpKind::Mul || normed.operands.size() != 2) return false;
    const int d = normed.operands[0], rstd = normed.operands[1];
    if (node(rstd).op != OpKind::Rsqrt) return false;
    const int shifted = node(rstd).operands.at(0);
    const Node& plusEps = node(shifted);
    if (plusEps.op != OpKind::Add || plusEps.operands.size() != 2 || plusEps.scalar != 1.0 ||
        node(plusEps.operands[1]).op != OpKind::Constant) {
      return false;
    }
    const int var = plusEps.operands[0], eps = plusEps.operands[1];
    if (!uses_.isRowMean(var) || node(node(var).operands[0]).op != OpKind::Mul) return false;
    const int square = node(var).operands[0];
    if (node(square).operands != std::vector<int>{d, d}) return false;
    const Node& diff = node(d);
    if (diff.op != OpKind::Sub || diff.operands.size() != 2 || diff.scalar != 1.0) return false;
    const int xf = diff.operands[0], mean = diff.operands[1];
    if (!uses_.isRowMean(mean) || node(mean).operands[0] != xf) return false;
    if (node(xf).shape != ShapeClass::Full || node(xf).dtype != DType::Float32) return false;
    for (int n : {d, rstd, shifted, eps, var, square, mean}) internal.push_back(n);
    g.eps = node(eps).scalar;
    g.input = xf;
    // A 16-bit x is widened for the group and its result cast back to x's dtype (the call read and wrote that
    // dtype); a float32 x is neither (a cast after its norm is the caller's own op).
    const Node& widened = node(xf);
    const bool wide = widened.op == OpKind::Cast && node(widened.operands.at(0)).dtype != DType::Float32;
    if (wide != castBack) return false;
    if (wide) {
      if (node(r).dtype != node(widened.operands[0]).dtype || !uses_.readOnlyBy(xf, {mean, d})) return false;
      g.input = widened.operands[0];
      internal.push_back(xf);
    }
    g.result = r;
    if (!uses_.closed(internal, g.result)) return false;
    std::sort(internal.begin(), internal.end());
    g.internal = std::move(internal);
    return true;
  }

 private:
  const Node& node(int i) const { return uses_.node(i); }

  // Node y's second operand when y is `op` of a value and a float32 Column (a weight or bias), else -1.
  int columnOperand(int y, OpKind op) const {
    const Node& n = node(y);
    if (n.op != op || n.operands.size() != 2 || (op == OpKind::Add && n.scalar != 1.0)) return -1;  // add's alpha
    const int c = n.operands[1];
    return node(c).shape == ShapeClass::Column && node(c).dtype == DType::Float32 ? c : -1;
  }

  detail::SubgraphUses uses_;
};

}  // namespace

std::vector<LayerNormGroup> findLayerNormGroups(const ChainIR& ir) {
  // A float32 norm without its weight or bias is a norm too: the largest group.
  return detail::outermostGroups(detail::groupsAtEachNode<LayerNormGroup>(ir, Matcher(ir)), ir.size());
}

}  // namespace hotkernel::chain
