// The CUDA expression of one chain node (CodegenDetail.h).

#include <string>

#include "CodegenDetail.h"
#include "hotkernel/runtime/Check.h"

namespace hotkernel::chain::detail {

std::string opExpression(const std::vector<Node>& nodes, int i, const std::function<std::string(int)>& ref,
                         bool atenRounding) {
  const Node& n = nodes[static_cast<size_t>(i)];
  const std::string a = n.operands.empty() ? "" : ref(n.operands[0]);
  switch (n.op) {
    case OpKind::Neg:
      return "(-" + a + ")";
    case OpKind::Exp:
      return "expf(" + a + ")";
    case OpKind::Log:
      return "logf(" + a + ")";
    case OpKind::Rsqrt:
      return "rsqrtf(" + a + ")";
    case OpKind::Sqrt:
      return "sqrtf(" + a + ")";
    case OpKind::Tanh:
      return "tanhf(" + a + ")";
    case OpKind::Sigmoid:
      return "hk_sigmoid(" + a + ")";
    case OpKind::Silu:
      return "hk_silu(" + a + ")";
    case OpKind::GeluErf:
      return "hk_gelu_erf(" + a + ")";
    case OpKind::GeluTanh:
      return "hk_gelu_tanh(" + a + ")";
    case OpKind::Relu:
      return "hk_relu(" + a + ")";
    case OpKind::Abs:
      return "fabsf(" + a + ")";
    case OpKind::Reciprocal:
      return "(1.0f / " + a + ")";
    case OpKind::Sin:
      return "sinf(" + a + ")";
    case OpKind::Cos:
      return "cosf(" + a + ")";
    case OpKind::Erf:
      return "erff(" + a + ")";
    case OpKind::Log1p:
      return "log1pf(" + a + ")";
    case OpKind::Expm1:
      return "expm1f(" + a + ")";
    case OpKind::Hardsigmoid:
      return "hk_hardsigmoid(" + a + ")";
    case OpKind::Hardswish:
      return "hk_hardswish(" + a + ")";
    case OpKind::LeakyRelu:
      return "hk_leaky_relu(" + a + ", " + floatLiteral(static_cast<float>(n.scalar)) + ")";
    case OpKind::Softplus:
      return "hk_softplus(" + a + ")";
    case OpKind::Mish:
      return "hk_mish(" + a + ")";
    case OpKind::PowScalar:
      if (n.scalar == 2.0) return "hk_sq(" + a + ")";
      // Note [Chain op arithmetic]: x * x rounded to a 16-bit dtype before the last step, as ATen does.
      if (n.scalar == 3.0) {
        return n.dtype == DType::Float32 ? "hk_cube(" + a + ")"
                                         : "__fmul_rn(hk_round_" + std::string(accessTag(n.dtype)) + "(hk_sq(" + a +
                                               ")), " + a + ")";
      }
      if (n.scalar == -2.0) {
        return n.dtype == DType::Float32 ? "(1.0f / hk_sq(" + a + "))"
                                         : "(1.0f / hk_round_" + std::string(accessTag(n.dtype)) + "(hk_sq(" + a +
                                               ")))";
      }
      if (n.scalar == 0.5) return "sqrtf(" + a + ")";
      if (n.scalar == -0.5) return "(1.0f / sqrtf(" + a + "))";
      if (n.scalar == -1.0) return "(1.0f / " + a + ")";
      return "powf(" + a + ", " + floatLiteral(static_cast<float>(n.scalar)) + ")";
    case OpKind::Cast:
      if (n.dtype == DType::Float32) return a;
      return std::string("hk_round_") + accessTag(n.dtype) + "(" + a + ")";
    default:
      break;
  }
  const Node& bn = nodes[static_cast<size_t>(n.operands[1])];
  const std::string b = ref(n.operands[1]);
  const auto alpha = static_cast<float>(n.scalar);
  switch (n.op) {
    case OpKind::Add:
      return n.scalar == 1.0 ? "__fadd_rn(" + a + ", " + b + ")" : "fmaf(" + floatLiteral(alpha) + ", " + b + ", " + a + ")";
    case OpKind::Sub:
      return n.scalar == 1.0 ? "__fsub_rn(" + a + ", " + b + ")" : "fmaf(" + floatLiteral(-alpha) + ", " + b + ", " + a + ")";
    case OpKind::Mul:
      return "__fmul_rn(" + a + ", " + b + ")";
    case OpKind::Maximum:
      return "hk_maximum(" + a + ", " + b + ")";
    case OpKind::Minimum:
      return "hk_minimum(" + a + ", " + b + ")";
    case OpKind::Div:
      if (bn.op == OpKind::Constant) {
        return "__fmul_rn(" + a + ", " + floatLiteral(1.0f / static_cast<float>(bn.scalar)) + ")";
      }
      if (bn.shape == ShapeClass::Scalar) return "__fmul_rn(" + a + ", __fdiv_rn(1.0f, " + b + "))";
      // Note [Division by a row value]: by a Row divisor's reciprocal, unless the kernel rounds as ATen.
      if (bn.shape == ShapeClass::Row && !atenRounding) return "hk_div_row(" + a + ", " + b + ")";
      return "__fdiv_rn(" + a + ", " + b + ")";
    default:
      HOTKERNEL_INTERNAL_ASSERT(false, "no expression for ", opInfo(n.op).name);
  }
}

bool roundsAsAten(const Node& n) {
  return n.dtype != DType::Float32 && n.op != OpKind::Cast && n.op != OpKind::Cat &&
         opInfo(n.op).category != OpCategory::Leaf;
}

std::string roundedAsAten(const Node& n, const std::string& value) {
  return roundsAsAten(n) ? std::string("hk_round_") + accessTag(n.dtype) + "(" + value + ")" : value;
}

std::string rowReduction(const Node& n, const std::string& partial, const std::string& buf,
                         const std::string& clusterPart) {
  const bool max = n.op == OpKind::Amax;
  HOTKERNEL_INTERNAL_ASSERT(max || n.op == OpKind::Sum || n.op == OpKind::Mean, "no row reduction ", opInfo(n.op).name);
  std::string total = std::string(max ? "hk_row_max(" : "hk_row_sum(") + partial + ", " + buf + ")";
  if (!clusterPart.empty()) total = std::string(max ? "hk_cluster_max(" : "hk_cluster_sum(") + total + ", " + clusterPart + ")";
  return n.op == OpKind::Mean ? "__fmul_rn(" + total + ", hk_mean_factor)" : total;
}

std::pair<int, int64_t> catPart(const std::vector<Node>& nodes, int o, int64_t c) {
  int64_t offset = 0;
  for (int part : nodes[static_cast<size_t>(o)].operands) {
    const int64_t e = nodes[static_cast<size_t>(part)].cols;
    if (c < offset + e) return {part, offset};
    offset += e;
  }
  HOTKERNEL_INTERNAL_ASSERT(false, "column ", c, " is outside cat node ", o);
}

}  // namespace hotkernel::chain::detail
