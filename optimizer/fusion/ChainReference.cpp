#include "hotkernel/optimizer/ChainReference.h"

#include <algorithm>
#include <optional>

#include "hotkernel/chain/ChainBatchNorm.h"
#include "hotkernel/chain/ChainGroupNorm.h"
#include "hotkernel/chain/ChainLayerNorm.h"
#include "hotkernel/chain/ChainLayout.h"
#include "hotkernel/chain/ChainSoftmax.h"
#include "hotkernel/runtime/Check.h"

namespace hotkernel {
namespace {

using chain::Node;
using chain::OpKind;
using chain::ShapeClass;

// A Python number as eager code passes it to a binary op (Note [The chain's ATen reference]).
at::Tensor wrappedNumber(double value) {
  at::Tensor t = at::scalar_tensor(value, at::TensorOptions().dtype(at::kDouble));
  t.unsafeGetTensorImpl()->set_wrapped_number(true);
  return t;
}

}  // namespace

std::vector<int64_t> chainValueSizes(ShapeClass shape, int64_t rows, int64_t cols) {
  switch (shape) {
    case ShapeClass::Full:
      return {rows, cols};
    case ShapeClass::Column:
      return {cols};
    case ShapeClass::Row:
      return {rows, 1};
    case ShapeClass::RowFlat:
      return {rows};
    case ShapeClass::Scalar:
      return {};
  }
  return {};
}

namespace {

// Each group at its result node (`at`), its other nodes never computed (`skipped`).
template <typename Group>
void placeGroups(const std::vector<Group>& groups, std::vector<const Group*>& at, std::vector<bool>& skipped) {
  for (const Group& g : groups) {
    at[static_cast<size_t>(g.result)] = &g;
    for (int n : g.internal) skipped[static_cast<size_t>(n)] = true;
  }
}

at::Tensor unary(const Node& n, const at::Tensor& x) {
  switch (n.op) {
    case OpKind::Neg:
      return at::neg(x);
    case OpKind::Exp:
      return at::exp(x);
    case OpKind::Log:
      return at::log(x);
    case OpKind::Rsqrt:
      return at::rsqrt(x);
    case OpKind::Sqrt:
      return at::sqrt(x);
    case OpKind::Tanh:
      return at::tanh(x);
    case OpKind::Sigmoid:
      return at::sigmoid(x);
    case OpKind::Silu:
      return at::silu(x);
    case OpKind::GeluErf:
      return at::gelu(x, "none");
    case OpKind::GeluTanh:
      return at::gelu(x, "tanh");
    case OpKind::Relu:
      return at::relu(x);
    case OpKind::Abs:
      return at::abs(x);
    case OpKind::PowScalar:
      return at::pow(x, n.scalar);
    case OpKind::Reciprocal:
      return at::reciprocal(x);
    case OpKind::Sin:
      return at::sin(x);
    case OpKind::Cos:
      return at::cos(x);
    case OpKind::Erf:
      return at::erf(x);
    case OpKind::Log1p:
      return at::log1p(x);
    case OpKind::Expm1:
      return at::expm1(x);
    case OpKind::Hardsigmoid:
      return at::hardsigmoid(x);
    case OpKind::Hardswish:
      return at::hardswish(x);
    case OpKind::Softplus:
      return at::softplus(x, 1, 20);
    case OpKind::Mish:
      return at::mish(x);
    case OpKind::LeakyRelu:
      return at::leaky_relu(x, n.scalar);
    default:
      HOTKERNEL_INTERNAL_ASSERT(false, "not a unary op: ", chain::opInfo(n.op).name);
  }
  return {};
}

at::Tensor binary(const Node& n, const at::Tensor& a, const at::Tensor& b) {
  switch (n.op) {
    case OpKind::Add:
      return at::add(a, b, n.scalar);
    case OpKind::Sub:
      return at::sub(a, b, n.scalar);
    case OpKind::Mul:
      return at::mul(a, b);
    case OpKind::Div:
      return at::div(a, b);
    case OpKind::Maximum:
      return at::maximum(a, b);
    case OpKind::Minimum:
      return at::minimum(a, b);
    default:
      HOTKERNEL_INTERNAL_ASSERT(false, "not a binary op: ", chain::opInfo(n.op).name);
  }
  return {};
}

at::Tensor reduction(const Node& n, const at::Tensor& x, bool split) {
  const std::vector<int64_t> dims = split ? std::vector<int64_t>{-2, -1} : std::vector<int64_t>{-1};
  switch (n.op) {
    case OpKind::Sum:
      return at::sum(x, dims, n.keepdim);
    case OpKind::Mean:
      return at::mean(x, dims, n.keepdim);
    case OpKind::Amax:
      return at::amax(x, dims, n.keepdim);
    default:
      HOTKERNEL_INTERNAL_ASSERT(false, "not a reduction: ", chain::opInfo(n.op).name);
  }
  return {};
}

// A per-channel value viewed over row dims + [columns split in two]: the rows of distinct channels it spans (the
// product of the row dims it does not broadcast over).
int64_t channelRows(const at::Tensor& value) {
  int64_t channels = 1;
  for (int64_t d = 0; d + 2 < value.dim(); ++d) channels *= value.stride(d) != 0 ? value.size(d) : 1;
  return channels;
}

// Note [GroupNorm groups]: the group as the call eager made, over values whose columns split as [C / G, HxW].
// The groups come from the weight's (else the bias's) row strides: C / G over the dims of the groups, 0 over the
// samples'; without either, each row is a sample of one group (the same normalization).
at::Tensor groupNormOf(const chain::GroupNormGroup& g, const std::vector<at::Tensor>& tensors, int64_t rows) {
  const at::Tensor& x = tensors[static_cast<size_t>(g.input)];
  const int64_t perGroup = x.size(-2), hw = x.size(-1);
  auto value = [&](int node) {
    return node < 0 ? std::optional<at::Tensor>() : std::optional<at::Tensor>(tensors[static_cast<size_t>(node)]);
  };
  std::optional<at::Tensor> weight = value(g.weight), bias = value(g.bias);
  const std::optional<at::Tensor>& any = weight ? weight : bias;
  const int64_t groups = any ? channelRows(*any) : 1;
  const int64_t samples = any ? rows / groups : rows, channels = groups * perGroup;
  auto raw = [&](std::optional<at::Tensor>& t) {  // the [C] tensor the call read
    if (t) t = t->as_strided({channels}, {1});
  };
  raw(weight);
  raw(bias);
  const at::Tensor out = std::get<0>(at::native_group_norm(x.reshape({samples, channels, hw}), weight, bias, samples,
                                                           channels, hw, any ? groups : 1, g.eps));
  return out.view(x.sizes());
}

// Note [Eval BatchNorm groups]: the norm as the call eager made (at::batch_norm dispatches to cuDNN or not as eager
// did), over values whose columns split at the row's width; the channels from the running mean's row strides.
at::Tensor batchNormOf(const chain::BatchNormGroup& g, const std::vector<at::Tensor>& tensors, int64_t rows) {
  const at::Tensor& x = tensors[static_cast<size_t>(g.input)];
  const at::Tensor& mean = tensors[static_cast<size_t>(g.mean)];
  const int64_t channels = channelRows(mean);
  auto raw = [&](int node) {
    return node < 0 ? std::optional<at::Tensor>()
                    : std::optional<at::Tensor>(tensors[static_cast<size_t>(node)].as_strided({channels}, {1}));
  };
  const at::Tensor out =
      at::batch_norm(x.reshape({rows / channels, channels, x.size(-2) * x.size(-1)}), raw(g.weight), raw(g.bias),
                     raw(g.mean), raw(g.var), /*training=*/false, /*momentum=*/0.0, g.eps,
                     at::globalContext().userEnabledCuDNN());
  return out.view(x.sizes());
}

}  // namespace

at::ScalarType chainScalarType(chain::DType dtype) {
  switch (dtype) {
    case chain::DType::Float32:
      return at::kFloat;
    case chain::DType::Float16:
      return at::kHalf;
    case chain::DType::BFloat16:
      return at::kBFloat16;
  }
  HOTKERNEL_INTERNAL_ASSERT(false, "unknown chain dtype");
  return at::kFloat;
}

std::vector<at::Tensor> runChainWithAten(const chain::ChainIR& ir, const std::vector<ChainReferenceInput>& inputs,
                                         int64_t rows, int64_t cols, int64_t split) {
  const std::vector<int> inputNodes = ir.inputs();
  HOTKERNEL_CHECK(inputs.size() == inputNodes.size(), "the chain takes ", inputNodes.size(), " inputs, got ",
                  inputs.size());
  const std::vector<Node>& nodes = ir.nodes();
  // A node's value: a tensor, or a Scalar node's number (wrapped when it meets a tensor).
  std::vector<at::Tensor> tensors(nodes.size());
  std::vector<std::optional<double>> numbers(nodes.size());
  // Note [Chain values in a layout]: Full inputs may come in their row shape (rowDims + [extent], any
  // strides); the first one's rowDims are every Full input's, and Row inputs are viewed in them.
  std::vector<int64_t> rowDims = {rows};
  for (size_t k = 0; k < inputNodes.size(); ++k) {
    const Node& n = nodes[static_cast<size_t>(inputNodes[k])];
    const at::Tensor& t = inputs[k].tensor;
    if (n.shape == ShapeClass::Full && t.defined() && t.dim() >= (split > 0 ? 3 : 2)) {
      rowDims.assign(t.sizes().begin(), t.sizes().end() - (split > 0 ? 2 : 1));
      break;
    }
  }
  int64_t rowProduct = 1;
  for (int64_t d : rowDims) rowProduct *= d;
  HOTKERNEL_CHECK(rowProduct == rows, "the Full inputs' row dims hold ", rowProduct, " rows, not ", rows);
  for (size_t k = 0; k < inputNodes.size(); ++k) {
    const Node& n = nodes[static_cast<size_t>(inputNodes[k])];
    if (n.shape == ShapeClass::Scalar) {
      numbers[static_cast<size_t>(inputNodes[k])] = inputs[k].scalar;
      continue;
    }
    const at::Tensor& t = inputs[k].tensor;
    // The value in the row shape: rowDims + [extent] (Full), + [1] (Row), rowDims (RowFlat); [extent] (Column);
    // with a split, the columns as [extent / split, split] (Row: [1, 1]).
    const int64_t extent = chain::extentOf(n, cols);
    HOTKERNEL_CHECK(split == 0 || extent % split == 0, "input ", k, "'s extent ", extent, " does not split by ", split);
    const std::vector<int64_t> columns = split > 0 ? std::vector<int64_t>{extent / split, split}
                                                   : std::vector<int64_t>{extent};
    std::vector<int64_t> rowShape = rowDims;
    if (n.shape == ShapeClass::Full) rowShape.insert(rowShape.end(), columns.begin(), columns.end());
    if (n.shape == ShapeClass::Row) rowShape.insert(rowShape.end(), columns.size(), 1);
    const std::vector<int64_t> flat = chainValueSizes(n.shape, rows, extent);
    if (n.shape == ShapeClass::Column) rowShape = columns;
    const bool fits = t.defined() && t.scalar_type() == chainScalarType(n.dtype) &&
                      (t.sizes().vec() == rowShape || (n.shape != ShapeClass::Full && t.sizes().vec() == flat));
    HOTKERNEL_CHECK(fits, "input ", k, " must be a ", chain::shapeClassName(n.shape), " tensor of ",
                    chainScalarType(n.dtype), " for [", rows, ", ", cols, "] in row dims ", c10::IntArrayRef(rowDims));
    tensors[static_cast<size_t>(inputNodes[k])] = t.sizes().vec() == rowShape ? t : t.view(rowShape);
  }
  const auto operand = [&](int i) {
    const size_t u = static_cast<size_t>(i);
    return numbers[u] ? wrappedNumber(*numbers[u]) : tensors[u];
  };
  // Note [Softmax groups], Note [LayerNorm groups]: a group runs as the call eager made; its other nodes are
  // never computed.
  std::vector<const chain::SoftmaxGroup*> softmaxAt(nodes.size(), nullptr);
  std::vector<const chain::LayerNormGroup*> layerNormAt(nodes.size(), nullptr);
  std::vector<bool> skipped(nodes.size(), false);
  const std::vector<chain::SoftmaxGroup> groups = chain::findSoftmaxGroups(ir);
  placeGroups(groups, softmaxAt, skipped);
  const std::vector<chain::LayerNormGroup> norms = chain::findLayerNormGroups(ir);
  placeGroups(norms, layerNormAt, skipped);
  std::vector<const chain::GroupNormGroup*> groupNormAt(nodes.size(), nullptr);
  const std::vector<chain::GroupNormGroup> groupNorms =
      split > 0 ? chain::findGroupNormGroups(ir) : std::vector<chain::GroupNormGroup>{};
  placeGroups(groupNorms, groupNormAt, skipped);
  std::vector<const chain::BatchNormGroup*> batchNormAt(nodes.size(), nullptr);
  const std::vector<chain::BatchNormGroup> batchNorms =
      split > 0 ? chain::findBatchNormGroups(ir) : std::vector<chain::BatchNormGroup>{};
  placeGroups(batchNorms, batchNormAt, skipped);
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Node& n = nodes[i];
    if (skipped[i]) continue;
    if (const chain::GroupNormGroup* g = groupNormAt[i]) {
      tensors[i] = groupNormOf(*g, tensors, rows);
      continue;
    }
    if (const chain::BatchNormGroup* g = batchNormAt[i]) {
      tensors[i] = batchNormOf(*g, tensors, rows);
      continue;
    }
    if (const chain::LayerNormGroup* g = layerNormAt[i]) {
      const at::Tensor& x = tensors[static_cast<size_t>(g->input)];
      auto column = [&](int node) {
        return node < 0 ? std::optional<at::Tensor>() : std::optional<at::Tensor>(tensors[static_cast<size_t>(node)]);
      };
      tensors[i] = std::get<0>(at::native_layer_norm(x, {x.size(-1)}, column(g->weight), column(g->bias), g->eps));
      continue;
    }
    if (const chain::SoftmaxGroup* g = softmaxAt[i]) {
      const at::Tensor& x = tensors[static_cast<size_t>(g->input)];
      // half_to_float is ATen's for float16 alone; a bfloat16 x is widened first, as eager code widens it.
      const bool halfToFloat = g->halfToFloat && x.scalar_type() == at::kHalf;
      const at::Tensor in = g->halfToFloat && !halfToFloat ? x.to(at::kFloat) : x;
      tensors[i] = g->log ? at::_log_softmax(in, -1, halfToFloat) : at::_softmax(in, -1, halfToFloat);
      continue;
    }
    switch (chain::opInfo(n.op).category) {
      case chain::OpCategory::Leaf:
        if (n.op == OpKind::Constant) numbers[i] = n.scalar;
        break;
      case chain::OpCategory::Unary:
        tensors[i] = unary(n, tensors[static_cast<size_t>(n.operands.at(0))]);
        break;
      case chain::OpCategory::Binary:
        tensors[i] = binary(n, operand(n.operands.at(0)), operand(n.operands.at(1)));
        break;
      case chain::OpCategory::Cast: {
        // A cast to the value's own dtype is a copy eager made (clone: Note [Relayout copies]); to() would
        // return the value itself.
        const at::Tensor& x = tensors[static_cast<size_t>(n.operands.at(0))];
        const at::ScalarType to = chainScalarType(n.dtype);
        tensors[i] = x.scalar_type() == to ? x.clone(at::MemoryFormat::Contiguous) : x.to(to);
        break;
      }
      case chain::OpCategory::Reduction:
        tensors[i] = reduction(n, tensors[static_cast<size_t>(n.operands.at(0))], split > 0);
        break;
      case chain::OpCategory::Join: {
        std::vector<at::Tensor> parts;
        for (int part : n.operands) parts.push_back(tensors[static_cast<size_t>(part)]);
        tensors[i] = at::cat(parts, -1);
        break;
      }
    }
  }
  std::vector<at::Tensor> outputs;
  for (int o : ir.outputs()) outputs.push_back(tensors[static_cast<size_t>(o)]);
  return outputs;
}

}  // namespace hotkernel
