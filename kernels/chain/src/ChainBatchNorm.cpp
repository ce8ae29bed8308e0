// The eval batch_norm subgraphs of a chain (ChainBatchNorm.h).

#include "hotkernel/chain/ChainBatchNorm.h"

#include <algorithm>

#include "SubgraphUses.h"

namespace hotkernel::chain {
namespace {

class Matcher {
 public:
  explicit Matcher(const ChainIR& ir) : uses_(ir) {}

  bool match(int r, BatchNormGroup& g) const {
    g = BatchNormGroup{};
    std::vector<int> internal;
    int y = uses_.beforeCastBack(r, internal);
    const bool castBack = y != r;
    if (node(y).dtype != DType::Float32) return false;
    int a = -1, b = -1;
    if (uses_.binary(y, OpKind::Add, a, b) && isInput(b)) {  // + bias
      g.bias = uses_.asCalled(b, internal);
      y = a;
      internal.push_back(y);
    }
    if (uses_.binary(y, OpKind::Mul, a, b) && isInput(b) && node(a).op == OpKind::Mul) {  // * weight
      g.weight = uses_.asCalled(b, internal);
      y = a;
      internal.push_back(y);
    }
    int centered = -1, invstd = -1, xf = -1, meanf = -1;
    if (!uses_.binary(y, OpKind::Mul, centered, invstd) || !uses_.binary(centered, OpKind::Sub, xf, meanf)) return false;
    if (node(invstd).op != OpKind::Rsqrt || !isInput(meanf) || !isInput(xf)) return false;
    const int plusEps = node(invstd).operands.at(0);
    int varf = -1, eps = -1;
    if (!uses_.binary(plusEps, OpKind::Add, varf, eps) || node(eps).op != OpKind::Constant || !isInput(varf)) return false;
    for (int n : {centered, invstd, plusEps, eps}) internal.push_back(n);
    g.eps = node(eps).scalar;
    g.mean = uses_.asCalled(meanf, internal);
    g.var = uses_.asCalled(varf, internal);
    g.input = uses_.asCalled(xf, internal);
    if (castBack != (g.input != xf) || node(g.input).shape != ShapeClass::Full) return false;
    if (castBack && node(r).dtype != node(g.input).dtype) return false;
    g.result = r;
    std::sort(internal.begin(), internal.end());
    internal.erase(std::unique(internal.begin(), internal.end()), internal.end());
    if (!uses_.closed(internal, g.result)) return false;
    g.internal = std::move(internal);
    return true;
  }

 private:
  const Node& node(int i) const { return uses_.node(i); }

  // An input, or an input widened to float32.
  bool isInput(int n) const {
    const Node& v = node(n);
    if (v.op == OpKind::Input) return true;
    return v.op == OpKind::Cast && v.dtype == DType::Float32 && node(v.operands.at(0)).op == OpKind::Input;
  }

  detail::SubgraphUses uses_;
};

}  // namespace

std::vector<BatchNormGroup> findBatchNormGroups(const ChainIR& ir) {
  return detail::outermostGroups(detail::groupsAtEachNode<BatchNormGroup>(ir, Matcher(ir)), ir.size());
}

}  // namespace hotkernel::chain
