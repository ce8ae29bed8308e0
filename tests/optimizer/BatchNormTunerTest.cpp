// The batch_norm tuner's harness spec on the CPU (Note [Batch norm of one sample], Note [Near-max inputs of a batch
// norm]): layer_norm's outputs under the batch norm's name, and near-max inputs at which no float32 product or
// square of ATen's batch norm statistics overflows (the default quarter of the dtype's max made every candidate
// fail against ATen's overflowed statistics on a GPU).
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <cmath>
#include <limits>

#include "hotkernel/kernels/DType.h"
#include "hotkernel/optimizer/BatchNormTuner.h"
#include "hotkernel/optimizer/NormTuner.h"

namespace hotkernel {
namespace {

using kernels::DType;

TEST(BatchNormTunerTest, GivenTheSpecWhenMadeThenLayerNormsOutputsUnderTheBatchNormsNameWithItsOwnReferences) {
  const RowOpSpec spec = batchNormSpec();
  const RowOpSpec layer = layerNormSpec(false, false);
  EXPECT_EQ(spec.op, "aten::native_batch_norm");
  ASSERT_EQ(spec.outputs.size(), layer.outputs.size());
  for (size_t i = 0; i < spec.outputs.size(); ++i) EXPECT_EQ(spec.outputs[i].name, layer.outputs[i].name);
  EXPECT_TRUE(static_cast<bool>(spec.references));
  EXPECT_TRUE(static_cast<bool>(spec.references64));
  EXPECT_FALSE(spec.infinitiesDefined);
  EXPECT_FALSE(static_cast<bool>(layer.nearMaxMagnitude));  // layer_norm keeps the default quarter max
}

// hk_layer_norm's argument list as the check passes it (the one layer_norm, group_norm and batch_norm share).
TEST(BatchNormTunerTest, GivenACheckWithoutWeightWhenItsArgumentsAreMadeThenHkLayerNormsListWithNullColumns) {
  const RowOpSpec spec = batchNormSpec();
  const at::Tensor in = at::zeros({4, 8});
  const std::vector<at::Tensor> outs = {at::empty({4, 8}), at::empty({4}), at::empty({4}), at::zeros({5})};
  RowOpArgs a;
  a.columns = {at::Tensor(), at::Tensor()};
  a.scalars = {1e-5};
  const KernelArgs args = spec.kernelArgs(in, a, outs);
  ASSERT_EQ(args.size(), 11u);
  EXPECT_EQ(args.pointerAt(0), in.const_data_ptr());
  EXPECT_EQ(args.pointerAt(1), nullptr);
  EXPECT_EQ(args.pointerAt(2), nullptr);
  EXPECT_EQ(args.pointerAt(3), outs[0].const_data_ptr());
  EXPECT_EQ(args.pointerAt(5), outs[2].const_data_ptr());
  EXPECT_EQ(args.int64At(6), 4);
  EXPECT_EQ(args.int64At(7), 8);
  EXPECT_FLOAT_EQ(args.float32At(8), 1e-5f);
  EXPECT_EQ(args.pointerAt(9), outs[3].const_data_ptr());  // the workspace's partials, its last float the counter
  EXPECT_EQ(args.pointerAt(10), static_cast<const float*>(outs[3].const_data_ptr()) + 4);
}

TEST(BatchNormTunerTest, GivenRowLengthsWhenNearMaxIsAskedThenNoFloat32ProductOfTheStatisticsOverflows) {
  const RowOpSpec spec = batchNormSpec();
  ASSERT_TRUE(static_cast<bool>(spec.nearMaxMagnitude));
  const double floatMax = std::numeric_limits<float>::max();
  for (DType d : {DType::Float32, DType::BFloat16}) {
    for (int64_t cols : {int64_t{64}, int64_t{147}, int64_t{4608}, int64_t{1} << 20}) {
      SCOPED_TRACE(std::to_string(cols));
      const double big = spec.nearMaxMagnitude(d, cols);
      // n * mean and (mean - mean')^2 * n * n' / (n + n') over a row of cols elements stay finite.
      EXPECT_LE(big * static_cast<double>(cols), floatMax);
      EXPECT_LE(4.0 * big * big * static_cast<double>(cols), floatMax * (1 + 1e-12));
      EXPECT_GT(big, 1e15);  // still large values
    }
  }
  EXPECT_DOUBLE_EQ(spec.nearMaxMagnitude(DType::Float16, 4608), 65504.0 / 4.0);
}

}  // namespace
}  // namespace hotkernel
