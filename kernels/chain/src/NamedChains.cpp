#include "hotkernel/chain/NamedChains.h"

#include <cmath>
#include <string>

#include "CompositeLowering.h"
#include "hotkernel/runtime/Check.h"

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

ChainIR rotaryChain(DType dtype, int64_t headDim) {
  ChainIR ir;
  const int64_t half = headDim / 2;
  const int x = ir.addInput(dtype, ShapeClass::Full, headDim);
  const int cos = ir.addInput(dtype, ShapeClass::Full, headDim);
  const int xCos = ir.addBinary(OpKind::Mul, x, cos);
  const int x2 = ir.addInput(dtype, ShapeClass::Full, headDim - half);
  const int negated = ir.addUnary(OpKind::Neg, x2);
  const int x1 = ir.addInput(dtype, ShapeClass::Full, half);
  const int rotated = ir.addCat({negated, x1});
  const int sin = ir.addInput(dtype, ShapeClass::Full, headDim);
  const int rotSin = ir.addBinary(OpKind::Mul, rotated, sin);
  ir.markOutput(ir.addBinary(OpKind::Add, xCos, rotSin));
  return ir;
}

RecordedChain rotaryRecording(DType dtype, const RotaryShape& shape) {
  const int64_t b = shape.batch, h = shape.heads, s = shape.seq, d = shape.headDim, half = d / 2;
  const std::string type = dtypeName(dtype);
  auto meta = [&](std::vector<int64_t> sizes, std::vector<int64_t> strides) {
    return TensorMeta{type, std::move(sizes), std::move(strides)};
  };
  using A = RecordedArg;
  RecordedChain r;
  r.calls = {
      {"aten::mul.Tensor", {A::tensor(1), A::tensor(2)}, {6}},
      {"aten::neg", {A::tensor(5)}, {7}},
      {"aten::cat", {A::tensorList({7, 4}), A::number(-1)}, {8}},
      {"aten::mul.Tensor", {A::tensor(8), A::tensor(3)}, {9}},
      {"aten::add.Tensor", {A::tensor(6), A::tensor(9), A::number(1)}, {10}},
  };
  // x: the projection [b, s, h * d] viewed as [b, s, h, d], transposed to [b, h, s, d].
  const std::vector<int64_t> xStrides = {s * h * d, d, h * d, 1};
  // cos and sin: contiguous [b, s, d], unsqueezed at dim 1.
  const std::vector<int64_t> tableStrides = {s * d, s * d, d, 1};
  r.metas = {
      {1, meta({b, h, s, d}, xStrides)},
      {2, meta({b, 1, s, d}, tableStrides)},
      {3, meta({b, 1, s, d}, tableStrides)},
      {4, meta({b, h, s, half}, xStrides)},      // x[..., :d/2]
      {5, meta({b, h, s, d - half}, xStrides)},  // x[..., d/2:]
      // TensorIterator orders the dims of neg(x2) by x2's strides: (d, h, s) fastest first, densely.
      {7, meta({b, h, s, d - half}, {s * h * (d - half), d - half, h * (d - half), 1})},
      {8, meta({b, h, s, d}, {h * s * d, s * d, d, 1})},  // cat: contiguous
      {6, meta({b, h, s, d}, xStrides)},                  // x * cos follows x
      {9, meta({b, h, s, d}, {h * s * d, s * d, d, 1})},  // cat * sin follows cat
      {10, meta({b, h, s, d}, xStrides)},                 // the sum follows x * cos, its first operand
  };
  return r;
}

int64_t rotaryRows(const RotaryShape& shape) { return shape.batch * shape.heads * shape.seq; }

ChainLayout rotaryLayout(const RotaryShape& shape) {
  const int64_t b = shape.batch, h = shape.heads, s = shape.seq, d = shape.headDim;
  ChainLayout layout;
  layout.rowDims = {b, h, s};
  const std::vector<int64_t> x = {s * h * d, d, h * d};
  const std::vector<int64_t> table = {s * d, 0, d};
  layout.strides = {x, table, x, x, table, x};  // x, cos, x2, x1, sin, the output
  return normalizeLayout(rotaryChain(DType::BFloat16, d), rotaryRows(shape), d, layout);
}

ChainIR softmaxChain(DType dtype, bool log) {
  ChainIR ir;
  const int x = ir.addInput(dtype, ShapeClass::Full);
  ir.markOutput(detail::addSoftmax(ir, x, dtype, log));
  return ir;
}

ChainIR residualLayerNormChain(DType dtype, double eps, bool weight, bool bias) {
  ChainIR ir;
  const int x = ir.addInput(dtype, ShapeClass::Full);
  const int residual = ir.addInput(dtype, ShapeClass::Full);
  const int sum = ir.addBinary(OpKind::Add, x, residual);
  const int w = weight ? ir.addInput(dtype, ShapeClass::Column) : -1;
  const int b = bias ? ir.addInput(dtype, ShapeClass::Column) : -1;
  ir.markOutput(sum);
  ir.markOutput(detail::addLayerNorm(ir, sum, w, b, eps, dtype).out);
  return ir;
}

ChainIR attentionSoftmaxChain(DType dtype, double scale) {
  ChainIR ir;
  const int scores = ir.addInput(dtype, ShapeClass::Full);
  const int scaled = ir.addBinary(OpKind::Mul, scores, ir.addConstant(scale));
  const int mask = ir.addInput(dtype, ShapeClass::Full);
  const int masked = ir.addBinary(OpKind::Add, scaled, mask);
  ir.markOutput(detail::addSoftmax(ir, masked, dtype, false));
  return ir;
}

RecordedChain attentionSoftmaxRecording(DType dtype, const AttentionShape& shape, double scale) {
  const int64_t b = shape.batch, h = shape.heads, q = shape.queries, k = shape.keys;
  const std::string type = dtypeName(dtype);
  const TensorMeta full{type, {b, h, q, k}, {h * q * k, q * k, k, 1}};
  using A = RecordedArg;
  RecordedChain r;
  r.calls = {
      {"aten::mul.Tensor", {A::tensor(1), A::number(scale)}, {3}},
      {"aten::add.Tensor", {A::tensor(3), A::tensor(2), A::number(1)}, {4}},
      {"aten::_softmax", {A::tensor(4), A::number(-1), A::boolean(false)}, {5}},
  };
  r.metas = {{1, full}, {2, TensorMeta{type, {b, 1, q, k}, {q * k, q * k, k, 1}}}, {3, full}, {4, full}, {5, full}};
  return r;
}

ChainIR relayoutCopyChain(DType dtype) {
  ChainIR ir;
  const int x = ir.addInput(dtype, ShapeClass::Full);
  ir.markOutput(ir.addCast(x, dtype));
  return ir;
}

ChainLayout headViewCopyLayout(const RotaryShape& shape, int64_t parts) {
  const int64_t b = shape.batch, h = shape.heads, s = shape.seq, d = shape.headDim;
  ChainLayout layout;
  layout.rowDims = {b, h, s};
  layout.strides = {{s * parts * h * d, d, parts * h * d}, {h * s * d, s * d, d}};  // the head view, the copy
  return normalizeLayout(relayoutCopyChain(DType::Float16), b * h * s, d, layout);
}

ChainLayout headTransposeCopyLayout(const RotaryShape& shape, int64_t parts) {
  const int64_t b = shape.batch, h = shape.heads, s = shape.seq, d = shape.headDim;
  ChainLayout layout;
  layout.rowDims = {b, h, d};
  layout.strides = {{s * parts * h * d, d, 1}, {h * d * s, d * s, s}};  // k^T, its copy
  layout.colStrides = {parts * h * d, 1};
  return normalizeLayout(relayoutCopyChain(DType::Float16), b * h * d, s, layout);
}

int64_t attentionRows(const AttentionShape& shape) { return shape.batch * shape.heads * shape.queries; }

ChainLayout attentionSoftmaxLayout(const AttentionShape& shape) {
  const int64_t b = shape.batch, h = shape.heads, q = shape.queries, k = shape.keys;
  ChainLayout layout;
  layout.rowDims = {b, h, q};
  const std::vector<int64_t> dense = {h * q * k, q * k, k};
  layout.strides = {dense, {q * k, 0, k}, dense};  // scores, mask, the output
  return normalizeLayout(attentionSoftmaxChain(DType::Float16, 1.0), attentionRows(shape), k, layout);
}

ChainIR groupNormActChain(DType dtype, double eps, OpKind act) {
  ChainIR ir;
  const int x = ir.addInput(dtype, ShapeClass::Full);
  const int w = ir.addInput(dtype, ShapeClass::Full);
  const int b = ir.addInput(dtype, ShapeClass::Full);
  ir.markOutput(ir.addUnary(act, detail::addGroupNorm(ir, x, w, b, eps).out));
  return ir;
}

RecordedChain groupNormActRecording(DType dtype, const GroupNormShape& shape, double eps, OpKind act) {
  const int64_t n = shape.batch, c = shape.channels, hw = shape.hw, g = shape.groups;
  const std::string type = dtypeName(dtype);
  const TensorMeta full{type, {n, c, hw}, {c * hw, hw, 1}};
  const TensorMeta stats{type, {n, g}, {g, 1}};
  HOTKERNEL_REQUIRE(opInfo(act).category == OpCategory::Unary, opInfo(act).name, " is no unary op");
  const std::string op = opInfo(act).name;  // silu, relu: the IR's name is ATen's
  using A = RecordedArg;
  RecordedChain r;
  r.calls = {
      {"aten::native_group_norm",
       {A::tensor(1), A::tensor(2), A::tensor(3), A::number(static_cast<double>(n)), A::number(static_cast<double>(c)),
        A::number(static_cast<double>(hw)), A::number(static_cast<double>(g)), A::number(eps)},
       {4, 5, 6}},
      {"aten::" + op, {A::tensor(4)}, {7}},
  };
  const TensorMeta channel{type, {c}, {1}};
  r.metas = {{1, full}, {2, channel}, {3, channel}, {4, full}, {5, stats}, {6, stats}, {7, full}};
  return r;
}

int64_t groupNormRows(const GroupNormShape& shape) { return shape.batch * shape.groups; }

int64_t groupNormCols(const GroupNormShape& shape) { return shape.channels / shape.groups * shape.hw; }

ChainLayout groupNormActLayout(const GroupNormShape& shape) {
  const int64_t n = shape.batch, g = shape.groups, cols = groupNormCols(shape);
  ChainLayout layout;
  layout.rowDims = {n, g};
  const std::vector<int64_t> dense = {g * cols, cols};
  const std::vector<int64_t> channel = {0, shape.channels / g};
  layout.strides = {dense, channel, channel, dense};  // x, weight, bias, the output
  layout.colStrides = {1, 1, 1, 1};
  layout.colRepeats = {1, shape.hw, shape.hw, 1};
  return normalizeLayout(groupNormActChain(DType::Float16, 1e-5, OpKind::Silu), groupNormRows(shape),
                         groupNormCols(shape), layout);
}

ChainIR batchNormActChain(DType dtype, double eps, OpKind act) {
  ChainIR ir;
  const int x = ir.addInput(dtype, ShapeClass::Full);
  int c[4];
  for (int& v : c) v = ir.addInput(dtype, ShapeClass::Full);  // weight, bias, running mean, running variance
  ir.markOutput(ir.addUnary(act, detail::addBatchNormEval(ir, x, c[0], c[1], c[2], c[3], eps)));
  return ir;
}

RecordedChain batchNormActRecording(DType dtype, const GroupNormShape& shape, double eps, OpKind act, bool cudnn) {
  const int64_t n = shape.batch, c = shape.channels, hw = shape.hw;
  const std::string type = dtypeName(dtype);
  HOTKERNEL_REQUIRE(opInfo(act).category == OpCategory::Unary, opInfo(act).name, " is no unary op");
  using A = RecordedArg;
  RecordedChain r;
  std::vector<int64_t> results = {6, 7, 8};
  if (cudnn) results.push_back(9);
  r.calls = {
      {cudnn ? "aten::cudnn_batch_norm" : "aten::native_batch_norm",
       {A::tensor(1), A::tensor(2), A::tensor(3), A::tensor(4), A::tensor(5), A::boolean(false), A::number(0.1),
        A::number(eps)},
       results},
      {"aten::" + std::string(opInfo(act).name), {A::tensor(6)}, {10}},
  };
  const TensorMeta full{type, {n, c, hw}, {c * hw, hw, 1}};
  const TensorMeta channel{type, {c}, {1}}, empty{type, {0}, {1}};
  r.metas = {{1, full}, {2, channel}, {3, channel}, {4, channel}, {5, channel}, {6, full}, {7, empty}, {8, empty},
             {10, full}};
  if (cudnn) r.metas[9] = TensorMeta{"uint8", {0}, {1}};
  return r;
}

ChainLayout batchNormActLayout(const GroupNormShape& shape) {
  const int64_t n = shape.batch, c = shape.channels, hw = shape.hw;
  ChainLayout layout;
  layout.rowDims = {n, c};
  const std::vector<int64_t> dense = {c * hw, hw};
  const std::vector<int64_t> channel = {0, 1};
  layout.strides = {dense, channel, channel, channel, channel, dense};  // x, weight, bias, mean, variance, the output
  layout.colRepeats = {1, hw, hw, hw, hw, 1};
  return normalizeLayout(batchNormActChain(DType::Float16, 1e-5, OpKind::Relu), n * c, hw, layout);
}

}  // namespace hotkernel::chain
