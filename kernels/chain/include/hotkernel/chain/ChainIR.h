#pragma once
// A chain of pointwise ops, casts and row reductions as one small DAG.
//
// Note [Chain IR]
// A ChainIR is a list of nodes in SSA form: each node is one ATen op's
// result (or a leaf: a tensor input, a scalar argument, a constant), its
// operands are earlier nodes, so the list is a topological order and the
// graph has no cycles. Each node carries its result dtype and shape class
// (Note [Chain shape classes]); the adders infer both from the operands
// (Note [Chain dtypes]) and refuse what ATen would refuse or what a fused
// kernel cannot index. Marked outputs are the values written to memory; a
// node that reaches no output is refused (the builder prunes dead nodes),
// so every node of a valid chain is computed and every input is read.
// The inputs' order and the outputs' order are the fused kernel's argument
// order (ChainCodegen.h), so they are part of the chain's identity
// (ChainKey.h); intermediate nodes are identified by their dataflow only.
// A parsed chain (ChainJson.h) is checked by validate(), which re-infers
// every node.
//
// Note [Chain column extents]
// A Full or Column value has a column extent `cols`: 0 is the variant's
// cols (a width-free chain: every chain without a Cat, its kernel serves
// any cols), > 0 an extent of its own. A chain is width-free (every extent
// 0) or width-fixed (every Full and Column extent > 0; the builder makes a
// chain holding a cat width-fixed); a width-fixed chain's width is its
// widest extent, the variant's cols must equal it, and its outputs and the
// operands of its reductions have that width, so only the parts of a Cat
// (and what computes them) are narrower. Unary ops and casts keep their
// operand's extent; a binary op's Full and Column operands have equal
// extents (a Row or Scalar operand has none); Cat joins one or more Full
// parts of explicit extent along the last dim, its extent their sum, its
// dtype their promotion (ATen's cat; the conversion is exact within float
// dtypes), and its element c is part k's element c - offset_k, offset_k
// the extents of the parts before k. Row, RowFlat and Scalar values have
// extent 0.
//
// Note [Chain dtypes]
// The result dtype is ATen's for these ops on CUDA: a unary op keeps its
// input's dtype; a binary op promotes its tensor operands (equal dtypes stay,
// float16 with bfloat16 and anything with float32 give float32; Row and
// Column operands are dimensioned tensors and take part); a Scalar operand
// (a Python number ATen wraps, a constant, a by-value argument) never changes
// the dtype; a cast gives its target; sum, mean and amax keep their input's
// dtype (a reduction's dtype= argument is a widening cast before it). The
// arithmetic of every op is float32 (ATen's opmath for 16-bit inputs); a
// Scalar operand, pow's exponent and add's / sub's alpha are float32 values
// (ATen's CUDA kernels take a wrapped number as an opmath scalar; it is not
// rounded to a 16-bit dtype first); pow by 3 and -2 of a 16-bit tensor round
// x * x to its dtype before the last step (Note [Chain op arithmetic]). Where the result is
// rounded to its dtype is the evaluation mode's business (Note [Two
// evaluation modes] in ChainInterpreter.h).

#include <cstdint>
#include <string>
#include <vector>

#include "hotkernel/chain/ChainTypes.h"

namespace hotkernel::chain {

struct Node {
  OpKind op = OpKind::Input;
  std::vector<int> operands;  // indices of earlier nodes
  DType dtype = DType::Float32;
  ShapeClass shape = ShapeClass::Full;
  // Constant: the value (a double, as ATen's Scalar holds it); PowScalar: the
  // exponent; LeakyRelu: the negative slope; Add / Sub: alpha; otherwise 0.
  double scalar = 0.0;
  bool keepdim = false;  // reductions: Row with keepdim, RowFlat without
  int dim = -1;          // reductions: the reduced dim of the logical [rows, cols] view, -1 or 1
  int64_t cols = 0;      // Full and Column: the column extent, 0 the variant's (Note [Chain column extents])

  bool operator==(const Node& other) const;
  bool operator!=(const Node& other) const { return !(*this == other); }
};

class ChainIR {
 public:
  // Each adder checks its operands (HOTKERNEL_REQUIRE: an earlier node, the
  // op's category, a supported broadcast, a float dtype), infers the node's
  // dtype and shape class and returns the new node's index.
  // A tensor input (Full, Column, Row) or a by-value float argument (Scalar,
  // dtype float32).
  // `cols`: a Full or Column input's own column extent (Note [Chain column extents]).
  int addInput(DType dtype, ShapeClass shape, int64_t cols = 0);
  int addConstant(double value);
  // A unary op; `param` is PowScalar's exponent, LeakyRelu's slope (ignored otherwise).
  int addUnary(OpKind op, int x, double param = 0.0);
  // A binary op; `alpha` multiplies b in Add and Sub (ATen's alpha), must be 1 otherwise.
  int addBinary(OpKind op, int a, int b, double alpha = 1.0);
  int addCast(int x, DType to);
  // sum, mean or amax of a Full value over `dim` (the last: -1 or 1).
  int addReduce(OpKind op, int x, bool keepdim, int dim = -1);
  // The parts (Full values of explicit extent) joined along the last dim.
  int addCat(const std::vector<int>& parts);
  // Marks a node as an output, in order; a Scalar node or a node marked twice is refused.
  void markOutput(int node);

  // Appends `node` as given (dtype and shape too) without checks: for the
  // parser, which calls validate() once all nodes are in.
  void appendUnchecked(const Node& node) { nodes_.push_back(node); }
  void appendOutputUnchecked(int node) { outputs_.push_back(node); }

  // Re-checks every node (operands earlier, arity, category, dtype and shape
  // as inferred, reductions over the last dim), the outputs (present,
  // distinct, not Scalar), and that every node reaches an output. Error
  // (HOTKERNEL_REQUIRE) naming the node on the first failure.
  void validate() const;

  const std::vector<Node>& nodes() const { return nodes_; }
  const Node& node(int index) const;
  const std::vector<int>& outputs() const { return outputs_; }
  // The Input nodes, in order (the kernel's input arguments).
  std::vector<int> inputs() const;
  bool hasReductions() const;
  bool hasCat() const;
  // The widest column extent of a width-fixed chain; 0 for a width-free one.
  int64_t width() const;
  size_t size() const { return nodes_.size(); }

  bool operator==(const ChainIR& other) const { return nodes_ == other.nodes_ && outputs_ == other.outputs_; }
  bool operator!=(const ChainIR& other) const { return !(*this == other); }

 private:
  int append(Node node);

  // Invariant (after the adders, or validate()): operands index earlier
  // nodes; dtype and shape are the inferred ones.
  std::vector<Node> nodes_;
  std::vector<int> outputs_;
};

// ATen's promotion of two floating dtypes (Note [Chain dtypes]).
DType promoteTypes(DType a, DType b);

// The shape class of a binary op's result, or Error (HOTKERNEL_REQUIRE) for
// a broadcast that is not a chain value (Note [Chain shape classes]).
ShapeClass broadcastClasses(ShapeClass a, ShapeClass b);

// "node 3 (mul f32 full)": how messages name a node.
std::string describeNode(const ChainIR& ir, int index);

}  // namespace hotkernel::chain
