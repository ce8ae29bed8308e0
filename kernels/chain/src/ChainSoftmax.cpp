#include "hotkernel/chain/ChainSoftmax.h"

#include <algorithm>

#include "SubgraphUses.h"

namespace hotkernel::chain {
namespace {

class Matcher {
 public:
  explicit Matcher(const ChainIR& ir) : uses_(ir) {}

  // A group whose (pre-cast) result is node r, or none.
  bool match(int r, SoftmaxGroup& g) const {
    const Node& result = node(r);
    int e = -1, s = -1, d = -1, logNode = -1;
    if (result.op == OpKind::Div && result.operands.size() == 2) {
      e = result.operands[0];
      s = result.operands[1];
      if (node(e).op != OpKind::Exp) return false;
      d = node(e).operands.at(0);
    } else if (result.op == OpKind::Sub && result.operands.size() == 2 && result.scalar == 1.0) {
      d = result.operands[0];
      logNode = result.operands[1];
      if (node(logNode).op != OpKind::Log) return false;
      s = node(logNode).operands.at(0);
      if (node(s).op != OpKind::Sum) return false;
      e = node(s).operands.at(0);
      if (node(e).op != OpKind::Exp || node(e).operands.at(0) != d) return false;
    } else {
      return false;
    }
    if (!isRowSum(s, e) || node(d).op != OpKind::Sub || node(d).scalar != 1.0 || node(d).operands.size() != 2) {
      return false;
    }
    const int xf = node(d).operands[0], m = node(d).operands[1];
    const Node& max = node(m);
    if (max.op != OpKind::Amax || !max.keepdim || max.operands.at(0) != xf) return false;
    if (node(xf).shape != ShapeClass::Full || node(xf).dtype != DType::Float32 || result.dtype != DType::Float32) {
      return false;
    }
    std::vector<int> internal = {m, d, e, s};
    if (logNode >= 0) internal.push_back(logNode);
    g = SoftmaxGroup{};
    g.log = logNode >= 0;
    g.input = xf;
    g.result = r;
    // A 16-bit x widened for the group: the call read x.
    const Node& widened = node(xf);
    if (widened.op == OpKind::Cast && node(widened.operands.at(0)).dtype != DType::Float32 &&
        uses_.readOnlyBy(xf, {m, d})) {
      g.input = widened.operands[0];
      internal.push_back(xf);
      // Its result cast back to x's dtype: the call wrote that dtype; else half_to_float.
      const std::vector<int>& users = uses_.users(r);
      if (!uses_.isOutput(r) && users.size() == 1 && node(users[0]).op == OpKind::Cast &&
          node(users[0]).dtype == node(g.input).dtype) {
        internal.push_back(r);
        g.result = users[0];
      } else {
        g.halfToFloat = true;
      }
    }
    if (!uses_.closed(internal, g.result)) return false;
    std::sort(internal.begin(), internal.end());
    g.internal = std::move(internal);
    return true;
  }

 private:
  const Node& node(int i) const { return uses_.node(i); }

  bool isRowSum(int s, int e) const {
    const Node& n = node(s);
    return n.op == OpKind::Sum && n.keepdim && n.operands.at(0) == e;
  }

  detail::SubgraphUses uses_;
};

}  // namespace

std::vector<SoftmaxGroup> findSoftmaxGroups(const ChainIR& ir) {
  std::vector<SoftmaxGroup> groups = detail::groupsAtEachNode<SoftmaxGroup>(ir, Matcher(ir));
  std::sort(groups.begin(), groups.end(), [](const SoftmaxGroup& a, const SoftmaxGroup& b) { return a.result < b.result; });
  return groups;
}

}  // namespace hotkernel::chain
