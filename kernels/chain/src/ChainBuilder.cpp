#include "hotkernel/chain/ChainBuilder.h"

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <map>
#include <optional>
#include <set>
#include <utility>

#include "CallArgs.h"
#include "CallWrites.h"
#include "CompositeLowering.h"
#include "GroupView.h"
#include "OpRules.h"
#include "ResultLayout.h"
#include "TensorIteratorLayout.h"
#include "TensorPlacement.h"
#include "hotkernel/runtime/Check.h"

namespace hotkernel::chain {
namespace {

using rules::Form;
using rules::OpRule;
using detail::argAt;
using detail::argCount;
using detail::dtypeOf;
using detail::join;
using detail::numel;
using detail::GroupView;
using detail::Placement;
using detail::scalarArg;

bool hasColumns(ShapeClass s) { return s == ShapeClass::Full || s == ShapeClass::Column; }

class Builder {
 public:
  Builder(const TensorMetas& metas, const ChainBuildOptions& options) : metas_(metas), options_(options) {}

  // The chain's [rows, cols] view from its widest tensor, or a group norm's group view (Note [The group view]).
  void chooseView(const std::vector<RecordedCall>& calls) {
    group_ = detail::sequenceGroupView(calls, metas_);
    if (group_) {
      full_ = group_->view();
      cols_ = full_.back();
      rows_ = full_[0] * full_[1];
      return;
    }
    for (const RecordedCall& call : calls) {
      std::vector<int64_t> ids = call.outputs;
      for (const RecordedArg& a : call.args) {
        if (a.kind == RecordedArg::Kind::Tensor) ids.push_back(a.value);
      }
      for (int64_t id : ids) {
        const std::vector<int64_t>& s = meta(id).sizes;
        if (numel(s) > numel(full_) || (numel(s) == numel(full_) && s.size() > full_.size())) full_ = s;
      }
    }
    HOTKERNEL_REQUIRE(!full_.empty(), "the widest tensor has no dims: a chain runs over [rows, cols]");
    for (const RecordedCall& call : calls) widthFixed_ = widthFixed_ || call.op == "aten::cat";
    cols_ = full_.back();
    rows_ = numel(full_) / std::max<int64_t>(cols_, 1);
    HOTKERNEL_REQUIRE(rows_ >= 1 && cols_ >= 1, "the chain's tensors are empty ", join(full_));
  }

  void add(const RecordedCall& call) {
    detail::refuseOutAndViewOps(call.op);
    const std::string functional = detail::functionalOfInPlace(call.op);
    if (functional.empty()) return addCall(call, /*inPlace=*/false);
    detail::checkInPlaceStep(call, rules::ruleOf(functional), produced_, metas_);  // Note [In-place steps]
    RecordedCall f = call;
    f.op = functional;
    addCall(f, /*inPlace=*/true);
    overwritten_.insert(call.args[0].value);
  }

  // A functional op's call; `inPlace`: its result is written into its first argument (checked: checkInPlaceStep).
  void addCall(const RecordedCall& call, bool inPlace) {
    const std::string& op = call.op;
    const OpRule* rule = rules::ruleOf(op);
    HOTKERNEL_REQUIRE(rule != nullptr,
                      "unsupported op: not a chain op (pointwise, cast, last-dim reduction, softmax or layer_norm)");
    const bool norm = rule->form == Form::LayerNorm || rule->form == Form::GroupNorm;
    const bool batchNorm = rule->form == Form::BatchNorm;
    HOTKERNEL_REQUIRE(!group_ || !(rule->form == Form::Reduce || rule->form == Form::Softmax ||
                                   rule->form == Form::LayerNorm || rule->form == Form::Cat),
                      "reduces or joins over the last dim of a chain over a group norm's groups ",
                      "(Note [The group view])");
    const size_t results = norm ? 3 : batchNorm ? (op == "aten::cudnn_batch_norm" ? 4 : 3) : 1;
    HOTKERNEL_REQUIRE(call.outputs.size() == results, "the call returns ", call.outputs.size(), " tensors where ",
                      rule->schema, " returns ", results);
    for (int64_t out : call.outputs) {
      for (const RecordedArg& a : call.args) {
        for (int64_t id : a.tensorIds()) {
          HOTKERNEL_REQUIRE(id != out, "the result %", out, " aliases an argument, which ends a chain");
        }
      }
      HOTKERNEL_REQUIRE(nodeOf_.count(out) == 0 && read_.count(out) == 0, "value %", out,
                        " was already returned or read before this call returns it");
    }
    const std::vector<int> nodes = rule->form == Form::LayerNorm   ? layerNorm(call)
                                   : rule->form == Form::GroupNorm ? groupNorm(call)
                                   : batchNorm                     ? batchNormEval(call)
                                                                   : std::vector<int>{apply(*rule, call)};
    for (size_t k = 0; k < nodes.size(); ++k) {
      const int64_t out = call.outputs[k];
      if (nodes[k] < 0) {  // Note [Eval BatchNorm in a chain]: an unused result, no chain value
        emptyResults_.insert(out);
        continue;
      }
      check(nodes[k], out);
      if (!inPlace) detail::checkResultLayout(*rule, call, metas_, out, k);  // in place: the argument's, checked
      nodeOf_[out] = nodes[k];
      produced_.push_back(out);
    }
  }

  ChainBuild finish(const std::vector<int64_t>& liveOutputs) {
    for (int64_t v : liveOutputs) {
      HOTKERNEL_REQUIRE(overwritten_.count(v) == 0, "live output %", v,
                        " is a value an in-place call overwrote (Note [In-place steps])");
    }
    std::vector<int64_t> outs = liveOutputs;
    if (outs.empty()) {
      for (int64_t v : produced_) {
        if (read_.count(v) == 0) outs.push_back(v);
      }
    }
    HOTKERNEL_REQUIRE(!outs.empty(), "the chain has no output");
    std::vector<int> outNodes;
    for (int64_t v : outs) {
      HOTKERNEL_REQUIRE(std::find(produced_.begin(), produced_.end(), v) != produced_.end(), "live output %", v,
                        " is not a value the calls return");
      outNodes.push_back(nodeOf_.at(v));
    }
    // Keep what the outputs reach, renumbered in order.
    const std::vector<Node>& nodes = ir_.nodes();
    std::vector<bool> live(nodes.size(), false);
    for (int o : outNodes) live[static_cast<size_t>(o)] = true;
    for (size_t i = nodes.size(); i-- > 0;) {
      if (!live[i]) continue;
      for (int operand : nodes[i].operands) live[static_cast<size_t>(operand)] = true;
    }
    ChainBuild result;
    std::vector<int> renumber(nodes.size(), -1);
    size_t inputIndex = 0;
    ChainLayout layout;
    layout.rowDims.assign(full_.begin(), full_.end() - 1);
    if (layout.rowDims.empty()) layout.rowDims.push_back(1);
    for (size_t i = 0; i < nodes.size(); ++i) {
      const bool isInput = nodes[i].op == OpKind::Input;
      if (live[i]) {
        Node n = nodes[i];
        for (int& operand : n.operands) operand = renumber[static_cast<size_t>(operand)];
        renumber[i] = static_cast<int>(result.chain.size());
        result.chain.appendUnchecked(n);
        if (isInput) {
          result.inputValues.push_back(inputValues_[inputIndex]);
          if (n.shape != ShapeClass::Scalar) addArgument(layout, inputValues_[inputIndex], n);
        }
      }
      inputIndex += isInput;
    }
    for (size_t k = 0; k < outNodes.size(); ++k) {
      result.chain.appendOutputUnchecked(renumber[static_cast<size_t>(outNodes[k])]);
      addArgument(layout, outs[k], nodes[static_cast<size_t>(outNodes[k])]);
    }
    // Note [Transposed layouts]: column strides of 1 everywhere are no list at all.
    // Note [Repeated columns]: repeats of 1 everywhere are no list at all.
    if (std::all_of(layout.colRepeats.begin(), layout.colRepeats.end(), [](int64_t r) { return r == 1; })) {
      layout.colRepeats.clear();
    }
    if (std::all_of(layout.colStrides.begin(), layout.colStrides.end(), [](int64_t c) { return c == 1; })) {
      layout.colStrides.clear();
    } else if (isLoneCast(result.chain)) {
      detail::unitStrideDimLast(layout);
    }
    result.chain.validate();
    result.outputValues = outs;
    result.rows = rows_;
    result.cols = cols_;
    const std::string problem = chainLayoutProblem(result.chain, rows_, cols_, layout);
    HOTKERNEL_REQUIRE(problem.empty(), "the chain's layout: ", problem);
    result.layout = normalizeLayout(result.chain, rows_, cols_, layout);
    HOTKERNEL_REQUIRE(options_.layouts || result.layout.contiguous(), "the chain's layout is not contiguous (",
                      layoutText(result.layout), ")");
    return result;
  }

 private:
  const TensorMeta& meta(int64_t id) const { return detail::metaOf(metas_, id); }

  // Appends value `id`'s (node `n`'s) row strides over the view's leading dims (Note [Chain layouts]) and its
  // column stride: a Full value's last-dim stride (Note [Transposed layouts]), else 1.
  void addArgument(ChainLayout& layout, int64_t id, const Node& n) const {
    if (n.shape == ShapeClass::Full) {
      const Placement p = placement(id);
      layout.strides.push_back(p.strides.empty() ? std::vector<int64_t>{0} : p.strides);  // a 1-d view: one row
      layout.colStrides.push_back(p.colStride);
      layout.colRepeats.push_back(p.colRepeat);
      return;
    }
    std::vector<int64_t> dims(full_.begin(), full_.end() - 1);
    if (dims.empty()) dims.push_back(1);
    std::vector<int64_t> s(dims.size(), 0);
    if (n.shape != ShapeClass::Column) {
      int64_t next = 1;
      for (size_t d = dims.size(); d-- > 0;) {
        s[d] = next;
        next *= dims[d];
      }
    }
    layout.strides.push_back(std::move(s));
    layout.colStrides.push_back(1);
    layout.colRepeats.push_back(1);
  }


  Placement placement(int64_t id) const {
    if (!group_) return detail::placeTensor(meta(id), id, full_, widthFixed_, options_.layouts);
    if (groupStats_.count(id) != 0) return {ShapeClass::Row, 0, {}};
    if (channelValues_.count(id) != 0) return detail::channelPlacement(*group_);
    return detail::placeInGroupView(*group_, meta(id), id, options_.layouts);
  }

  // The node of a tensor argument: an earlier result, or a new input.
  int operand(int64_t id) { return operand(RecordedArg::tensor(id)); }

  int operand(const RecordedArg& a) {
    HOTKERNEL_REQUIRE(a.kind == RecordedArg::Kind::Tensor, "expected a tensor argument");
    HOTKERNEL_REQUIRE(groupStats_.count(a.value) == 0, "reads %", a.value,
                      ", a group norm's mean or rstd: a chain returns them only (Note [The group view])");
    HOTKERNEL_REQUIRE(emptyResults_.count(a.value) == 0, "reads %", a.value, ", an eval batch norm's unused result");
    HOTKERNEL_REQUIRE(overwritten_.count(a.value) == 0, "reads %", a.value,
                      ", a value an in-place call overwrote (Note [In-place steps])");
    read_.insert(a.value);
    auto it = nodeOf_.find(a.value);
    if (it != nodeOf_.end()) return it->second;
    const Placement p = placement(a.value);
    const int node = ir_.addInput(dtypeOf(meta(a.value), a.value), p.shape, p.cols);
    inputValues_.push_back(a.value);
    nodeOf_[a.value] = node;
    return node;
  }

  // A tensor or a wrapped number.
  int tensorOrScalar(const RecordedCall& call, size_t i) {
    const RecordedArg* a = argAt(call, i);
    HOTKERNEL_REQUIRE(a != nullptr, "argument ", i, " is missing");
    if (a->kind == RecordedArg::Kind::Scalar) return ir_.addConstant(a->scalar);
    return operand(*a);
  }

  int apply(const OpRule& rule, const RecordedCall& call) {
    switch (rule.form) {
      case Form::Unary:
        detail::unaryArgs(call);
        return ir_.addUnary(rule.op, operand(call.args[0]));
      case Form::Gelu: {
        argCount(call, 2);
        const RecordedArg* approx = argAt(call, 1);
        std::string mode = "none";
        if (approx != nullptr && approx->kind != RecordedArg::Kind::None) {
          HOTKERNEL_REQUIRE(approx->kind == RecordedArg::Kind::String, "approximate must be a string");
          mode = approx->text;
        }
        HOTKERNEL_REQUIRE(mode == "none" || mode == "tanh", "gelu approximate='", mode, "' is not 'none' or 'tanh'");
        return ir_.addUnary(mode == "tanh" ? OpKind::GeluTanh : OpKind::GeluErf, operand(call.args[0]));
      }
      case Form::LeakyRelu: {
        argCount(call, 2);
        const double slope = scalarArg(call, 1, 0.01, "negative_slope");
        HOTKERNEL_REQUIRE(std::isfinite(slope), "leaky_relu's slope ", slope, " is not finite");
        return ir_.addUnary(OpKind::LeakyRelu, operand(call.args[0]), slope);
      }
      case Form::Pow:
        argCount(call, 2);
        HOTKERNEL_REQUIRE(call.args.size() == 2, "pow.Tensor_Scalar takes an exponent");
        return ir_.addUnary(OpKind::PowScalar, operand(call.args[0]), scalarArg(call, 1, 0.0, "the exponent"));
      case Form::BinaryTensor:
      case Form::BinaryScalar: {
        const bool alpha = rule.op == OpKind::Add || rule.op == OpKind::Sub;
        argCount(call, alpha ? 3 : 2);
        const int a = operand(call.args[0]);
        HOTKERNEL_REQUIRE(call.args.size() >= 2, "the second operand is missing");
        HOTKERNEL_REQUIRE(rule.form == Form::BinaryTensor || call.args[1].kind == RecordedArg::Kind::Scalar,
                          "a .Scalar overload takes a number");
        const int b = tensorOrScalar(call, 1);
        return ir_.addBinary(rule.op, a, b, alpha ? scalarArg(call, 2, 1.0, "alpha") : 1.0);
      }
      case Form::Rsub: {
        argCount(call, 3);
        const int self = operand(call.args[0]);
        HOTKERNEL_REQUIRE(call.args.size() >= 2, "the second operand is missing");
        const int other = tensorOrScalar(call, 1);
        return ir_.addBinary(OpKind::Sub, other, self, scalarArg(call, 2, 1.0, "alpha"));  // other - alpha * self
      }
      case Form::Cast: {
        const int x = operand(call.args.at(0));
        return ir_.addCast(x, dtypeOf(meta(call.outputs[0]), call.outputs[0]));
      }
      case Form::Reduce: {
        const bool keepdim = detail::reduceKeepdim(call, metas_);
        const RecordedArg& self = call.args[0];
        int x = operand(self);
        const DType in = ir_.node(x).dtype;
        const DType out = dtypeOf(meta(call.outputs[0]), call.outputs[0]);
        if (out != in) {
          HOTKERNEL_REQUIRE(out == DType::Float32, "dtype=", dtypeName(out), " narrows a ", dtypeName(in),
                            " reduction: a chain widens only");
          x = ir_.addCast(x, DType::Float32);  // the widening is exact: sum in float32
        }
        return ir_.addReduce(rule.op, x, keepdim, -1);
      }
      case Form::Clone: {
        argCount(call, 2);
        (void)detail::cloneContiguous(call);  // refuses a memory format other than preserve and contiguous
        const int x = operand(call.args[0]);
        return ir_.addCast(x, ir_.node(x).dtype);
      }
      case Form::Clamp:
        return clamp(rule, call);
      case Form::Softmax:
        return softmax(rule, call);
      case Form::LayerNorm:
      case Form::GroupNorm:
      case Form::BatchNorm:
        break;  // three or four results: layerNorm(), groupNorm(), batchNormEval()
      case Form::Cat: {
        std::vector<int> parts;
        for (int64_t id : detail::catParts(call, metas_)) parts.push_back(operand(id));
        return ir_.addCat(parts);
      }
    }
    HOTKERNEL_INTERNAL_ASSERT(false, "unhandled form");
  }

  // Note [LayerNorm in a chain]: the checks, then the nodes (CompositeLowering.h).
  std::vector<int> layerNorm(const RecordedCall& call) {
    HOTKERNEL_REQUIRE(call.args.size() == 5, "native_layer_norm takes 5 arguments, got ", call.args.size());
    const RecordedArg& self = call.args[0];
    const std::vector<int64_t>& sizes = meta(self.value).sizes;
    const RecordedArg& shape = call.args[1];
    HOTKERNEL_REQUIRE(shape.kind == RecordedArg::Kind::IntList && shape.ints.size() == 1 && !sizes.empty() &&
                          shape.ints[0] == sizes.back(),
                      "normalized_shape ", join(shape.ints), " of a tensor of sizes ", join(sizes),
                      ": a chain normalizes the last dim alone");
    HOTKERNEL_REQUIRE(meta(self.value).strides == detail::contiguousStrides(sizes),
                      "a layer_norm input that is not contiguous (ATen copies it first)");
    const int x = operand(self);
    int columns[2] = {-1, -1};  // weight, bias
    for (size_t i : {size_t{2}, size_t{3}}) {
      const RecordedArg& a = call.args[i];
      if (a.kind == RecordedArg::Kind::None) continue;
      HOTKERNEL_REQUIRE(a.kind == RecordedArg::Kind::Tensor && meta(a.value).sizes == shape.ints,
                        i == 2 ? "the weight" : "the bias", " is not a ", join(shape.ints), " tensor");
      columns[i - 2] = operand(a);
    }
    const detail::LayerNormNodes n =
        detail::addLayerNorm(ir_, x, columns[0], columns[1], scalarArg(call, 4, 0.0, "eps"), ir_.node(x).dtype);
    std::vector<int> results{n.out};
    for (size_t k : {size_t{1}, size_t{2}}) {  // the mean and rstd in the dtypes the call returned them
      const int stat = k == 1 ? n.mean : n.rstd;
      const DType want = dtypeOf(meta(call.outputs[k]), call.outputs[k]);
      results.push_back(want == DType::Float32 ? stat : ir_.addCast(stat, want));
    }
    return results;
  }

  // Note [GroupNorm in a chain]: the checks (the geometry: groupGeometry), then the nodes (CompositeLowering.h).
  std::vector<int> groupNorm(const RecordedCall& call) {
    const int x = operand(call.args[0]);
    const std::vector<int> c = perChannel(call, {1, 2});  // weight, bias
    const detail::GroupNormNodes n = detail::addGroupNorm(ir_, x, c[0], c[1], scalarArg(call, 7, 0.0, "eps"));
    groupStats_.insert(call.outputs[1]);
    groupStats_.insert(call.outputs[2]);
    return {n.out, n.mean, n.rstd};
  }

  // A norm's per-channel values at argument `indices` (-1 for None), each first read here (Note [The group view]).
  std::vector<int> perChannel(const RecordedCall& call, std::initializer_list<size_t> indices) {
    std::vector<int> nodes;
    for (size_t i : indices) {
      const RecordedArg& a = call.args[i];
      if (a.kind == RecordedArg::Kind::None) {
        nodes.push_back(-1);
        continue;
      }
      HOTKERNEL_REQUIRE(nodeOf_.count(a.value) == 0, "the norm's per-channel %", a.value, " is read before it");
      channelValues_.insert(a.value);
      nodes.push_back(operand(a));
    }
    return nodes;
  }

  // Note [Eval BatchNorm in a chain]: the per-channel values (the checks: batchNormViewOf), then the node; the
  // unused results are -1.
  std::vector<int> batchNormEval(const RecordedCall& call) {
    const int x = operand(call.args[0]);
    const std::vector<int> c = perChannel(call, {1, 2, 3, 4});  // weight, bias, running mean, running variance
    std::vector<int> nodes(call.outputs.size(), -1);
    nodes[0] = detail::addBatchNormEval(ir_, x, c[0], c[1], c[2], c[3], scalarArg(call, 7, 0.0, "eps"));
    return nodes;
  }

  // Note [Clamp in a chain] (CompositeLowering.h): the bounds given, each a finite number.
  int clamp(const OpRule& rule, const RecordedCall& call) {
    const detail::ClampBounds b = detail::clampBounds(call, rule.op == OpKind::Maximum);
    return detail::addClamp(ir_, operand(call.args[0]), b.lower, b.upper);
  }

  // Note [Softmax in a chain]: the checks, then the nodes (CompositeLowering.h).
  int softmax(const OpRule& rule, const RecordedCall& call) {
    argCount(call, 3);
    const RecordedArg& self = call.args[0];
    const size_t nd = meta(self.value).sizes.size();
    const RecordedArg* dim = argAt(call, 1);
    HOTKERNEL_REQUIRE(dim != nullptr && dim->kind == RecordedArg::Kind::Scalar, "softmax's dim must be a number");
    const auto d = static_cast<int64_t>(dim->scalar);
    HOTKERNEL_REQUIRE(nd >= 1 && (d == -1 || d == static_cast<int64_t>(nd) - 1), "softmax over dim ", d, " of a ", nd,
                      "-d tensor: a chain reduces the last dim alone");
    const RecordedArg* halfToFloat = argAt(call, 2);
    HOTKERNEL_REQUIRE(halfToFloat != nullptr && halfToFloat->kind == RecordedArg::Kind::Bool,
                      "half_to_float must be a bool");
    const int x = operand(self);
    const DType in = ir_.node(x).dtype;
    const DType out = dtypeOf(meta(call.outputs[0]), call.outputs[0]);
    HOTKERNEL_REQUIRE(out == (halfToFloat->flag ? DType::Float32 : in), "the result is ", dtypeName(out), " from a ",
                      dtypeName(in), " input with half_to_float=", halfToFloat->flag ? "True" : "False");
    return detail::addSoftmax(ir_, x, out, rule.op == OpKind::Log);
  }

  // The recorded result must be what the node says ATen returns.
  void check(int node, int64_t out) const {
    const Node& n = ir_.node(node);
    const DType recorded = dtypeOf(meta(out), out);
    HOTKERNEL_REQUIRE(recorded == n.dtype, "the result %", out, " is ", dtypeName(recorded), " where ATen's ",
                      "promotion gives ", dtypeName(n.dtype), " (Note [Chain dtypes])");
    const Placement p = placement(out);
    HOTKERNEL_REQUIRE(p.shape == n.shape, "the result %", out, " is ", shapeClassName(p.shape),
                      " where its operands give ", shapeClassName(n.shape));
    HOTKERNEL_REQUIRE(p.cols == n.cols, "the result %", out, " has column extent ", p.cols, " where its operands give ",
                      n.cols);
  }

  const TensorMetas& metas_;
  ChainBuildOptions options_;
  std::optional<GroupView> group_;  // a chain over a group norm's groups
  std::set<int64_t> channelValues_;  // the group norms' weights and biases
  std::set<int64_t> groupStats_;     // the group norms' mean and rstd results
  std::set<int64_t> emptyResults_;   // an eval batch norm's unused results (save_mean, save_invstd, reserve)
  std::set<int64_t> overwritten_;    // values an in-place call overwrote (Note [In-place steps])
  bool widthFixed_ = false;  // the calls hold a cat (Note [Chain column extents])
  ChainIR ir_;
  std::vector<int64_t> full_;
  int64_t rows_ = 0;
  int64_t cols_ = 0;
  std::map<int64_t, int> nodeOf_;
  // Values read by a call so far; a returned value in it was read by a later
  // call (a value read before it is returned is refused).
  std::set<int64_t> read_;
  std::vector<int64_t> produced_;
  std::vector<int64_t> inputValues_;  // per chain input, in order
};

}  // namespace

ChainBuild buildChain(const std::vector<RecordedCall>& calls, const TensorMetas& tensors,
                      const std::vector<int64_t>& liveOutputs, const ChainBuildOptions& options) {
  ChainBuild result;
  if (calls.empty()) {
    result.reason = "no calls";
    return result;
  }
  Builder builder(tensors, options);
  try {
    builder.chooseView(calls);
  } catch (const std::exception& e) {
    result.reason = e.what();
    return result;
  }
  for (size_t k = 0; k < calls.size(); ++k) {
    try {
      builder.add(calls[k]);
    } catch (const std::exception& e) {
      result.reason = "call " + std::to_string(k) + " (" + describeCall(calls[k]) + "): " + e.what();
      return result;
    }
  }
  try {
    return builder.finish(liveOutputs);
  } catch (const std::exception& e) {
    result.reason = e.what();
    return result;
  }
}

}  // namespace hotkernel::chain
