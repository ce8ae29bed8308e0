#pragma once
// The chain builder's vocabulary (internal to ChainBuilder.cpp): each ATen
// op a chain takes, the form its arguments have, the IR op it becomes, and
// the view ops that end a chain (Note [Building a chain from calls]).

#include <array>
#include <string>

#include "hotkernel/chain/ChainTypes.h"

namespace hotkernel::chain::rules {

enum class Form {
  Unary, Gelu, Pow, LeakyRelu, BinaryTensor, BinaryScalar, Rsub, Cast, Clone, Reduce, Cat, Softmax, LayerNorm, GroupNorm,
  BatchNorm, Clamp
};

struct OpRule {
  const char* schema;  // name with overload
  Form form;
  OpKind op;
};

inline constexpr std::array<OpRule, 51> kRules = {{
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
    {"aten::sin", Form::Unary, OpKind::Sin},
    {"aten::cos", Form::Unary, OpKind::Cos},
    {"aten::erf", Form::Unary, OpKind::Erf},
    {"aten::log1p", Form::Unary, OpKind::Log1p},
    {"aten::expm1", Form::Unary, OpKind::Expm1},
    {"aten::hardsigmoid", Form::Unary, OpKind::Hardsigmoid},
    {"aten::hardswish", Form::Unary, OpKind::Hardswish},
    {"aten::leaky_relu", Form::LeakyRelu, OpKind::LeakyRelu},
    // Note [Softplus and Mish in a chain]: softplus with ATen's default beta and threshold only.
    {"aten::softplus", Form::Unary, OpKind::Softplus},
    {"aten::mish", Form::Unary, OpKind::Mish},
    {"aten::maximum", Form::BinaryTensor, OpKind::Maximum},
    {"aten::minimum", Form::BinaryTensor, OpKind::Minimum},
    // Note [Clamp in a chain]: maximum with the lower bound, then minimum with the upper; op the first applied.
    {"aten::clamp", Form::Clamp, OpKind::Maximum},
    {"aten::clamp_min", Form::Clamp, OpKind::Maximum},
    {"aten::clamp_max", Form::Clamp, OpKind::Minimum},
    {"aten::hardtanh", Form::Clamp, OpKind::Maximum},  // F.hardtanh, F.relu6: clamp(x, min_val, max_val)
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
    {"aten::clone", Form::Clone, OpKind::Cast},  // a cast to its own dtype: Note [Relayout copies]
    {"aten::sum.dim_IntList", Form::Reduce, OpKind::Sum},
    {"aten::mean.dim", Form::Reduce, OpKind::Mean},
    {"aten::amax", Form::Reduce, OpKind::Amax},
    {"aten::cat", Form::Cat, OpKind::Cat},
    // Note [Softmax in a chain]: op Div for softmax, Log for log_softmax (its last step).
    {"aten::_softmax", Form::Softmax, OpKind::Div},
    {"aten::_log_softmax", Form::Softmax, OpKind::Log},
    // Note [LayerNorm in a chain]: three results (out, mean, rstd).
    {"aten::native_layer_norm", Form::LayerNorm, OpKind::Mean},
    // Note [GroupNorm in a chain]: three results (out, mean, rstd), over the group view.
    {"aten::native_group_norm", Form::GroupNorm, OpKind::Mean},
    // Note [Eval BatchNorm in a chain]: out and two (cuDNN's: three) empty results, over the view of one channel a row.
    {"aten::native_batch_norm", Form::BatchNorm, OpKind::Mul},
    {"aten::cudnn_batch_norm", Form::BatchNorm, OpKind::Mul},
}};

// The rule of `schema` (name with overload), or nullptr when no chain takes it.
inline const OpRule* ruleOf(const std::string& schema) {
  for (const OpRule& r : kRules) {
    if (schema == r.schema) return &r;
  }
  return nullptr;
}

// The ops that return a view of their argument: they end a chain.
inline constexpr std::array<const char*, 22> kViewOps = {
    "view",     "_reshape_alias", "reshape", "expand",  "slice",       "select",     "transpose", "t",
    "permute",  "unsqueeze",      "squeeze", "as_strided", "narrow",   "split",      "chunk",     "unflatten",
    "flatten",  "alias",          "detach",  "diagonal",   "unfold",   "view_as_real"};

}  // namespace hotkernel::chain::rules
