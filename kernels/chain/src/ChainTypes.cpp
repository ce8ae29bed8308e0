#include "hotkernel/chain/ChainTypes.h"

#include <array>

#include "hotkernel/runtime/Check.h"

namespace hotkernel::chain {
namespace {

constexpr std::array<OpInfo, 37> kOps = {{
    {OpKind::Input, "input", OpCategory::Leaf, 0},
    {OpKind::Constant, "constant", OpCategory::Leaf, 0},
    {OpKind::Neg, "neg", OpCategory::Unary, 1},
    {OpKind::Exp, "exp", OpCategory::Unary, 1},
    {OpKind::Log, "log", OpCategory::Unary, 1},
    {OpKind::Rsqrt, "rsqrt", OpCategory::Unary, 1},
    {OpKind::Sqrt, "sqrt", OpCategory::Unary, 1},
    {OpKind::Tanh, "tanh", OpCategory::Unary, 1},
    {OpKind::Sigmoid, "sigmoid", OpCategory::Unary, 1},
    {OpKind::Silu, "silu", OpCategory::Unary, 1},
    {OpKind::GeluErf, "gelu_erf", OpCategory::Unary, 1},
    {OpKind::GeluTanh, "gelu_tanh", OpCategory::Unary, 1},
    {OpKind::Relu, "relu", OpCategory::Unary, 1},
    {OpKind::Abs, "abs", OpCategory::Unary, 1},
    {OpKind::PowScalar, "pow", OpCategory::Unary, 1},
    {OpKind::Reciprocal, "reciprocal", OpCategory::Unary, 1},
    {OpKind::Add, "add", OpCategory::Binary, 2},
    {OpKind::Sub, "sub", OpCategory::Binary, 2},
    {OpKind::Mul, "mul", OpCategory::Binary, 2},
    {OpKind::Div, "div", OpCategory::Binary, 2},
    {OpKind::Cast, "cast", OpCategory::Cast, 1},
    {OpKind::Sum, "sum", OpCategory::Reduction, 1},
    {OpKind::Mean, "mean", OpCategory::Reduction, 1},
    {OpKind::Amax, "amax", OpCategory::Reduction, 1},
    {OpKind::Cat, "cat", OpCategory::Join, -1},
    {OpKind::Sin, "sin", OpCategory::Unary, 1},
    {OpKind::Cos, "cos", OpCategory::Unary, 1},
    {OpKind::Erf, "erf", OpCategory::Unary, 1},
    {OpKind::Log1p, "log1p", OpCategory::Unary, 1},
    {OpKind::Expm1, "expm1", OpCategory::Unary, 1},
    {OpKind::Hardsigmoid, "hardsigmoid", OpCategory::Unary, 1},
    {OpKind::Hardswish, "hardswish", OpCategory::Unary, 1},
    {OpKind::Maximum, "maximum", OpCategory::Binary, 2},
    {OpKind::Minimum, "minimum", OpCategory::Binary, 2},
    {OpKind::LeakyRelu, "leaky_relu", OpCategory::Unary, 1},
    {OpKind::Softplus, "softplus", OpCategory::Unary, 1},
    {OpKind::Mish, "mish", OpCategory::Unary, 1},
}};

constexpr std::array<const char*, 5> kShapeNames = {"full", "column", "row", "row_flat", "scalar"};

}  // namespace

const OpInfo& opInfo(OpKind op) {
  const auto index = static_cast<size_t>(op);
  HOTKERNEL_CHECK(index < kOps.size(), "unknown chain op code ", index);
  HOTKERNEL_INTERNAL_ASSERT(kOps[index].op == op, "the op table is out of order at ", index);
  return kOps[index];
}

OpKind parseOpKind(const std::string& name) {
  for (const OpInfo& info : kOps) {
    if (name == info.name) return info.op;
  }
  HOTKERNEL_THROW("unknown chain op '", name, "'");
}

const char* shapeClassName(ShapeClass shape) {
  const auto index = static_cast<size_t>(shape);
  HOTKERNEL_CHECK(index < kShapeNames.size(), "unknown shape class code ", index);
  return kShapeNames[index];
}

ShapeClass parseShapeClass(const std::string& name) {
  for (size_t i = 0; i < kShapeNames.size(); ++i) {
    if (name == kShapeNames[i]) return static_cast<ShapeClass>(i);
  }
  HOTKERNEL_THROW("unknown shape class '", name, "' (full, column, row, row_flat or scalar)");
}

const char* shortDTypeName(DType dtype) {
  switch (dtype) {
    case DType::Float32:
      return "f32";
    case DType::Float16:
      return "f16";
    case DType::BFloat16:
      return "bf16";
  }
  HOTKERNEL_THROW("unknown dtype code ", static_cast<int>(dtype));
}

}  // namespace hotkernel::chain
