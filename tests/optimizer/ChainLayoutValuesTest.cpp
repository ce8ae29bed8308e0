// Note [Chain values in a layout]: a variant's memory, the views ATen computes on, and the reference over
// row shapes, on the CPU (the harness and the tuner do the same on CUDA).
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <cmath>
#include <vector>

#include "hotkernel/chain/ChainBatchNorm.h"
#include "hotkernel/chain/ChainBuilder.h"
#include "hotkernel/chain/ChainGroupNorm.h"
#include "hotkernel/chain/ChainInterpreter.h"
#include "hotkernel/chain/NamedChains.h"
#include "hotkernel/optimizer/ChainLayoutValues.h"
#include "hotkernel/optimizer/ChainReference.h"
#include "hotkernel/runtime/Check.h"

namespace hotkernel {
namespace {

using chain::ChainIR;
using chain::DType;

std::vector<float> floatsOf(const at::Tensor& t) {
  const at::Tensor f = t.to(at::kFloat).contiguous().reshape({-1});
  return std::vector<float>(f.data_ptr<float>(), f.data_ptr<float>() + f.numel());
}

// HF's rotary on q viewed from the projection: ATen on the variant's views of the projection's memory is
// eager on the real tensors, bit for bit, and the interpreter reading the same memory through the layout
// agrees with it.
TEST(ChainLayoutValuesTest, GivenRotaryMemoryWhenViewedInTheLayoutThenAtenOnTheViewsIsEagerOnTheRealTensors) {
  const chain::RotaryShape shape{2, 4, 8, 32};
  const int64_t b = shape.batch, h = shape.heads, s = shape.seq, d = shape.headDim;
  const ChainIR ir = chain::rotaryChain(DType::BFloat16, d);
  const chain::ChainLayout layout = chain::rotaryLayout(shape);
  const int64_t rows = chain::rotaryRows(shape);
  const at::Tensor projection = at::randn({b, s, h * d}).to(at::kBFloat16);
  const at::Tensor cosTable = at::randn({b, s, d}).to(at::kBFloat16), sinTable = at::randn({b, s, d}).to(at::kBFloat16);
  const at::Tensor x = projection.view({b, s, h, d}).transpose(1, 2);
  const at::Tensor cos = cosTable.unsqueeze(1), sin = sinTable.unsqueeze(1);
  // Each input's memory from its data pointer over its span (x2 starts half a row in).
  const auto memoryOf = [&](const at::Tensor& base, int64_t offset, size_t arg) {
    const int64_t span = chainArgumentElements(ir, layout, arg, rows, d);
    return base.reshape({-1}).narrow(0, offset, span);
  };
  std::vector<ChainReferenceInput> memory(5);
  memory[0].tensor = memoryOf(projection, 0, 0);  // x
  memory[1].tensor = memoryOf(cosTable, 0, 1);    // cos
  memory[2].tensor = memoryOf(projection, d / 2, 2);  // x2
  memory[3].tensor = memoryOf(projection, 0, 3);  // x1
  memory[4].tensor = memoryOf(sinTable, 0, 4);    // sin
  const std::vector<ChainReferenceInput> views = chainInputViews(ir, layout, memory, rows, d);
  EXPECT_TRUE(at::equal(views[0].tensor.reshape(x.sizes()), x));
  EXPECT_EQ(views[0].tensor.data_ptr(), projection.data_ptr());  // a view, not a copy
  EXPECT_EQ(views[1].tensor.stride(1), 0);                         // cos shared by the heads
  const std::vector<at::Tensor> out = runChainWithAten(ir, views, rows, d);
  ASSERT_EQ(out.size(), 1u);
  const at::Tensor x1 = x.slice(-1, 0, d / 2), x2 = x.slice(-1, d / 2);
  const at::Tensor eager = x * cos + at::cat({-x2, x1}, -1) * sin;
  EXPECT_TRUE(at::equal(out[0].reshape(eager.sizes()), eager));
  const at::Tensor value = chainValueOf(ir.node(ir.outputs()[0]), out[0], rows, d);
  EXPECT_EQ(value.sizes(), (std::vector<int64_t>{rows, d}));
  // The interpreter reading the memory through the layout: the same chain (AtenOrder rounds as eager).
  std::vector<std::vector<float>> in;
  for (const ChainReferenceInput& m : memory) in.push_back(floatsOf(m.tensor));
  const auto interpreted = chain::interpretChain(ir, rows, d, layout, in, chain::EvalMode::AtenOrder);
  EXPECT_EQ(interpreted[0], floatsOf(value));
}

TEST(ChainLayoutValuesTest, GivenTheAttentionMaskWhenViewedThenEveryHeadReadsItsBatchsRows) {
  const chain::AttentionShape shape{2, 3, 4, 8};
  const ChainIR ir = chain::attentionSoftmaxChain(DType::Float32, 0.5);
  const chain::ChainLayout layout = chain::attentionSoftmaxLayout(shape);
  const int64_t rows = chain::attentionRows(shape);
  EXPECT_EQ(chainArgumentElements(ir, layout, 0, rows, 8), rows * 8);       // the scores: dense
  EXPECT_EQ(chainArgumentElements(ir, layout, 1, rows, 8), 2 * 4 * 8);      // the mask: one copy per batch
  EXPECT_EQ(chainArgumentElements(ir, layout, 2, rows, 8), rows * 8);       // the probabilities
  const at::Tensor mask = at::randn({2 * 4 * 8});
  const at::Tensor view = chainArgumentView(ir, layout, 1, mask, rows, 8);
  ASSERT_EQ(view.dim(), 4);
  for (int64_t head = 1; head < 3; ++head) EXPECT_TRUE(at::equal(view.select(1, head), view.select(1, 0)));
  EXPECT_TRUE(at::equal(view.select(1, 0), mask.view({2, 4, 8})));
  // Scores, mask and softmax on the views are eager's softmax(scores * scale + mask) with the mask broadcast.
  const at::Tensor scores = at::randn({rows * 8});
  std::vector<ChainReferenceInput> memory(2);
  memory[0].tensor = scores;
  memory[1].tensor = mask;
  const std::vector<at::Tensor> out = runChainWithAten(ir, chainInputViews(ir, layout, memory, rows, 8), rows, 8);
  const at::Tensor eager = at::softmax(scores.view({2, 3, 4, 8}) * 0.5 + mask.view({2, 1, 4, 8}), -1);
  EXPECT_TRUE(at::equal(out[0], eager));
}

TEST(ChainLayoutValuesTest, GivenTheContiguousLayoutWhenViewedThenTheValuesAreTheRowsOfTheBuffer) {
  const ChainIR ir = chain::rmsNormChain(DType::Float32, 1e-6);  // x Full, w Column
  const at::Tensor x = at::randn({6 * 16}), w = at::randn({16});
  EXPECT_EQ(chainArgumentElements(ir, {}, 0, 6, 16), 96);
  EXPECT_EQ(chainArgumentElements(ir, {}, 1, 6, 16), 16);
  const at::Tensor xv = chainArgumentView(ir, {}, 0, x, 6, 16);
  EXPECT_EQ(xv.sizes(), (std::vector<int64_t>{6, 16}));
  EXPECT_TRUE(xv.is_contiguous());
  EXPECT_EQ(chainArgumentView(ir, {}, 1, w, 6, 16).sizes(), (std::vector<int64_t>{16}));
  EXPECT_THROW(chainArgumentView(ir, {}, 0, x.narrow(0, 0, 95), 6, 16), Error);  // shorter than its span
  EXPECT_THROW(chainArgumentView(ir, {}, 0, x.view({6, 16}), 6, 16), Error);     // not a 1-d buffer
}

TEST(ChainLayoutValuesTest, GivenInputsInARowShapeWhenRunThenRowInputsFollowItAndMismatchedShapesAreRefused) {
  // x * r with r a Row value ([rows, 1]): x in the row shape [2, 3, 8], r viewed as [2, 3, 1].
  ChainIR ir;
  const int x = ir.addInput(DType::Float32, chain::ShapeClass::Full);
  const int r = ir.addInput(DType::Float32, chain::ShapeClass::Row);
  ir.markOutput(ir.addBinary(chain::OpKind::Mul, x, r));
  const at::Tensor xv = at::randn({2, 3, 8}), rv = at::randn({6, 1});
  std::vector<ChainReferenceInput> in(2);
  in[0].tensor = xv;
  in[1].tensor = rv;
  const std::vector<at::Tensor> out = runChainWithAten(ir, in, 6, 8);
  EXPECT_TRUE(at::equal(out[0], xv * rv.view({2, 3, 1})));
  in[0].tensor = at::randn({2, 4, 8});  // 8 rows, not 6
  EXPECT_THROW(runChainWithAten(ir, in, 6, 8), Error);
}

// Note [Relayout copies]: a cast to the value's own dtype is the copy eager made, not the value itself.
TEST(ChainLayoutValuesTest, GivenARelayoutCopyWhenRunByAtenOnItsViewThenTheResultIsAContiguousCopy) {
  ChainIR ir;
  const int x = ir.addInput(DType::BFloat16, chain::ShapeClass::Full);
  ir.markOutput(ir.addCast(x, DType::BFloat16));
  chain::ChainLayout layout;
  layout.rowDims = {2, 3, 5};
  layout.strides = {{5 * 3 * 3 * 8, 8, 3 * 3 * 8}, {3 * 5 * 8, 5 * 8, 8}};  // q's head view, the copy
  const at::Tensor qkv = at::randn({2, 5, 3 * 3 * 8}).to(at::kBFloat16);
  std::vector<ChainReferenceInput> memory(1);
  memory[0].tensor = qkv.reshape({-1}).narrow(0, 0, chainArgumentElements(ir, layout, 0, 30, 8));
  const std::vector<ChainReferenceInput> views = chainInputViews(ir, layout, memory, 30, 8);
  const std::vector<at::Tensor> out = runChainWithAten(ir, views, 30, 8);
  EXPECT_TRUE(out[0].is_contiguous());
  EXPECT_NE(out[0].data_ptr(), qkv.data_ptr());
  const at::Tensor q = qkv.narrow(-1, 0, 3 * 8).view({2, 5, 3, 8}).transpose(1, 2);
  EXPECT_TRUE(at::equal(out[0], q));
}

// Note [Transposed layouts]: k^T's memory viewed with its column stride is k^T itself, and ATen's copy of the
// view is the contiguous k^T the chain's kernel writes.
TEST(ChainLayoutValuesTest, GivenATransposedCopyWhenViewedAndRunByAtenThenTheResultIsTheContiguousTranspose) {
  const chain::ChainIR ir = chain::relayoutCopyChain(DType::Float16);
  const int64_t b = 2, h = 3, s = 5, d = 8;
  const chain::ChainLayout layout = chain::headTransposeCopyLayout({b, h, s, d}, 3);
  const at::Tensor qkv = at::randn({b, s, 3 * h * d}).to(at::kHalf);
  const at::Tensor kt = qkv.narrow(-1, h * d, h * d).view({b, s, h, d}).transpose(1, 2).transpose(-1, -2);
  std::vector<ChainReferenceInput> memory(1);
  memory[0].tensor = qkv.reshape({-1}).narrow(0, h * d, chainArgumentElements(ir, layout, 0, b * h * d, s));
  const std::vector<ChainReferenceInput> views = chainInputViews(ir, layout, memory, b * h * d, s);
  EXPECT_TRUE(at::equal(views[0].tensor, kt.reshape({b, h * d, s})));
  EXPECT_EQ(views[0].tensor.stride(-1), 3 * h * d);
  const std::vector<at::Tensor> out = runChainWithAten(ir, views, b * h * d, s);
  EXPECT_TRUE(out[0].is_contiguous());
  EXPECT_TRUE(at::equal(out[0], kt.reshape({b, h * d, s})));
}

// Note [Chain values in a group view]: diffusers' group norm + SiLU over its group view. The weight and bias
// are [C, 1] broadcasts over HxW of their own memory (no copy), x a view of its memory, and ATen on the views
// runs one native_group_norm: eager's F.silu(F.group_norm(x)) bit for bit; the interpreter agrees within float32
// rounding.
TEST(ChainLayoutValuesTest, GivenGroupNormMemoryWhenViewedInTheGroupViewThenAtenRunsEagersGroupNormOnIt) {
  for (const chain::GroupNormShape& shape : {chain::GroupNormShape{2, 8, 6, 4}, chain::GroupNormShape{1, 16, 9, 8}}) {
    for (DType dtype : {DType::Float32, DType::BFloat16}) {
      const at::ScalarType type = dtype == DType::Float32 ? at::kFloat : at::kBFloat16;
      const ChainIR ir = chain::groupNormActChain(dtype, 1e-5, chain::OpKind::Silu);
      const chain::ChainLayout layout = chain::groupNormActLayout(shape);
      const int64_t rows = chain::groupNormRows(shape), cols = chain::groupNormCols(shape);
      ASSERT_EQ(chainColumnSplit(layout), shape.hw);
      const at::Tensor x = (at::randn({shape.batch, shape.channels, shape.hw}) * 3 + 1).to(type);
      const at::Tensor w = at::randn({shape.channels}).to(type), b = at::randn({shape.channels}).to(type);
      std::vector<ChainReferenceInput> memory(3);
      memory[0].tensor = x.reshape({-1});
      memory[1].tensor = w;
      memory[2].tensor = b;
      const std::vector<ChainReferenceInput> views = chainInputViews(ir, layout, memory, rows, cols);
      EXPECT_EQ(views[1].tensor.data_ptr(), w.data_ptr());  // a view, not a copy
      EXPECT_EQ(views[1].tensor.stride(-1), 0);               // the channel's value over its HxW
      EXPECT_EQ(views[0].tensor.size(-1), shape.hw);
      const std::vector<at::Tensor> out = runChainWithAten(ir, views, rows, cols, chainColumnSplit(layout));
      ASSERT_EQ(out.size(), 1u);
      const at::Tensor eager = at::silu(at::group_norm(x, shape.groups, w, b, 1e-5));
      EXPECT_TRUE(at::equal(out[0].reshape(eager.sizes()), eager)) << kernels::dtypeName(dtype);
      EXPECT_TRUE(at::equal(chainAtenValues(ir, layout, memory, rows, cols)[0].reshape(eager.sizes()), eager));
      // The interpreter reads the same memory through the layout (repeats and all).
      std::vector<std::vector<float>> values = {floatsOf(x), floatsOf(w), floatsOf(b)};
      const auto fused = chain::interpretChain(ir, rows, cols, layout, values, chain::EvalMode::Fused);
      const std::vector<float> want = floatsOf(eager);
      ASSERT_EQ(fused[0].size(), want.size());
      const double tol = dtype == DType::Float32 ? 1e-5 : 0x1p-6;
      for (size_t e = 0; e < want.size(); ++e) {
        ASSERT_NEAR(fused[0][e], want[e], tol * (1.0 + std::fabs(want[e]))) << kernels::dtypeName(dtype) << " " << e;
      }
    }
  }
}

// Without a group (the chain keeps the norm's mean: no single call computed it) ATen runs the nodes one by one
// over the split columns: the reductions over both column dims, within rounding of eager's group norm.
TEST(ChainLayoutValuesTest, GivenAGroupNormChainKeepingItsMeanWhenRunByAtenThenItsNodesReduceOverTheWholeGroup) {
  const chain::GroupNormShape shape{2, 8, 6, 4};
  chain::RecordedChain r = chain::groupNormActRecording(DType::Float32, shape, 1e-5, chain::OpKind::Silu);
  const chain::ChainBuild kept = chain::buildChain(r.calls, r.metas, {7, 5}, chain::ChainBuildOptions{true});
  ASSERT_TRUE(kept.ok()) << kept.reason;
  const at::Tensor x = at::randn({2, 8, 6}), w = at::randn({8}), b = at::randn({8});
  std::vector<ChainReferenceInput> memory(3);
  memory[0].tensor = x.reshape({-1});
  memory[1].tensor = w;
  memory[2].tensor = b;
  const std::vector<at::Tensor> out = chainAtenValues(kept.chain, kept.layout, memory, kept.rows, kept.cols);
  ASSERT_EQ(out.size(), 2u);
  const auto eager = at::native_group_norm(x, w, b, 2, 8, 6, 4, 1e-5);
  EXPECT_TRUE(at::allclose(out[0].reshape({2, 8, 6}), at::silu(std::get<0>(eager)), 1e-5, 1e-5));
  EXPECT_TRUE(at::allclose(out[1].reshape({2, 4}), std::get<1>(eager), 1e-5, 1e-6));
  // Repeats that do not nest have no split.
  chain::ChainLayout odd = kept.layout;
  odd.colRepeats = {1, 6, 4, 1, 1};
  EXPECT_THROW(chainColumnSplit(odd), Error);
  EXPECT_EQ(chainColumnSplit(chain::ChainLayout{}), 0);
}

// Note [Eval BatchNorm groups]: an eval BatchNorm2d + ReLU's memory over the view of one channel a row; ATen on
// the views runs one batch norm (as eager dispatched it): eager's F.relu(F.batch_norm(x, eval)) bit for bit.
TEST(ChainLayoutValuesTest, GivenEvalBatchNormMemoryWhenViewedThenAtenRunsEagersBatchNormOnIt) {
  const chain::GroupNormShape shape{2, 6, 20, 6};
  for (DType dtype : {DType::Float32, DType::BFloat16}) {
    const at::ScalarType type = dtype == DType::Float32 ? at::kFloat : at::kBFloat16;
    const ChainIR ir = chain::batchNormActChain(dtype, 1e-5, chain::OpKind::Relu);
    const chain::ChainLayout layout = chain::batchNormActLayout(shape);
    ASSERT_EQ(chain::findBatchNormGroups(ir).size(), 1u);
    const at::Tensor x = (at::randn({2, 6, 20}) * 2).to(type), w = at::randn({6}).to(type), b = at::randn({6}).to(type);
    const at::Tensor mean = at::randn({6}).to(type), var = (at::rand({6}) + 0.5).to(type);
    std::vector<ChainReferenceInput> memory(5);
    memory[0].tensor = x.reshape({-1});
    memory[1].tensor = w;
    memory[2].tensor = b;
    memory[3].tensor = mean;
    memory[4].tensor = var;
    const std::vector<at::Tensor> out = chainAtenValues(ir, layout, memory, 12, 20);
    const at::Tensor eager = at::relu(at::batch_norm(x, w, b, mean, var, false, 0.1, 1e-5, true));
    EXPECT_TRUE(at::equal(out[0].reshape(eager.sizes()), eager)) << kernels::dtypeName(dtype);
  }
  // A group norm chain holds no batch norm group, nor a batch norm chain a group norm one.
  EXPECT_TRUE(chain::findBatchNormGroups(chain::groupNormActChain(DType::Float16, 1e-5, chain::OpKind::Silu)).empty());
  EXPECT_TRUE(chain::findGroupNormGroups(chain::batchNormActChain(DType::Float16, 1e-5, chain::OpKind::Silu)).empty());
}

}  // namespace
}  // namespace hotkernel
