#include "hotkernel/chain/NamedChains.h"

#include <cmath>

namespace hotkernel::chain {

ChainIR rmsNormChain(DType dtype, double eps, bool weight) {
  ChainIR ir;
  const int x = ir.addInput(dtype, ShapeClass::Full);
  const int w = weight ? ir.addInput(dtype, ShapeClass::Column) : -1;
  const int xf = ir.addCast(x, DType::Float32);
  const int sq = ir.addUnary(OpKind::PowScalar, xf, 2.0);
  const int var = ir.addReduce(OpKind::Mean, sq, /*keepdim=*/true);
  const int shifted = ir.addBinary(OpKind::Add, var, ir.addConstant(eps));
  const int rstd = ir.addUnary(OpKind::Rsqrt, shifted);
  const int normed = ir.addBinary(OpKind::Mul, xf, rstd);
  const int back = ir.addCast(normed, dtype);
  ir.markOutput(weight ? ir.addBinary(OpKind::Mul, w, back) : back);
  return ir;
}

ChainIR swigluChain(DType dtype) {
  ChainIR ir;
  const int gate = ir.addInput(dtype, ShapeClass::Full);
  const int up = ir.addInput(dtype, ShapeClass::Full);
  ir.markOutput(ir.addBinary(OpKind::Mul, ir.addUnary(OpKind::Silu, gate), up));
  return ir;
}

ChainIR newGeluChain(DType dtype) {
  ChainIR ir;
  const int x = ir.addInput(dtype, ShapeClass::Full);
  const int half = ir.addBinary(OpKind::Mul, x, ir.addConstant(0.5));
  const int cube = ir.addUnary(OpKind::PowScalar, x, 3.0);
  const int scaled = ir.addBinary(OpKind::Mul, cube, ir.addConstant(0.044715));
  const int inner = ir.addBinary(OpKind::Add, x, scaled);
  const int arg = ir.addBinary(OpKind::Mul, inner, ir.addConstant(std::sqrt(2.0 / M_PI)));
  const int t = ir.addUnary(OpKind::Tanh, arg);
  const int onePlus = ir.addBinary(OpKind::Add, t, ir.addConstant(1.0));
  ir.markOutput(ir.addBinary(OpKind::Mul, half, onePlus));
  return ir;
}

ChainIR residualAddCastChain(DType dtype, DType to) {
  ChainIR ir;
  const int residual = ir.addInput(dtype, ShapeClass::Full);
  const int h = ir.addInput(dtype, ShapeClass::Full);
  const int sum = ir.addBinary(OpKind::Add, residual, h);
  ir.markOutput(sum);
  ir.markOutput(ir.addCast(sum, to));
  return ir;
}

}  // namespace hotkernel::chain
