#pragma once
// The float32 arithmetic of each chain op on one element, as ATen's CUDA
// kernels compute it in opmath (Note [Chain dtypes]); the interpreter's
// arithmetic, and what ChainCodegen emits (internal).
//
// Note [Chain op arithmetic]
// Each op is the expression ATen's CUDA functor evaluates in float32:
//   sigmoid 1 / (1 + exp(-x)), silu x / (1 + exp(-x)),
//   gelu_erf x * 0.5 * (1 + erf(x * sqrt(1/2))),
//   gelu_tanh 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3))),
//   relu x < 0 ? 0 : x (NaN stays NaN), reciprocal 1 / x, rsqrt 1 / sqrt(x);
//   hardsigmoid min(max(x + 3, 0), 6) * (1/6) and hardswish
//   x * min(max(x + 3, 0), 6) * (1/6), left to right, max(a, b) as a < b ? b : a
//   and min(a, b) as b < a ? b : a (std::max / std::min: NaN stays NaN), 1/6
//   the float32 constant; maximum / minimum NaN if either operand is NaN,
//   else fmaxf / fminf on the GPU (ATen's CUDA functors; here a < b ? b : a
//   and b < a ? b : a, ATen's CPU ones: of -0 and +0 either may come back,
//   the same value); clamp is these with its bounds as constants, rounded to
//   the tensor's dtype as ATen's clamp rounds them;
//   sin, cos, erf, log1p, expm1 the float32 functions; leaky_relu
//   x > 0 ? x : x * slope (the slope as float32; NaN stays NaN);
//   pow by 2, 3, -2 as products in the tensor's own type (x * x, then for 3
//   that rounded to a 16-bit dtype times x, for -2 one over it rounded), by
//   0.5, -0.5, -1 as sqrt, rsqrt, reciprocal, otherwise powf: ATen's CUDA
//   pow_tensor_scalar multiplies c10::Half / c10::BFloat16 values, each
//   product rounded to the type;
//   add / sub with alpha != 1 as one fma (a + alpha * b), with alpha 1 as
//   one addition; a division by a Scalar operand as a multiplication by its
//   float32 reciprocal (ATen's div_true with a CPU scalar), by a tensor as a
//   division, except by a Row value in a fused kernel (Note [Division by a
//   row value]). A Scalar operand is its float32 value (ATen's opmath
//   scalar), never rounded to a 16-bit dtype first.
// On the GPU the transcendental functions are CUDA's (expf, logf, tanhf,
// erff, rsqrtf: the ones ATen's kernels call, without fast math); on the CPU
// the C library's, which may differ by an ulp or two: the interpreter is a
// reference within the harness's tolerance, not a bitwise oracle for them.
//
// Note [Division by a row value]
// A fused kernel (the interpreter's Fused mode) divides by a Row value, a
// keepdim reduction such as softmax's sum, as a multiplication by its
// float32 reciprocal, computed once a row: (a * (1 / (b * k))) * k with k
// 1, or 2^64 where b's own reciprocal overflows (a nonzero b below 2^-128,
// where the product would be infinite and the quotient is not). An IEEE
// division a value costs a reciprocal, a Newton step and a range check (ten
// instructions and a slow-path branch), and a softmax row kernel spends most
// of its issue slots there. The product rounds twice where the quotient
// rounds once (at most one more unit in the last place of the float32 value,
// which its rounding to a 16-bit output mostly absorbs). Eager rounding
// (ChainKernelParams::atenRounding, the AtenOrder mode) keeps ATen's
// division, the bits eager computes, so a process asking for it tunes such
// chains, float32 ones too, at atenRounding points (atenRoundingApplies).

#include <cmath>

#include "hotkernel/chain/ChainTypes.h"
#include "hotkernel/chain/Rounding.h"
#include "hotkernel/runtime/Check.h"

namespace hotkernel::chain::detail {

inline float powScalar(float x, double exponent, DType dtype) {
  if (exponent == 2.0) return x * x;
  if (exponent == 3.0) return roundTo(dtype, x * x) * x;
  if (exponent == -2.0) return 1.0f / roundTo(dtype, x * x);
  if (exponent == 0.5) return std::sqrt(x);
  if (exponent == -0.5) return 1.0f / std::sqrt(x);
  if (exponent == -1.0) return 1.0f / x;
  return std::pow(x, static_cast<float>(exponent));
}

// hardsigmoid's and hardswish's min(max(x + 3, 0), 6) as std::max / std::min compute it (NaN stays NaN).
inline float hardClip(float x) {
  const float s = x + 3.0f;
  const float lo = s < 0.0f ? 0.0f : s;
  return 6.0f < lo ? 6.0f : lo;
}

inline float unaryOp(OpKind op, float x, double param, DType dtype) {
  switch (op) {
    case OpKind::Neg:
      return -x;
    case OpKind::Exp:
      return std::exp(x);
    case OpKind::Log:
      return std::log(x);
    case OpKind::Rsqrt:
      return 1.0f / std::sqrt(x);
    case OpKind::Sqrt:
      return std::sqrt(x);
    case OpKind::Tanh:
      return std::tanh(x);
    case OpKind::Sigmoid:
      return 1.0f / (1.0f + std::exp(-x));
    case OpKind::Silu:
      return x / (1.0f + std::exp(-x));
    case OpKind::GeluErf:
      return x * 0.5f * (1.0f + std::erf(x * static_cast<float>(M_SQRT1_2)));
    case OpKind::GeluTanh: {
      const auto beta = static_cast<float>(M_SQRT2 * M_2_SQRTPI * 0.5);
      const float kappa = 0.044715f;
      const float cube = x * x * x;
      const float inner = beta * (x + kappa * cube);
      return 0.5f * x * (1.0f + std::tanh(inner));
    }
    case OpKind::Relu:
      return x < 0.0f ? 0.0f : x;
    case OpKind::Abs:
      return std::fabs(x);
    case OpKind::PowScalar:
      return powScalar(x, param, dtype);
    case OpKind::Reciprocal:
      return 1.0f / x;
    case OpKind::Sin:
      return std::sin(x);
    case OpKind::Cos:
      return std::cos(x);
    case OpKind::Erf:
      return std::erf(x);
    case OpKind::Log1p:
      return std::log1p(x);
    case OpKind::Expm1:
      return std::expm1(x);
    case OpKind::Hardsigmoid:
      return hardClip(x) * (1.0f / 6.0f);
    case OpKind::Hardswish:
      return x * hardClip(x) * (1.0f / 6.0f);
    case OpKind::LeakyRelu:
      return x > 0.0f ? x : x * static_cast<float>(param);
    case OpKind::Softplus:  // Note [Softplus and Mish in a chain]
      return x > 20.0f ? x : std::log1p(std::exp(x));
    case OpKind::Mish:
      return x * std::tanh(std::log1p(std::exp(x)));
    default:
      HOTKERNEL_INTERNAL_ASSERT(false, "not a unary op: ", opInfo(op).name);
  }
}

// How a Div divides (Note [Chain op arithmetic]): the quotient; a times b's reciprocal (a Scalar b, as ATen);
// a times the reciprocal of b scaled as Note [Division by a row value] says (a Row b in a fused kernel).
enum class Division { Quotient, Reciprocal, RowReciprocal };

inline float binaryOp(OpKind op, float a, float b, double alpha, Division division) {
  switch (op) {
    case OpKind::Add:
      return alpha == 1.0 ? a + b : std::fma(static_cast<float>(alpha), b, a);
    case OpKind::Sub:
      return alpha == 1.0 ? a - b : std::fma(-static_cast<float>(alpha), b, a);
    case OpKind::Mul:
      return a * b;
    case OpKind::Maximum:
      return std::isnan(a) ? a : std::isnan(b) ? b : (a < b ? b : a);
    case OpKind::Minimum:
      return std::isnan(a) ? a : std::isnan(b) ? b : (b < a ? b : a);
    case OpKind::Div:
      if (division == Division::Quotient) return a / b;
      if (division == Division::RowReciprocal) {
        // Note [Division by a row value]: hk_row_scale's k, 2^64 where b's own reciprocal overflows.
        const float k = b != 0.0f && std::isinf(1.0f / b) ? 0x1p64f : 1.0f;
        return (a * (1.0f / (b * k))) * k;
      }
      return a * (1.0f / b);
    default:
      HOTKERNEL_INTERNAL_ASSERT(false, "not a binary op: ", opInfo(op).name);
  }
}

}  // namespace hotkernel::chain::detail
