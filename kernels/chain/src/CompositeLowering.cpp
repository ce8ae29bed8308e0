#include "CompositeLowering.h"

#include "hotkernel/chain/Rounding.h"
#include "hotkernel/runtime/Check.h"

namespace hotkernel::chain::detail {
namespace {

int asFloat32(ChainIR& ir, int x) { return ir.node(x).dtype == DType::Float32 ? x : ir.addCast(x, DType::Float32); }

}  // namespace

int addSoftmax(ChainIR& ir, int x, DType out, bool log) {
  const int xf = asFloat32(ir, x);
  const int m = ir.addReduce(OpKind::Amax, xf, /*keepdim=*/true);
  const int shifted = ir.addBinary(OpKind::Sub, xf, m);
  const int e = ir.addUnary(OpKind::Exp, shifted);
  const int sum = ir.addReduce(OpKind::Sum, e, /*keepdim=*/true);
  const int y = log ? ir.addBinary(OpKind::Sub, shifted, ir.addUnary(OpKind::Log, sum))
                    : ir.addBinary(OpKind::Div, e, sum);
  return out == DType::Float32 ? y : ir.addCast(y, out);
}

LayerNormNodes addLayerNorm(ChainIR& ir, int x, int weight, int bias, double eps, DType out) {
  LayerNormNodes n;
  const int xf = asFloat32(ir, x);
  n.mean = ir.addReduce(OpKind::Mean, xf, /*keepdim=*/true);
  const int d = ir.addBinary(OpKind::Sub, xf, n.mean);
  const int var = ir.addReduce(OpKind::Mean, ir.addBinary(OpKind::Mul, d, d), /*keepdim=*/true);
  n.rstd = ir.addUnary(OpKind::Rsqrt, ir.addBinary(OpKind::Add, var, ir.addConstant(eps)));
  int y = ir.addBinary(OpKind::Mul, d, n.rstd);
  if (weight >= 0) y = ir.addBinary(OpKind::Mul, y, asFloat32(ir, weight));
  if (bias >= 0) y = ir.addBinary(OpKind::Add, y, asFloat32(ir, bias));
  n.out = out == DType::Float32 ? y : ir.addCast(y, out);
  return n;
}

GroupNormNodes addGroupNorm(ChainIR& ir, int x, int weight, int bias, double eps) {
  const DType dtype = ir.node(x).dtype;
  auto rounded = [&](int v) { return dtype == DType::Float32 ? v : ir.addCast(v, dtype); };
  const int xf = asFloat32(ir, x);
  const int mean = ir.addReduce(OpKind::Mean, xf, /*keepdim=*/true);
  const int d = ir.addBinary(OpKind::Sub, xf, mean);
  const int var = ir.addReduce(OpKind::Mean, ir.addBinary(OpKind::Mul, d, d), /*keepdim=*/true);
  const double epsT = static_cast<double>(roundTo(dtype, static_cast<float>(eps)));
  const int rstd = ir.addUnary(OpKind::Rsqrt, ir.addBinary(OpKind::Add, var, ir.addConstant(epsT)));
  GroupNormNodes n;
  n.mean = rounded(mean);
  n.rstd = rounded(rstd);
  const int meanR = asFloat32(ir, n.mean), rstdR = asFloat32(ir, n.rstd);
  int y = -1;
  if (weight >= 0 || bias >= 0) {
    const int a = weight >= 0 ? ir.addBinary(OpKind::Mul, rstdR, asFloat32(ir, weight)) : rstdR;
    const int am = ir.addBinary(OpKind::Mul, a, meanR);
    const int b = bias >= 0 ? ir.addBinary(OpKind::Sub, asFloat32(ir, bias), am) : ir.addUnary(OpKind::Neg, am);
    y = ir.addBinary(OpKind::Add, ir.addBinary(OpKind::Mul, a, xf), b);
  } else {
    y = ir.addBinary(OpKind::Mul, ir.addBinary(OpKind::Sub, xf, meanR), rstdR);
  }
  n.out = rounded(y);
  return n;
}

int addBatchNormEval(ChainIR& ir, int x, int weight, int bias, int mean, int var, double eps) {
  const DType dtype = ir.node(x).dtype;
  const int invstd = ir.addUnary(OpKind::Rsqrt, ir.addBinary(OpKind::Add, asFloat32(ir, var), ir.addConstant(eps)));
  int y = ir.addBinary(OpKind::Mul, ir.addBinary(OpKind::Sub, asFloat32(ir, x), asFloat32(ir, mean)), invstd);
  if (weight >= 0) y = ir.addBinary(OpKind::Mul, y, asFloat32(ir, weight));
  if (bias >= 0) y = ir.addBinary(OpKind::Add, y, asFloat32(ir, bias));
  return dtype == DType::Float32 ? y : ir.addCast(y, dtype);
}

int addClamp(ChainIR& ir, int x, std::optional<double> lower, std::optional<double> upper) {
  HOTKERNEL_INTERNAL_ASSERT(lower || upper, "a clamp without a bound");
  const DType dtype = ir.node(x).dtype;
  // Note [Clamp in a chain]: each bound as ATen's kernel compares it, in x's dtype.
  auto bound = [&](double v) { return ir.addConstant(static_cast<double>(roundTo(dtype, static_cast<float>(v)))); };
  if (lower) x = ir.addBinary(OpKind::Maximum, x, bound(*lower));
  if (upper) x = ir.addBinary(OpKind::Minimum, x, bound(*upper));
  return x;
}

}  // namespace hotkernel::chain::detail
