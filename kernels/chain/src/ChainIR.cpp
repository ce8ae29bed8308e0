#include "hotkernel/chain/ChainIR.h"

#include <algorithm>
#include <cmath>

#include "hotkernel/runtime/Check.h"

namespace hotkernel::chain {
namespace {

bool isKnownDType(DType d) { return d == DType::Float32 || d == DType::Float16 || d == DType::BFloat16; }

// A Cat wider than this is no chain value (its offsets stay well inside int).
constexpr int64_t kMaxCatCols = int64_t{1} << 30;

std::string label(const std::vector<Node>& nodes, int index) {
  const Node& n = nodes[static_cast<size_t>(index)];
  return "node " + std::to_string(index) + " (" + opInfo(n.op).name + " " + shortDTypeName(n.dtype) + " " +
         shapeClassName(n.shape) + (n.cols > 0 ? " cols=" + std::to_string(n.cols) : std::string()) + ")";
}

struct Inferred {
  DType dtype;
  ShapeClass shape;
  int64_t cols = 0;
};

bool hasColumns(ShapeClass s) { return s == ShapeClass::Full || s == ShapeClass::Column; }

// The dtype and shape class of `n` as node `index` after `nodes[0, index)`,
// or Error naming what is wrong with it.
Inferred infer(const std::vector<Node>& nodes, const Node& n, int index) {
  const OpInfo& info = opInfo(n.op);
  const std::string where = "chain node " + std::to_string(index) + " (" + info.name + ")";
  if (info.arity >= 0) {
    HOTKERNEL_REQUIRE(static_cast<int>(n.operands.size()) == info.arity, where, " takes ", info.arity,
                      " operand(s), got ", n.operands.size());
  } else {
    HOTKERNEL_REQUIRE(!n.operands.empty(), where, " takes one or more operands");
  }
  for (int o : n.operands) {
    HOTKERNEL_REQUIRE(o >= 0 && o < index, where, " reads node ", o,
                      ", which is not an earlier node (a cycle, a forward reference or no such node)");
  }
  auto operand = [&](size_t k) -> const Node& { return nodes[static_cast<size_t>(n.operands[k])]; };
  switch (info.category) {
    case OpCategory::Leaf:
      if (n.op == OpKind::Constant) {
        HOTKERNEL_REQUIRE(n.shape == ShapeClass::Scalar && n.dtype == DType::Float32, where,
                          " must be a float32 scalar");
        HOTKERNEL_REQUIRE(std::isfinite(n.scalar), where, " is ", n.scalar, ": a chain's constants are finite");
        HOTKERNEL_REQUIRE(n.cols == 0, where, " has a column extent: a scalar has none");
        return {DType::Float32, ShapeClass::Scalar};
      }
      HOTKERNEL_REQUIRE(n.cols >= 0 && (n.cols == 0 || hasColumns(n.shape)), where, " has column extent ", n.cols,
                        ": only full and column inputs have one, >= 1");
      HOTKERNEL_REQUIRE(isKnownDType(n.dtype), where, " has an unknown dtype code ", static_cast<int>(n.dtype));
      HOTKERNEL_REQUIRE(n.shape != ShapeClass::RowFlat, where,
                        " is a [rows] tensor: an input is full, column, row (keepdim) or scalar");
      HOTKERNEL_REQUIRE(n.shape != ShapeClass::Scalar || n.dtype == DType::Float32, where,
                        " is a scalar argument: it is passed as float32");
      return {n.dtype, n.shape, n.cols};
    case OpCategory::Unary: {
      const Node& x = operand(0);
      HOTKERNEL_REQUIRE(x.shape != ShapeClass::Scalar, where, " applies to a scalar: fold it before the chain");
      if (n.op == OpKind::LeakyRelu) {
        HOTKERNEL_REQUIRE(std::isfinite(n.scalar), where, " has a non-finite slope");
      }
      if (n.op == OpKind::PowScalar) {
        HOTKERNEL_REQUIRE(std::isfinite(n.scalar), where, " has a non-finite exponent");
      }
      return {x.dtype, x.shape, x.cols};
    }
    case OpCategory::Binary: {
      const Node& a = operand(0);
      const Node& b = operand(1);
      HOTKERNEL_REQUIRE(a.shape != ShapeClass::Scalar || b.shape != ShapeClass::Scalar, where,
                        " combines two scalars: fold them before the chain");
      HOTKERNEL_REQUIRE(n.op == OpKind::Add || n.op == OpKind::Sub || n.scalar == 0.0 || n.scalar == 1.0, where,
                        " has alpha ", n.scalar, ": only add and sub take alpha");
      HOTKERNEL_REQUIRE(std::isfinite(n.scalar), where, " has a non-finite alpha");
      DType dtype;
      if (a.shape == ShapeClass::Scalar) {
        dtype = b.dtype;
      } else if (b.shape == ShapeClass::Scalar) {
        dtype = a.dtype;
      } else {
        dtype = promoteTypes(a.dtype, b.dtype);
      }
      HOTKERNEL_REQUIRE(!hasColumns(a.shape) || !hasColumns(b.shape) || a.cols == b.cols, where,
                        " combines column extents ", a.cols, " and ", b.cols, " (0: the variant's cols)",
                        ": a pointwise op's operands have equal extents");
      const int64_t cols = hasColumns(a.shape) ? a.cols : b.cols;
      try {
        return {dtype, broadcastClasses(a.shape, b.shape), cols};
      } catch (const Error& e) {
        HOTKERNEL_THROW(where, ": ", e.what());
      }
    }
    case OpCategory::Cast: {
      const Node& x = operand(0);
      HOTKERNEL_REQUIRE(x.shape != ShapeClass::Scalar, where, " casts a scalar: fold it before the chain");
      HOTKERNEL_REQUIRE(isKnownDType(n.dtype), where, " casts to an unknown dtype code ", static_cast<int>(n.dtype));
      return {n.dtype, x.shape, x.cols};
    }
    case OpCategory::Reduction: {
      const Node& x = operand(0);
      HOTKERNEL_REQUIRE(n.dim == -1 || n.dim == 1, where, " reduces dim ", n.dim,
                        ": a chain reduces the last dim only (-1 of the [rows, cols] view)");
      HOTKERNEL_REQUIRE(x.shape == ShapeClass::Full, where, " reduces a ", shapeClassName(x.shape),
                        " value: a chain reduces full [rows, cols] values over their last dim");
      return {x.dtype, n.keepdim ? ShapeClass::Row : ShapeClass::RowFlat};
    }
    case OpCategory::Join: {
      DType dtype = operand(0).dtype;
      int64_t cols = 0;
      for (size_t k = 0; k < n.operands.size(); ++k) {
        const Node& part = operand(k);
        HOTKERNEL_REQUIRE(part.shape == ShapeClass::Full && part.cols > 0, where, " joins a ",
                          shapeClassName(part.shape), " value of extent ", part.cols,
                          ": a cat joins full values of explicit extent");
        dtype = promoteTypes(dtype, part.dtype);
        HOTKERNEL_REQUIRE(cols <= kMaxCatCols - part.cols, where, " is wider than ", kMaxCatCols);
        cols += part.cols;
      }
      return {dtype, ShapeClass::Full, cols};
    }
  }
  HOTKERNEL_INTERNAL_ASSERT(false, "unhandled op category");
}

}  // namespace

bool Node::operator==(const Node& other) const {
  // Bitwise on the scalar, so that 0.0 and -0.0 (and NaN payloads) differ.
  return cols == other.cols && op == other.op && operands == other.operands && dtype == other.dtype && shape == other.shape &&
         std::signbit(scalar) == std::signbit(other.scalar) &&
         (scalar == other.scalar || (std::isnan(scalar) && std::isnan(other.scalar))) &&
         keepdim == other.keepdim && dim == other.dim;
}

DType promoteTypes(DType a, DType b) {
  if (a == b) return a;
  return DType::Float32;  // f16 with bf16, or anything with f32
}

ShapeClass broadcastClasses(ShapeClass a, ShapeClass b) {
  if (a == ShapeClass::Scalar) return b;
  if (b == ShapeClass::Scalar) return a;
  if (a == b) return a;
  HOTKERNEL_REQUIRE(a != ShapeClass::RowFlat && b != ShapeClass::RowFlat, "a [rows] value (a reduction without ",
                    "keepdim) broadcasts against ", shapeClassName(a == ShapeClass::RowFlat ? b : a),
                    " along cols, not rows: not a chain broadcast");
  return ShapeClass::Full;  // Full with anything, Row with Column (an outer broadcast)
}

int ChainIR::append(Node node) {
  const int index = static_cast<int>(nodes_.size());
  const Inferred inferred = infer(nodes_, node, index);
  node.dtype = inferred.dtype;
  node.shape = inferred.shape;
  node.cols = inferred.cols;
  nodes_.push_back(std::move(node));
  return index;
}

int ChainIR::addInput(DType dtype, ShapeClass shape, int64_t cols) {
  Node n;
  n.op = OpKind::Input;
  n.dtype = dtype;
  n.shape = shape;
  n.cols = cols;
  return append(n);
}

int ChainIR::addCat(const std::vector<int>& parts) {
  Node n;
  n.op = OpKind::Cat;
  n.operands = parts;
  return append(n);
}

int ChainIR::addConstant(double value) {
  Node n;
  n.op = OpKind::Constant;
  n.dtype = DType::Float32;
  n.shape = ShapeClass::Scalar;
  n.scalar = value;
  return append(n);
}

int ChainIR::addUnary(OpKind op, int x, double param) {
  HOTKERNEL_REQUIRE(opInfo(op).category == OpCategory::Unary, "addUnary: '", opInfo(op).name, "' is not a unary op");
  Node n;
  n.op = op;
  n.operands = {x};
  n.scalar = op == OpKind::PowScalar || op == OpKind::LeakyRelu ? param : 0.0;
  return append(n);
}

int ChainIR::addBinary(OpKind op, int a, int b, double alpha) {
  HOTKERNEL_REQUIRE(opInfo(op).category == OpCategory::Binary, "addBinary: '", opInfo(op).name,
                    "' is not a binary op");
  Node n;
  n.op = op;
  n.operands = {a, b};
  n.scalar = op == OpKind::Add || op == OpKind::Sub ? alpha : (alpha == 1.0 ? 0.0 : alpha);
  return append(n);
}

int ChainIR::addCast(int x, DType to) {
  Node n;
  n.op = OpKind::Cast;
  n.operands = {x};
  n.dtype = to;
  return append(n);
}

int ChainIR::addReduce(OpKind op, int x, bool keepdim, int dim) {
  HOTKERNEL_REQUIRE(opInfo(op).category == OpCategory::Reduction, "addReduce: '", opInfo(op).name,
                    "' is not a reduction");
  Node n;
  n.op = op;
  n.operands = {x};
  n.keepdim = keepdim;
  n.dim = dim;
  return append(n);
}

void ChainIR::markOutput(int index) {
  HOTKERNEL_REQUIRE(index >= 0 && index < static_cast<int>(nodes_.size()), "chain output ", index,
                    " is not a node (", nodes_.size(), " nodes)");
  HOTKERNEL_REQUIRE(nodes_[static_cast<size_t>(index)].shape != ShapeClass::Scalar, "chain output ",
                    label(nodes_, index), " is a scalar: outputs are tensors");
  for (int o : outputs_) {
    HOTKERNEL_REQUIRE(o != index, "chain output ", label(nodes_, index), " is marked twice");
  }
  outputs_.push_back(index);
}

void ChainIR::validate() const {
  HOTKERNEL_REQUIRE(!nodes_.empty(), "a chain has nodes");
  for (size_t i = 0; i < nodes_.size(); ++i) {
    const Node& n = nodes_[i];
    const Inferred inferred = infer(nodes_, n, static_cast<int>(i));
    HOTKERNEL_REQUIRE(inferred.dtype == n.dtype, "chain type error: ", label(nodes_, static_cast<int>(i)),
                      " has dtype ", dtypeName(n.dtype), " where its operands give ", dtypeName(inferred.dtype));
    HOTKERNEL_REQUIRE(inferred.shape == n.shape, "chain shape error: ", label(nodes_, static_cast<int>(i)),
                      " has class ", shapeClassName(n.shape), " where its operands give ",
                      shapeClassName(inferred.shape));
    HOTKERNEL_REQUIRE(inferred.cols == n.cols, "chain extent error: ", label(nodes_, static_cast<int>(i)),
                      " has column extent ", n.cols, " where its operands give ", inferred.cols);
  }
  // Width-free or width-fixed (Note [Chain column extents]).
  bool widthFree = false, widthFixed = false;
  int64_t widest = 0;
  for (const Node& n : nodes_) {
    if (!hasColumns(n.shape)) continue;
    (n.cols == 0 ? widthFree : widthFixed) = true;
    widest = std::max(widest, n.cols);
  }
  HOTKERNEL_REQUIRE(!(widthFree && widthFixed), "a chain mixes values of the variant's cols (extent 0) with values of ",
                    "explicit extents: every full and column value of a width-fixed chain has one");
  for (size_t i = 0; i < nodes_.size() && widthFixed; ++i) {
    const Node& n = nodes_[i];
    if (opInfo(n.op).category != OpCategory::Reduction) continue;
    const int64_t c = nodes_[static_cast<size_t>(n.operands[0])].cols;
    HOTKERNEL_REQUIRE(c == widest, "chain ", label(nodes_, static_cast<int>(i)), " reduces a value of extent ", c,
                      ": reductions are over the chain's width ", widest);
  }
  HOTKERNEL_REQUIRE(!outputs_.empty(), "a chain has at least one output");
  for (size_t k = 0; k < outputs_.size(); ++k) {
    const int o = outputs_[k];
    HOTKERNEL_REQUIRE(o >= 0 && o < static_cast<int>(nodes_.size()), "chain output ", k, " names node ", o,
                      ", which does not exist");
    HOTKERNEL_REQUIRE(nodes_[static_cast<size_t>(o)].shape != ShapeClass::Scalar, "chain output ",
                      label(nodes_, o), " is a scalar: outputs are tensors");
    HOTKERNEL_REQUIRE(!hasColumns(nodes_[static_cast<size_t>(o)].shape) || nodes_[static_cast<size_t>(o)].cols == widest,
                      "chain output ", label(nodes_, o), " has extent ", nodes_[static_cast<size_t>(o)].cols,
                      ": outputs have the chain's width ", widest);
    for (size_t m = 0; m < k; ++m) {
      HOTKERNEL_REQUIRE(outputs_[m] != o, "chain output ", label(nodes_, o), " is marked twice");
    }
  }
  // Every node reaches an output: walk back from the outputs.
  std::vector<bool> live(nodes_.size(), false);
  for (int o : outputs_) live[static_cast<size_t>(o)] = true;
  for (size_t i = nodes_.size(); i-- > 0;) {
    if (!live[i]) continue;
    for (int operand : nodes_[i].operands) live[static_cast<size_t>(operand)] = true;
  }
  for (size_t i = 0; i < nodes_.size(); ++i) {
    HOTKERNEL_REQUIRE(live[i], "chain ", label(nodes_, static_cast<int>(i)),
                      " reaches no output: a chain holds only nodes that are computed");
  }
}

const Node& ChainIR::node(int index) const {
  HOTKERNEL_CHECK(index >= 0 && index < static_cast<int>(nodes_.size()), "no chain node ", index);
  return nodes_[static_cast<size_t>(index)];
}

std::vector<int> ChainIR::inputs() const {
  std::vector<int> result;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    if (nodes_[i].op == OpKind::Input) result.push_back(static_cast<int>(i));
  }
  return result;
}

bool ChainIR::hasCat() const {
  for (const Node& n : nodes_) {
    if (n.op == OpKind::Cat) return true;
  }
  return false;
}

int64_t ChainIR::width() const {
  int64_t widest = 0;
  for (const Node& n : nodes_) widest = std::max(widest, n.cols);
  return widest;
}

bool ChainIR::hasReductions() const {
  for (const Node& n : nodes_) {
    if (opInfo(n.op).category == OpCategory::Reduction) return true;
  }
  return false;
}

std::string describeNode(const ChainIR& ir, int index) {
  HOTKERNEL_CHECK(index >= 0 && index < static_cast<int>(ir.size()), "no chain node ", index);
  return label(ir.nodes(), index);
}

}  // namespace hotkernel::chain
