// The group_norm subgraphs of a chain (ChainGroupNorm.h).

#include "hotkernel/chain/ChainGroupNorm.h"

#include <algorithm>

#include "SubgraphUses.h"

namespace hotkernel::chain {
namespace {

class Matcher {
 public:
  explicit Matcher(const ChainIR& ir) : uses_(ir) {}

  // A group whose result is node r (the cast back to x's dtype for a 16-bit x, the float32 value for a float32 x).
  bool match(int r, GroupNormGroup& g) const {
    g = GroupNormGroup{};
    std::vector<int> internal;
    const int y = uses_.beforeCastBack(r, internal);
    const bool castBack = y != r;
    if (node(y).dtype != DType::Float32) return false;
    int xf = -1, meanR = -1, rstdR = -1, centered = -1;
    std::vector<int> tail;  // the affine's or the plain form's nodes
    if (!affine(y, g, tail, xf, meanR, rstdR)) {
      g = GroupNormGroup{};
      tail.clear();
      if (!plain(y, tail, xf, meanR, rstdR, centered)) return false;
    }
    internal.insert(internal.end(), tail.begin(), tail.end());
    // The statistics: [a float32 value rounded to x's dtype and back].
    const int mean = unrounded(meanR, internal), rstd = unrounded(rstdR, internal);
    if (!uses_.isRowMean(mean) || node(mean).operands[0] != xf || node(rstd).op != OpKind::Rsqrt) return false;
    const int plusEps = node(rstd).operands.at(0);
    const Node& add = node(plusEps);
    if (add.op != OpKind::Add || add.scalar != 1.0 || node(add.operands.at(1)).op != OpKind::Constant) return false;
    const int var = add.operands[0], eps = add.operands[1];
    if (!uses_.isRowMean(var) || node(node(var).operands[0]).op != OpKind::Mul) return false;
    const int square = node(var).operands[0];
    const int d = node(square).operands.at(0);
    if (node(square).operands != std::vector<int>{d, d} || node(d).op != OpKind::Sub || node(d).scalar != 1.0 ||
        node(d).operands != std::vector<int>{xf, mean} || d == centered) {
      return false;  // (xf - mean) * rstd over the variance's own difference: a LayerNorm group
    }
    for (int n : {mean, d, square, var, eps, plusEps, rstd}) internal.push_back(n);
    g.eps = node(eps).scalar;
    if (node(xf).shape != ShapeClass::Full || node(xf).dtype != DType::Float32) return false;
    g.input = xf;
    const Node& widened = node(xf);
    const bool wide = widened.op == OpKind::Cast && node(widened.operands.at(0)).dtype != DType::Float32;
    if (wide != castBack) return false;
    if (wide) {
      g.input = widened.operands[0];
      if (node(r).dtype != node(g.input).dtype) return false;
      internal.push_back(xf);
    }
    g.result = r;
    std::sort(internal.begin(), internal.end());
    internal.erase(std::unique(internal.begin(), internal.end()), internal.end());
    if (!uses_.closed(internal, g.result)) return false;
    g.internal = std::move(internal);
    return true;
  }

 private:
  const Node& node(int i) const { return uses_.node(i); }

  // y = a * xf + b, a = rstd [* weight], b = [bias] - a * mean or -(a * mean).
  bool affine(int y, GroupNormGroup& g, std::vector<int>& internal, int& xf, int& meanR, int& rstdR) const {
    int ax = -1, b = -1, a = -1, am = -1;
    if (!uses_.binary(y, OpKind::Add, ax, b) || !uses_.binary(ax, OpKind::Mul, a, xf)) return false;
    int am2 = -1;
    if (uses_.binary(b, OpKind::Sub, g.bias, am2)) {
      g.bias = uses_.asCalled(g.bias, internal);
    } else if (node(b).op == OpKind::Neg) {
      am2 = node(b).operands.at(0);
    } else {
      return false;
    }
    int a2 = -1;
    if (!uses_.binary(am2, OpKind::Mul, a2, meanR) || a2 != a) return false;
    am = am2;
    if (node(a).shape == ShapeClass::Row) {
      rstdR = a;  // no weight: a is rstd itself
    } else {
      int w = -1;
      if (!uses_.binary(a, OpKind::Mul, rstdR, w)) return false;
      g.weight = uses_.asCalled(w, internal);
      internal.push_back(a);
    }
    for (int n : {ax, b, am}) internal.push_back(n);
    return true;
  }

  // y = (xf - mean) * rstd.
  bool plain(int y, std::vector<int>& internal, int& xf, int& meanR, int& rstdR, int& centered) const {
    if (!uses_.binary(y, OpKind::Mul, centered, rstdR) || !uses_.binary(centered, OpKind::Sub, xf, meanR)) return false;
    internal.push_back(centered);
    return true;
  }

  // A statistic's float32 value: through [cast to x's dtype, cast back] (both join the group).
  int unrounded(int v, std::vector<int>& internal) const {
    const Node& back = node(v);
    if (back.op != OpKind::Cast || back.dtype != DType::Float32) return v;
    const int rounded = back.operands.at(0);
    const Node& down = node(rounded);
    if (down.op != OpKind::Cast || down.dtype == DType::Float32) return v;
    internal.push_back(v);
    internal.push_back(rounded);
    return down.operands.at(0);
  }

  detail::SubgraphUses uses_;
};

}  // namespace

std::vector<GroupNormGroup> findGroupNormGroups(const ChainIR& ir) {
  return detail::groupsAtEachNode<GroupNormGroup>(ir, Matcher(ir));
}

}  // namespace hotkernel::chain
