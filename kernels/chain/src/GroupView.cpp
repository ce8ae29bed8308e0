// A group norm's group view of a chain (GroupView.h).

#include "GroupView.h"

#include <cmath>

#include "CallArgs.h"
#include "TensorIteratorLayout.h"
#include "hotkernel/runtime/Check.h"

namespace hotkernel::chain::detail {

GroupView groupViewOf(const RecordedCall& call, const TensorMetas& metas) {
  HOTKERNEL_REQUIRE(call.args.size() == 8, "native_group_norm takes 8 arguments, got ", call.args.size());
  HOTKERNEL_REQUIRE(call.args[0].kind == RecordedArg::Kind::Tensor, "native_group_norm's input is no tensor");
  const TensorMeta& x = metaOf(metas, call.args[0].value);
  GroupView g;
  g.x = x.sizes;
  HOTKERNEL_REQUIRE(g.x.size() >= 3, "a group norm of a ", g.x.size(), "-d input (HxW 1 is ATen's other expression)");
  HOTKERNEL_REQUIRE(x.strides == contiguousStrides(g.x), "a group norm input that is not contiguous (ATen copies it first)");
  auto intArg = [&](size_t i, const char* what) {
    const RecordedArg& a = call.args[i];
    HOTKERNEL_REQUIRE(a.kind == RecordedArg::Kind::Scalar && a.scalar == std::floor(a.scalar), what,
                      " must be an integer");
    return static_cast<int64_t>(a.scalar);
  };
  g.hw = numel(std::vector<int64_t>(g.x.begin() + 2, g.x.end()));
  g.groups = intArg(6, "group");
  HOTKERNEL_REQUIRE(intArg(3, "N") == g.x[0] && intArg(4, "C") == g.x[1] && intArg(5, "HxW") == g.hw, "N, C, HxW ",
                    intArg(3, "N"), ", ", intArg(4, "C"), ", ", intArg(5, "HxW"), " of an input of sizes ", join(g.x));
  HOTKERNEL_REQUIRE(g.hw >= 2, "a group norm over HxW ", g.hw, " (1 is ATen's other expression)");
  HOTKERNEL_REQUIRE(g.groups >= 1 && g.x[1] % g.groups == 0, g.x[1], " channels in ", g.groups, " groups");
  for (size_t i : {size_t{1}, size_t{2}}) {
    const RecordedArg& a = call.args[i];
    if (a.kind == RecordedArg::Kind::None) continue;
    const char* what = i == 1 ? "the weight" : "the bias";
    HOTKERNEL_REQUIRE(a.kind == RecordedArg::Kind::Tensor && metaOf(metas, a.value).sizes == std::vector<int64_t>{g.x[1]} &&
                          metaOf(metas, a.value).strides == std::vector<int64_t>{1},
                      what, " is not a contiguous [", g.x[1], "] tensor");
    HOTKERNEL_REQUIRE(metaOf(metas, a.value).scalarType == x.scalarType, what, " is ", metaOf(metas, a.value).scalarType,
                      " where x is ", x.scalarType);
  }
  const std::vector<int64_t> stats{g.x[0], g.groups};
  HOTKERNEL_REQUIRE(call.outputs.size() == 3, "native_group_norm returns 3 tensors, the call ", call.outputs.size());
  for (size_t k : {size_t{1}, size_t{2}}) {
    const TensorMeta& m = metaOf(metas, call.outputs[k]);
    HOTKERNEL_REQUIRE(m.sizes == stats && m.strides == contiguousStrides(stats), "the ", k == 1 ? "mean" : "rstd",
                      " has sizes ", join(m.sizes), " where ATen returns ", join(stats));
  }
  return g;
}

GroupView batchNormViewOf(const RecordedCall& call, const TensorMetas& metas) {
  HOTKERNEL_REQUIRE(call.args.size() == 8, call.op, " takes 8 arguments, got ", call.args.size());
  HOTKERNEL_REQUIRE(call.args[0].kind == RecordedArg::Kind::Tensor, "the batch norm's input is no tensor");
  const RecordedArg& training = call.args[5];
  HOTKERNEL_REQUIRE(training.kind == RecordedArg::Kind::Bool && !training.flag,
                    "a training batch norm reduces over the batch: not a chain step");
  const TensorMeta& x = metaOf(metas, call.args[0].value);
  GroupView g;
  g.x = x.sizes;
  HOTKERNEL_REQUIRE(g.x.size() >= 3, "a batch norm of a ", g.x.size(), "-d input: a chain takes [N, C, *spatial]");
  HOTKERNEL_REQUIRE(x.strides == contiguousStrides(g.x), "a batch norm input that is not contiguous");
  g.hw = numel(std::vector<int64_t>(g.x.begin() + 2, g.x.end()));
  g.groups = g.x[1];
  HOTKERNEL_REQUIRE(g.hw >= 1 && g.groups >= 1, "an empty batch norm input ", join(g.x));
  static const char* const kNames[] = {"", "the weight", "the bias", "the running mean", "the running variance"};
  for (size_t i = 1; i <= 4; ++i) {
    const RecordedArg& a = call.args[i];
    HOTKERNEL_REQUIRE(a.kind != RecordedArg::Kind::None || i <= 2, kNames[i],
                      " is absent: the norm uses the batch's statistics, not a chain step");
    if (a.kind == RecordedArg::Kind::None) continue;
    HOTKERNEL_REQUIRE(a.kind == RecordedArg::Kind::Tensor, kNames[i], " is no tensor");
    const TensorMeta& m = metaOf(metas, a.value);
    HOTKERNEL_REQUIRE(m.sizes == std::vector<int64_t>{g.groups} && m.strides == std::vector<int64_t>{1}, kNames[i],
                      " is not a contiguous [", g.groups, "] tensor");
    (void)dtypeOf(m, a.value);  // a float dtype
  }
  HOTKERNEL_REQUIRE(!call.outputs.empty(), "the batch norm returns nothing");
  return g;
}

std::optional<GroupView> sequenceGroupView(const std::vector<RecordedCall>& calls, const TensorMetas& metas) {
  std::optional<GroupView> view;
  for (const RecordedCall& call : calls) {
    const bool batchNorm = call.op == "aten::native_batch_norm" || call.op == "aten::cudnn_batch_norm";
    if (call.op != "aten::native_group_norm" && !batchNorm) continue;
    const GroupView g = batchNorm ? batchNormViewOf(call, metas) : groupViewOf(call, metas);
    HOTKERNEL_REQUIRE(!view || (view->x == g.x && view->groups == g.groups), "norms of x ", join(view ? view->x : g.x),
                      " in ", view ? view->groups : g.groups, " groups and of x ", join(g.x), " in ", g.groups,
                      ": a chain holds one group view");
    view = g;
  }
  return view;
}

Placement placeInGroupView(const GroupView& g, const TensorMeta& m, int64_t id, bool layouts) {
  const std::vector<int64_t>& x = g.x;
  const std::vector<int64_t>& s = m.sizes;
  HOTKERNEL_REQUIRE(s.size() == m.strides.size() && s.size() <= x.size(), "value %", id, " has sizes ", join(s),
                    " against the group norm's x ", join(x));
  const size_t offset = x.size() - s.size();
  // The stride over x's dim d: 0 where the value is constant along it (broadcast, or x's dim of 1).
  auto strideOver = [&](size_t d) -> int64_t {
    if (d < offset || x[d] == 1) return 0;
    const int64_t size = s[d - offset];
    HOTKERNEL_REQUIRE(size == x[d] || size == 1, "value %", id, " has sizes ", join(s),
                      " that do not broadcast to the group norm's x ", join(x));
    HOTKERNEL_REQUIRE(m.strides[d - offset] >= 0, "value %", id, " has a negative stride");
    return size == 1 ? 0 : m.strides[d - offset];
  };
  const int64_t sN = strideOver(0), sC = strideOver(1);
  bool dense = true, constant = true;
  int64_t next = 1;
  for (size_t d = x.size(); d-- > 2;) {
    const int64_t st = strideOver(d);
    constant = constant && st == 0;
    dense = dense && (x[d] == 1 || st == next);
    next *= x[d];
  }
  const int64_t perGroup = g.perGroup();
  if (dense && (sC == g.hw || perGroup == 1)) {  // x's own layout of a group: a Full value of the view
    const TensorMeta view{m.scalarType, {sN == 0 ? 1 : x[0], g.groups, perGroup * g.hw}, {sN, sC * perGroup, 1}};
    return placeTensor(view, id, g.view(), false, layouts);
  }
  HOTKERNEL_REQUIRE(constant, "value %", id, " (sizes ", join(s), ", strides ", join(m.strides),
                    ") varies over the spatial dims other than as the group norm's x does: no group view value");
  if (sC == 0) return {ShapeClass::Full, 0, {sN, 0}, 1, perGroup * g.hw};  // one value a row (or a sample)
  HOTKERNEL_REQUIRE(sC == 1, "value %", id, " holds its channels at stride ", sC, ": a per-channel value of a ",
                    "group view is contiguous over the channels");
  return {ShapeClass::Full, 0, {sN, perGroup}, 1, g.hw};
}

Placement channelPlacement(const GroupView& g) { return {ShapeClass::Full, 0, {0, g.perGroup()}, 1, g.hw}; }

}  // namespace hotkernel::chain::detail
