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
// A Full or Column value may also have its own column extent (Node::cols,
// Note [Chain column extents] in ChainIR.h): a slice of the last dim that a
// Cat joins. A Full value's memory may be strided over the leading dims, a
// broadcast over a middle dim included (Note [Chain layouts] in
// ChainLayout.h): the class says which logical elements a value has, the
// variant's layout where they are. Any other broadcast (a one-element device
// tensor, a broadcast of the last dim) is not a chain value.
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
  // the concatenation of its operands along the last dim (aten::cat)
  Cat,
  // pointwise unary (appended after Cat: the codes of the ops above stay)
  Sin,
  Cos,
  Erf,
  Log1p,
  Expm1,
  Hardsigmoid,
  Hardswish,
  // pointwise binary, NaN-propagating (aten::maximum / minimum; clamp's bounds)
  Maximum,
  Minimum,
  // pointwise unary: x > 0 ? x : x * slope (LeakyRelu carries its slope)
  LeakyRelu,
  // Note [Softplus and Mish in a chain]
  // Pointwise unary, as ATen's functors compute them in float32: softplus
  // with ATen's default beta 1 and threshold 20 (x > 20 ? x : log1p(exp(x));
  // a node carries one scalar, so the builder refuses other values: F.softplus
  // as Mamba's time step calls it), and mish (x * tanh(log1p(exp(x))): the
  // activation of YOLO-style backbones, nn.Mish).
  Softplus,
  Mish,
};

enum class OpCategory : uint8_t { Leaf, Unary, Binary, Cast, Reduction, Join };

struct OpInfo {
  OpKind op;
  const char* name;  // the IR's name: "input", "rsqrt", "pow", "gelu_tanh", "mean"
  OpCategory category;
  int arity;  // operands; -1: one or more (Cat)
};

const OpInfo& opInfo(OpKind op);
// The op named `name` (OpInfo::name); Error for an unknown name.
OpKind parseOpKind(const std::string& name);

const char* shapeClassName(ShapeClass shape);  // "full", "column", "row", "row_flat", "scalar"
ShapeClass parseShapeClass(const std::string& name);

// The short dtype names of the canonical text: "f32", "f16", "bf16".
const char* shortDTypeName(DType dtype);

}  // namespace hotkernel::chain
