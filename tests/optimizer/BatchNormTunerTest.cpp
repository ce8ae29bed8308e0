// The batch_norm tuner's harness spec on the CPU (Note [Batch norm of one sample], Note [Near-max inputs of a batch
// norm]): layer_norm's outputs under the batch norm's name, and near-max inputs at which no float32 product or
// square of ATen's batch norm statistics overflows (the default quarter of the dtype's max made every candidate
// fail against ATen's overflowed statistics on a GPU).
#include <gtest/gtest.h>

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
