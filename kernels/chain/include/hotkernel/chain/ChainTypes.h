#pragma once
// The vocabulary of a chain: the shape classes of its values and the ops of
// its nodes, with their names in the IR's text and JSON forms.

#include <cstdint>
#include <string>

#include "hotkernel/kernels/DType.h"

namespace hotkernel::chain {

using kernels::DType;

// Note [Chain shape classes]
// A chain runs over a logical [rows, cols] view: the leading dims of the
// chain's widest tensor folded into rows, its last dim is cols. Every value
// of the chain has one of these classes, TensorIterator's broadcasts that a
// fused kernel indexes without strides:
//   Full     [rows, cols]: one element per (row, col)
//   Column   [cols], broadcast over rows (a norm weight)
//   Row      [rows, 1] (a keepdim reduction, broadcast over cols)
//   RowFlat  [rows] (a reduction without keepdim; it broadcasts against no
//            other class: TensorIterator aligns it with cols, not rows)
//   Scalar   one number: a constant or a kernel argument passed by value
// Any other broadcast (a [cols / 2] tensor, a middle dim of size 1, a
// one-element device tensor) is not a chain value.
enum class ShapeClass : uint8_t { Full = 0, Column = 1, Row = 2, RowFlat = 3, Scalar = 4 };

enum class OpKind : uint8_t {
  // leaves
  Input,
  Constant,
  // pointwise unary (PowScalar carries its exponent)
  Neg,
  Exp,
  Log,
  Rsqrt,
  Sqrt,
  Tanh,
  Sigmoid,
  Silu,
  GeluErf,
  GeluTanh,
  Relu,
  Abs,
  PowScalar,
  Reciprocal,
  // pointwise binary (Add and Sub carry alpha)
  Add,
  Sub,
  Mul,
  Div,
  // a dtype conversion (aten::_to_copy)
  Cast,
  // row reductions over the last dim
  Sum,
  Mean,
  Amax,
};

enum class OpCategory : uint8_t { Leaf, Unary, Binary, Cast, Reduction };

struct OpInfo {
  OpKind op;
  const char* name;  // the IR's name: "input", "rsqrt", "pow", "gelu_tanh", "mean"
  OpCategory category;
  int arity;  // operands
};

const OpInfo& opInfo(OpKind op);
// The op named `name` (OpInfo::name); Error for an unknown name.
OpKind parseOpKind(const std::string& name);

const char* shapeClassName(ShapeClass shape);  // "full", "column", "row", "row_flat", "scalar"
ShapeClass parseShapeClass(const std::string& name);

// The short dtype names of the canonical text: "f32", "f16", "bf16".
const char* shortDTypeName(DType dtype);

}  // namespace hotkernel::chain
