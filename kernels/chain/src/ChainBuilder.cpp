#include "hotkernel/chain/ChainBuilder.h"

#include <algorithm>
#include <array>
#include <map>
#include <set>
#include <sstream>

#include "hotkernel/runtime/Check.h"

namespace hotkernel::chain {
namespace {

enum class Form { Unary, Gelu, Pow, BinaryTensor, BinaryScalar, Rsub, Cast, Reduce };

struct OpRule {
  const char* schema;  // name with overload
  Form form;
  OpKind op;
};

constexpr std::array<OpRule, 27> kRules = {{
    {"aten::neg", Form::Unary, OpKind::Neg},
    {"aten::exp", Form::Unary, OpKind::Exp},
    {"aten::log", Form::Unary, OpKind::Log},
    {"aten::rsqrt", Form::Unary, OpKind::Rsqrt},
    {"aten::sqrt", Form::Unary, OpKind::Sqrt},
    {"aten::tanh", Form::Unary, OpKind::Tanh},
    {"aten::sigmoid", Form::Unary, OpKind::Sigmoid},
    {"aten::silu", Form::Unary, OpKind::Silu},
    {"aten::relu", Form::Unary, OpKind::Relu},
    {"aten::abs", Form::Unary, OpKind::Abs},
    {"aten::reciprocal", Form::Unary, OpKind::Reciprocal},
    {"aten::gelu", Form::Gelu, OpKind::GeluErf},
    {"aten::pow.Tensor_Scalar", Form::Pow, OpKind::PowScalar},
    {"aten::add.Tensor", Form::BinaryTensor, OpKind::Add},
    {"aten::sub.Tensor", Form::BinaryTensor, OpKind::Sub},
    {"aten::mul.Tensor", Form::BinaryTensor, OpKind::Mul},
    {"aten::div.Tensor", Form::BinaryTensor, OpKind::Div},
    {"aten::add.Scalar", Form::BinaryScalar, OpKind::Add},
    {"aten::sub.Scalar", Form::BinaryScalar, OpKind::Sub},
    {"aten::mul.Scalar", Form::BinaryScalar, OpKind::Mul},
    {"aten::div.Scalar", Form::BinaryScalar, OpKind::Div},
    {"aten::rsub.Scalar", Form::Rsub, OpKind::Sub},
    {"aten::rsub.Tensor", Form::Rsub, OpKind::Sub},
    {"aten::_to_copy", Form::Cast, OpKind::Cast},
    {"aten::sum.dim_IntList", Form::Reduce, OpKind::Sum},
    {"aten::mean.dim", Form::Reduce, OpKind::Mean},
    {"aten::amax", Form::Reduce, OpKind::Amax},
}};

// The ops that return a view of their argument: they end a chain.
constexpr std::array<const char*, 22> kViewOps = {
    "view",     "_reshape_alias", "reshape", "expand",  "slice",       "select",     "transpose", "t",
    "permute",  "unsqueeze",      "squeeze", "as_strided", "narrow",   "split",      "chunk",     "unflatten",
    "flatten",  "alias",          "detach",  "diagonal",   "unfold",   "view_as_real"};

std::string join(const std::vector<int64_t>& v) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < v.size(); ++i) os << (i ? ", " : "") << v[i];
  os << "]";
  return os.str();
}

int64_t numel(const std::vector<int64_t>& sizes) {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  return n;
}

class Builder {
 public:
  explicit Builder(const TensorMetas& metas) : metas_(metas) {}

  // The chain's [rows, cols] view from its widest tensor.
  void chooseView(const std::vector<RecordedCall>& calls) {
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
    cols_ = full_.back();
    rows_ = numel(full_) / std::max<int64_t>(cols_, 1);
    HOTKERNEL_REQUIRE(rows_ >= 1 && cols_ >= 1, "the chain's tensors are empty ", join(full_));
  }

  void add(const RecordedCall& call) {
    const std::string& op = call.op;
    const std::string base = op.rfind("aten::", 0) == 0 ? op.substr(6) : op;
    const std::string name = base.substr(0, base.find('.'));
    const std::string overload = base.find('.') == std::string::npos ? "" : base.substr(base.find('.') + 1);
    HOTKERNEL_REQUIRE(name.empty() || name.back() != '_', "in-place op: it writes its argument, which ends a chain");
    HOTKERNEL_REQUIRE(overload != "out" && (overload.size() < 4 || overload.substr(overload.size() - 4) != "_out"),
                      "out= op: it writes a caller's tensor, which ends a chain");
    for (const char* view : kViewOps) {
      HOTKERNEL_REQUIRE(name != view, "view op: its result aliases its argument, which ends a chain");
    }
    const OpRule* rule = nullptr;
    for (const OpRule& r : kRules) {
      if (op == r.schema) rule = &r;
    }
    HOTKERNEL_REQUIRE(rule != nullptr, "unsupported op: not a chain op (pointwise, cast or last-dim reduction)");
    HOTKERNEL_REQUIRE(call.outputs.size() == 1, "the call returns ", call.outputs.size(), " tensors, a chain op one");
    const int64_t out = call.outputs[0];
    for (const RecordedArg& a : call.args) {
      HOTKERNEL_REQUIRE(a.kind != RecordedArg::Kind::Tensor || a.value != out, "the result %", out,
                        " aliases an argument, which ends a chain");
    }
    HOTKERNEL_REQUIRE(nodeOf_.count(out) == 0 && read_.count(out) == 0, "value %", out,
                      " was already returned or read before this call returns it");
    const int node = apply(*rule, call);
    check(node, out);
    nodeOf_[out] = node;
    produced_.push_back(out);
  }

  ChainBuild finish(const std::vector<int64_t>& liveOutputs) {
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
    for (size_t i = 0; i < nodes.size(); ++i) {
      const bool isInput = nodes[i].op == OpKind::Input;
      if (live[i]) {
        Node n = nodes[i];
        for (int& operand : n.operands) operand = renumber[static_cast<size_t>(operand)];
        renumber[i] = static_cast<int>(result.chain.size());
        result.chain.appendUnchecked(n);
        if (isInput) result.inputValues.push_back(inputValues_[inputIndex]);
      }
      inputIndex += isInput;
    }
    for (int o : outNodes) result.chain.appendOutputUnchecked(renumber[static_cast<size_t>(o)]);
    result.chain.validate();
    result.outputValues = outs;
    result.rows = rows_;
    result.cols = cols_;
    return result;
  }

 private:
  const TensorMeta& meta(int64_t id) const {
    auto it = metas_.find(id);
    HOTKERNEL_REQUIRE(it != metas_.end(), "value %", id, " has no tensor metadata");
    return it->second;
  }

  static DType dtypeOf(const TensorMeta& m, int64_t id) {
    for (DType d : kernels::kAllDTypes) {
      if (m.scalarType == dtypeName(d)) return d;
    }
    HOTKERNEL_THROW("value %", id, " is ", m.scalarType, ": a chain holds float32, float16 and bfloat16 tensors");
  }

  ShapeClass classOf(int64_t id) const {
    const TensorMeta& m = meta(id);
    const std::vector<int64_t>& s = m.sizes;
    HOTKERNEL_REQUIRE(s.size() == m.strides.size(), "value %", id, " has ", s.size(), " sizes and ",
                      m.strides.size(), " strides");
    int64_t expected = 1;
    for (size_t d = s.size(); d-- > 0;) {
      HOTKERNEL_REQUIRE(s[d] == 1 || m.strides[d] == expected, "value %", id, " is not contiguous (sizes ", join(s),
                        ", strides ", join(m.strides), ")");
      expected *= s[d];
    }
    const size_t nd = full_.size();
    if (s == full_) return ShapeClass::Full;
    const std::vector<int64_t> leading(full_.begin(), full_.end() - 1);
    if (s.size() == nd && s.back() == 1 && std::vector<int64_t>(s.begin(), s.end() - 1) == leading) {
      return ShapeClass::Row;
    }
    if (s == leading) return ShapeClass::RowFlat;
    if (!s.empty() && s.size() <= nd && s.back() == cols_ && numel(s) == cols_) return ShapeClass::Column;
    HOTKERNEL_THROW("value %", id, " has sizes ", join(s), " against the chain's ", join(full_),
                    ": not full, a [cols] column, a keepdim row or a reduction's [rows]: not a chain broadcast");
  }

  // The node of a tensor argument: an earlier result, or a new input.
  int operand(const RecordedArg& a) {
    HOTKERNEL_REQUIRE(a.kind == RecordedArg::Kind::Tensor, "expected a tensor argument");
    read_.insert(a.value);
    auto it = nodeOf_.find(a.value);
    if (it != nodeOf_.end()) return it->second;
    const int node = ir_.addInput(dtypeOf(meta(a.value), a.value), classOf(a.value));
    inputValues_.push_back(a.value);
    nodeOf_[a.value] = node;
    return node;
  }

  static const RecordedArg* argAt(const RecordedCall& call, size_t i) {
    return i < call.args.size() ? &call.args[i] : nullptr;
  }

  static double scalarArg(const RecordedCall& call, size_t i, double fallback, const char* what) {
    const RecordedArg* a = argAt(call, i);
    if (a == nullptr || a->kind == RecordedArg::Kind::None) return fallback;
    HOTKERNEL_REQUIRE(a->kind == RecordedArg::Kind::Scalar, what, " must be a number");
    return a->scalar;
  }

  // A tensor or a wrapped number.
  int tensorOrScalar(const RecordedCall& call, size_t i) {
    const RecordedArg* a = argAt(call, i);
    HOTKERNEL_REQUIRE(a != nullptr, "argument ", i, " is missing");
    if (a->kind == RecordedArg::Kind::Scalar) return ir_.addConstant(a->scalar);
    return operand(*a);
  }

  static void argCount(const RecordedCall& call, size_t most) {
    HOTKERNEL_REQUIRE(call.args.size() >= 1 && call.args.size() <= most, "takes 1 to ", most,
                      " arguments, got ", call.args.size());
  }

  int apply(const OpRule& rule, const RecordedCall& call) {
    switch (rule.form) {
      case Form::Unary:
        argCount(call, 1);
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
        argCount(call, 4);
        const RecordedArg& self = call.args[0];
        const size_t nd = meta(self.value).sizes.size();
        const RecordedArg* dims = argAt(call, 1);
        HOTKERNEL_REQUIRE(dims != nullptr && dims->kind == RecordedArg::Kind::IntList && dims->ints.size() == 1,
                          "reduces ", dims != nullptr ? join(dims->ints) : "every dim",
                          ": a chain reduces the last dim alone");
        const int64_t d = dims->ints[0];
        HOTKERNEL_REQUIRE(d == -1 || d == static_cast<int64_t>(nd) - 1, "reduces dim ", d, " of a ", nd,
                          "-d tensor: a chain reduces the last dim alone");
        const RecordedArg* keep = argAt(call, 2);
        HOTKERNEL_REQUIRE(keep == nullptr || keep->kind == RecordedArg::Kind::Bool, "keepdim must be a bool");
        int x = operand(self);
        const DType in = ir_.node(x).dtype;
        const DType out = dtypeOf(meta(call.outputs[0]), call.outputs[0]);
        if (out != in) {
          HOTKERNEL_REQUIRE(out == DType::Float32, "dtype=", dtypeName(out), " narrows a ", dtypeName(in),
                            " reduction: a chain widens only");
          x = ir_.addCast(x, DType::Float32);  // the widening is exact: sum in float32
        }
        return ir_.addReduce(rule.op, x, keep != nullptr && keep->flag, -1);
      }
    }
    HOTKERNEL_INTERNAL_ASSERT(false, "unhandled form");
  }

  // The recorded result must be what the node says ATen returns.
  void check(int node, int64_t out) const {
    const Node& n = ir_.node(node);
    const DType recorded = dtypeOf(meta(out), out);
    HOTKERNEL_REQUIRE(recorded == n.dtype, "the result %", out, " is ", dtypeName(recorded), " where ATen's ",
                      "promotion gives ", dtypeName(n.dtype), " (Note [Chain dtypes])");
    const ShapeClass shape = classOf(out);
    HOTKERNEL_REQUIRE(shape == n.shape, "the result %", out, " is ", shapeClassName(shape), " where its operands give ",
                      shapeClassName(n.shape));
  }

  const TensorMetas& metas_;
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
                      const std::vector<int64_t>& liveOutputs) {
  ChainBuild result;
  if (calls.empty()) {
    result.reason = "no calls";
    return result;
  }
  Builder builder(tensors);
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
