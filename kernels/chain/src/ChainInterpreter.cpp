#include "hotkernel/chain/ChainInterpreter.h"

#include <cmath>
#include <limits>

#include "OpMath.h"
#include "hotkernel/chain/Rounding.h"
#include "hotkernel/runtime/Check.h"

namespace hotkernel::chain {
namespace {

bool hasRows(ShapeClass s) { return s == ShapeClass::Full || s == ShapeClass::Row || s == ShapeClass::RowFlat; }
bool hasCols(ShapeClass s) { return s == ShapeClass::Full || s == ShapeClass::Column; }

// The element of a value of class `s` and extent `cols` at (r, c).
float at(const std::vector<float>& v, ShapeClass s, int64_t r, int64_t c, int64_t cols) {
  switch (s) {
    case ShapeClass::Full:
      return v[static_cast<size_t>(r * cols + c)];
    case ShapeClass::Column:
      return v[static_cast<size_t>(c)];
    case ShapeClass::Row:
    case ShapeClass::RowFlat:
      return v[static_cast<size_t>(r)];
    case ShapeClass::Scalar:
      return v[0];
  }
  return 0.0f;
}

// Where the mode rounds node n's result to its dtype (Note [Two evaluation modes]).
bool roundsResult(const Node& n, EvalMode mode) {
  if (mode == EvalMode::AtenOrder) return true;
  return n.op == OpKind::Cast;
}

std::vector<float> reduceRows(const Node& n, const std::vector<float>& x, int64_t rows, int64_t cols) {
  std::vector<float> out(static_cast<size_t>(rows));
  const float factor = static_cast<float>(rows) / static_cast<float>(rows * cols);
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = x.data() + r * cols;
    if (n.op == OpKind::Amax) {
      float m = -std::numeric_limits<float>::infinity();
      for (int64_t c = 0; c < cols; ++c) {
        if (std::isnan(row[c]) || row[c] > m) m = row[c];
        if (std::isnan(m)) break;
      }
      out[static_cast<size_t>(r)] = m;
      continue;
    }
    double acc = 0.0;
    for (int64_t c = 0; c < cols; ++c) acc += row[c];
    const auto sum = static_cast<float>(acc);
    out[static_cast<size_t>(r)] = n.op == OpKind::Mean ? sum * factor : sum;
  }
  return out;
}

}  // namespace

const char* evalModeName(EvalMode mode) { return mode == EvalMode::AtenOrder ? "aten_order" : "fused"; }

int64_t elementCount(ShapeClass shape, int64_t rows, int64_t cols) {
  return (hasRows(shape) ? rows : 1) * (hasCols(shape) ? cols : 1);
}

int64_t elementCount(const Node& n, int64_t rows, int64_t cols) {
  return elementCount(n.shape, rows, extentOf(n, cols));
}

std::vector<std::vector<float>> interpretChain(const ChainIR& ir, int64_t rows, int64_t cols,
                                               const std::vector<std::vector<float>>& inputs, EvalMode mode) {
  return interpretChain(ir, rows, cols, ChainLayout{}, inputs, mode);
}

std::vector<std::vector<float>> interpretChain(const ChainIR& ir, int64_t rows, int64_t cols, const ChainLayout& layout,
                                               const std::vector<std::vector<float>>& inputs, EvalMode mode) {
  ir.validate();
  HOTKERNEL_CHECK(rows >= 1 && cols >= 1, "a chain runs over at least one element, got [", rows, ", ", cols, "]");
  HOTKERNEL_CHECK(ir.width() == 0 || ir.width() == cols, "a width-fixed chain of width ", ir.width(),
                  " runs over its width, got cols ", cols);
  const std::string layoutProblem = chainLayoutProblem(ir, rows, cols, layout);
  HOTKERNEL_CHECK(layoutProblem.empty(), "chain layout: ", layoutProblem);
  const std::vector<int64_t> rowDims = layoutRowDims(layout, rows);
  size_t nextTensorArg = 0;
  const std::vector<int> inputNodes = ir.inputs();
  HOTKERNEL_CHECK(inputs.size() == inputNodes.size(), "the chain has ", inputNodes.size(), " inputs, got ",
                  inputs.size(), " buffers");
  const std::vector<Node>& nodes = ir.nodes();
  std::vector<std::vector<float>> values(nodes.size());
  size_t nextInput = 0;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Node& n = nodes[i];
    const int64_t count = elementCount(n, rows, cols);
    const int64_t extent = extentOf(n, cols);
    std::vector<float>& out = values[i];
    switch (opInfo(n.op).category) {
      case OpCategory::Leaf:
        if (n.op == OpKind::Constant) {
          out = {static_cast<float>(n.scalar)};  // float32, as ATen's opmath scalar
          break;
        }
      {
        const std::vector<float>& buffer = inputs[nextInput];
        const bool memory = n.shape == ShapeClass::Full && !layout.contiguous();
        const int64_t expected = memory ? layoutSpan(ir, layout, nextTensorArg, rows, cols) : count;
        HOTKERNEL_CHECK(static_cast<int64_t>(buffer.size()) == expected, "chain input ", nextInput, " (",
                        describeNode(ir, static_cast<int>(i)), ") has ", buffer.size(), " values, its ",
                        memory ? "layout spans " : "class holds ", expected);
        for (float v : buffer) {
          HOTKERNEL_CHECK(representable(n.dtype, v), "chain input ", nextInput, " holds ", v,
                          ", which is not a ", dtypeName(n.dtype), " value");
        }
        if (memory) {
          const std::vector<int64_t> strides = layoutStrides(ir, layout, nextTensorArg, rows, cols);
          const int64_t colStride = layoutColStride(layout, nextTensorArg);
          const int64_t repeat = layoutColRepeat(layout, nextTensorArg);  // Note [Repeated columns]
          out.resize(static_cast<size_t>(count));
          for (int64_t r = 0; r < rows; ++r) {
            const int64_t base = layoutRowOffset(rowDims, strides, r);
            for (int64_t c = 0; c < extent; ++c) {
              out[static_cast<size_t>(r * extent + c)] = buffer[static_cast<size_t>(base + c / repeat * colStride)];
            }
          }
        } else {
          out = buffer;
        }
        nextTensorArg += n.shape != ShapeClass::Scalar;
        ++nextInput;
        break;
      }
      case OpCategory::Unary: {
        const std::vector<float>& x = values[static_cast<size_t>(n.operands[0])];
        out.resize(x.size());
        for (size_t e = 0; e < x.size(); ++e) out[e] = detail::unaryOp(n.op, x[e], n.scalar, n.dtype);
        break;
      }
      case OpCategory::Cast:
        out = values[static_cast<size_t>(n.operands[0])];
        break;
      case OpCategory::Binary: {
        const Node& a = nodes[static_cast<size_t>(n.operands[0])];
        const Node& b = nodes[static_cast<size_t>(n.operands[1])];
        const std::vector<float>& av = values[static_cast<size_t>(n.operands[0])];
        const std::vector<float>& bv = values[static_cast<size_t>(n.operands[1])];
        const bool aScalar = a.shape == ShapeClass::Scalar;
        // Note [Division by a row value]: the Fused mode multiplies by a Row divisor's reciprocal.
        const detail::Division division = b.shape == ShapeClass::Scalar ? detail::Division::Reciprocal
                                           : mode == EvalMode::Fused && b.shape == ShapeClass::Row
                                               ? detail::Division::RowReciprocal
                                               : detail::Division::Quotient;
        const int64_t rs = hasRows(n.shape) ? rows : 1;
        const int64_t cs = hasCols(n.shape) ? extent : 1;
        out.resize(static_cast<size_t>(rs * cs));
        for (int64_t r = 0; r < rs; ++r) {
          for (int64_t c = 0; c < cs; ++c) {
            const float x = at(av, a.shape, r, c, extent);
            const float y = at(bv, b.shape, r, c, extent);
            out[static_cast<size_t>(r * cs + c)] = detail::binaryOp(n.op, x, y, n.scalar, division);
          }
        }
        break;
      }
      case OpCategory::Reduction:
        out = reduceRows(n, values[static_cast<size_t>(n.operands[0])], rows, cols);
        break;
      case OpCategory::Join: {
        // Each part's values, converted to the cat's dtype below (exact: Note [Chain column extents]).
        out.resize(static_cast<size_t>(count));
        int64_t offset = 0;
        for (int part : n.operands) {
          const std::vector<float>& pv = values[static_cast<size_t>(part)];
          const int64_t pc = nodes[static_cast<size_t>(part)].cols;
          for (int64_t r = 0; r < rows; ++r) {
            for (int64_t c = 0; c < pc; ++c) {
              out[static_cast<size_t>(r * extent + offset + c)] = pv[static_cast<size_t>(r * pc + c)];
            }
          }
          offset += pc;
        }
        break;
      }
    }
    HOTKERNEL_INTERNAL_ASSERT(static_cast<int64_t>(out.size()) == count, "node ", i, " computed ", out.size(),
                              " values for ", count);
    if (n.op != OpKind::Constant && roundsResult(n, mode)) {
      for (float& v : out) v = roundTo(n.dtype, v);
    }
  }
  std::vector<std::vector<float>> result;
  for (int o : ir.outputs()) {
    std::vector<float> v = values[static_cast<size_t>(o)];
    const DType dtype = nodes[static_cast<size_t>(o)].dtype;
    for (float& x : v) x = roundTo(dtype, x);
    result.push_back(std::move(v));
  }
  return result;
}

}  // namespace hotkernel::chain
