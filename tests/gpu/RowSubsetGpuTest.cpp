// Tuning on a row subset (Note [Tuning on a row subset]): a variant whose
// tuning does not fit a small memory cap is validated and timed on fewer rows
// (recorded as tunedRows); the accepted kernel's plan, made for the full
// variant, serves every row of it within the family's bound against ATen. A
// cap that cannot hold the rows that fill the GPU refuses the variant; a
// middle-dim reduction of too few outer rows for a subset runs its harness on
// fewer rows than its timed calls (recorded as harnessRows).
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAGeneratorImpl.h>
#include <ATen/ops/_softmax_cuda_dispatch.h>

#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "hotkernel/kernels/ReduceDimFamily.h"
#include "hotkernel/kernels/RmsNormFamily.h"
#include "hotkernel/kernels/SoftmaxFamily.h"
#include "hotkernel/kernels/VariantOptions.h"
#include "hotkernel/optimizer/Benchmark.h"
#include "hotkernel/optimizer/Harness.h"
#include "hotkernel/optimizer/NormTuner.h"
#include "hotkernel/optimizer/PlanFactory.h"
#include "hotkernel/optimizer/ReduceDimTuner.h"
#include "hotkernel/optimizer/SoftmaxTuner.h"
#include "hotkernel/optimizer/TargetBudget.h"
#include "hotkernel/optimizer/TuningRows.h"
#include "hotkernel/runtime/Check.h"
#include "hotkernel/runtime/CudaKernelLauncher.h"

namespace hotkernel {
namespace {

using kernels::DType;
using kernels::SoftmaxFamily;

#define REQUIRE_CUDA()                                              \
  if (!at::cuda::is_available() || at::cuda::device_count() == 0) { \
    GTEST_SKIP() << "no CUDA device";                               \
  }

// The tuners' memory model (chooseTuningRows): `rowBuffers` row-sized
// buffers a row and a flush buffer of twice the L2.
TuningMemory memoryOf(int rowBuffers, int64_t cols, DType dtype) {
  TuningMemory m;
  m.bytesPerRow = rowBuffers * cols * static_cast<int64_t>(kernels::elementSize(dtype));
  m.fixedBytes = 2 * static_cast<int64_t>(at::cuda::getDeviceProperties(0)->l2CacheSize);
  return m;
}

// The rows that fill this GPU for a family's points valid for `v` (the most rows a CTA among them).
template <typename Family, typename Variant>
int64_t fillRowsFor(const Variant& v) {
  int maxRowsPerCta = 1;
  for (const auto& p : Family::allParameterPoints(v.dtype)) {
    if (Family::guardParams(v, p)) maxRowsPerCta = std::max(maxRowsPerCta, p.rowsPerCta);
  }
  return fillRows(at::cuda::getDeviceProperties(0)->multiProcessorCount, maxRowsPerCta);
}

// A cap that holds a quarter of the variant's rows; any correct kernel not
// far slower than ATen is accepted, so that there is a plan to check.
TunerOptions quarterCap(const TuningMemory& memory, int64_t rows) {
  TunerOptions o;
  o.memoryCapBytes = memory.bytes(rows / 4);
  o.minSpeedup = 0.5;
  o.searchEvaluations = 12;
  return o;
}

// "" when `plan` computes all `rows` rows of a fresh input as ATen does,
// under the harness's bounds and the family's invariant (checkOutputs), its
// outputs pre-filled with NaN so that a row it leaves unwritten fails.
std::string servesAllRows(const RowOpSpec& single, const Plan& plan, DType dtype, int64_t rows, int64_t cols,
                          at::Tensor* inOut = nullptr, std::vector<at::Tensor>* outsOut = nullptr) {
  const RowOpSpec spec = generalForm(single);
  at::Generator gen = at::cuda::detail::getDefaultCUDAGenerator(0).clone();
  gen.set_current_seed(19);
  const RowOpArgs args = spec.makeArgs(rows, cols, dtype, gen);
  const at::Tensor in =
      at::randn({rows, cols}, at::TensorOptions().dtype(at::kFloat).device(at::kCUDA, 0)).mul_(4.0).to(
          scalarTypeOf(dtype));
  std::vector<at::Tensor> outs = allocateOutputs(spec, in);
  for (at::Tensor& o : outs) {  // a row left unwritten fails: NaN, or the least int64 for indices
    if (o.scalar_type() == at::kLong) {
      o.fill_(std::numeric_limits<int64_t>::min());
    } else {
      o.fill_(std::numeric_limits<float>::quiet_NaN());
    }
  }
  if (!plan.launcher->launchArgs(spec.kernelArgs(in, args, outs), at::cuda::getCurrentCUDAStream(0).stream())) {
    return "the plan did not launch";
  }
  if (inOut) *inOut = in;
  if (outsOut) *outsOut = outs;
  return checkOutputs(spec, dtype, in, args, outs);
}

TEST(RowSubsetGpuTest, GivenSoftmaxVariantOverTheCapWhenTunedThenTunedOnASubsetAndThePlanServesEveryRow) {
  REQUIRE_CUDA();
  const kernels::SoftmaxVariant v{DType::Float32, 8192, 4096};
  const TuningMemory memory = memoryOf(12, v.cols, v.dtype);
  const int64_t fill = fillRowsFor<SoftmaxFamily>(v);
  ASSERT_LE(fill, v.rows / 4) << "this GPU fills with more rows than the test's quarter of " << v.rows;
  ASSERT_GT(memory.bytes(v.rows), quarterCap(memory, v.rows).memoryCapBytes);

  const TuneOutcome t = tuneSoftmax(v, 0, quarterCap(memory, v.rows));
  ASSERT_TRUE(t.metrics.tunedRows.has_value()) << t.metrics.toJson().dump(2);
  EXPECT_EQ(*t.metrics.tunedRows, v.rows / 4);
  EXPECT_GE(*t.metrics.tunedRows, fill);
  EXPECT_EQ(t.metrics.toJson().at("tunedRows"), v.rows / 4);
  ASSERT_TRUE(t.accepted) << t.metrics.toJson().dump(2);

  // The plan the engine makes for the full variant: its grid covers all rows.
  const VariantKey key{static_cast<int32_t>(v.dtype), 0, v.rows, v.cols};
  const Plan plan = makePlan(t.family, key, t.paramsJson, t.kernelName, t.cubin, 0);
  const auto* launcher = dynamic_cast<const CudaKernelLauncher*>(plan.launcher.get());
  ASSERT_NE(launcher, nullptr);
  EXPECT_EQ(launcher->geometry().gridX,
            SoftmaxFamily::launchGeometry(v, kernels::SoftmaxParams::fromJson(t.paramsJson)).gridX);

  at::Tensor in;
  std::vector<at::Tensor> outs;
  EXPECT_EQ(servesAllRows(softmaxSpec(), plan, v.dtype, v.rows, v.cols, &in, &outs), "");
  ASSERT_EQ(outs.size(), 1u);
  // Elementwise against ATen, the rows past the tuned ones included.
  const at::Tensor ref = at::cuda::_softmax(in, -1, false);
  const SoftmaxFamily::Bound b = SoftmaxFamily::softmaxBound(v.dtype, v.cols);
  const at::Tensor excess = (outs[0] - ref).abs() - (ref.abs() * b.relative + b.absolute);
  const int64_t tuned = *t.metrics.tunedRows;
  EXPECT_LE(excess.narrow(0, 0, tuned).max().item<double>(), 0.0);
  EXPECT_LE(excess.narrow(0, tuned, v.rows - tuned).max().item<double>(), 0.0);
}

TEST(RowSubsetGpuTest, GivenRmsNormVariantOverTheCapWhenTunedThenTunedOnASubsetAndThePlanServesEveryRow) {
  REQUIRE_CUDA();
  const kernels::RmsNormVariant v{DType::BFloat16, 16384, 8192, true};
  const TuningMemory memory = memoryOf(10, v.cols, v.dtype);
  ASSERT_LE(fillRowsFor<kernels::RmsNormFamily>(v), v.rows / 4);

  const TuneOutcome t = tuneRmsNorm(v, 0, quarterCap(memory, v.rows));
  ASSERT_TRUE(t.metrics.tunedRows.has_value()) << t.metrics.toJson().dump(2);
  EXPECT_EQ(*t.metrics.tunedRows, v.rows / 4);
  ASSERT_TRUE(t.accepted) << t.metrics.toJson().dump(2);

  VariantKey key{static_cast<int32_t>(v.dtype), 0, v.rows, v.cols};
  key.options = kernels::weightBiasOptions(true, false);
  const Plan plan = makePlan(t.family, key, t.paramsJson, t.kernelName, t.cubin, 0);
  EXPECT_EQ(servesAllRows(rmsNormSpec(true), plan, v.dtype, v.rows, v.cols), "");
}

TEST(RowSubsetGpuTest, GivenTheVariantsRooflineWhenTunedOnASubsetThenTheSearchComparesTimesOfTheSameRows) {
  REQUIRE_CUDA();
  const kernels::SoftmaxVariant v{DType::Float32, 8192, 4096};
  const int64_t tunedRows = v.rows / 4;
  // A planted roofline for the full variant: 2 x 0.9 x ATen's time on the
  // tuned rows, which every correct candidate reaches on the tuned rows; on
  // all rows (4 x its time) only one twice as fast as ATen would.
  const at::Tensor subset = at::randn({tunedRows, v.cols}, at::TensorOptions().device(at::kCUDA, 0));
  const double atenSubsetUs =
      benchmarkOne([&] { (void)at::cuda::_softmax(subset, -1, false); }, 0).median;
  TargetBudget budget;
  budget.rooflineSecondsPerCall = 2 * 0.9 * atenSubsetUs * 1e-6;
  TargetClock clock(budget);
  TunerOptions options = quarterCap(memoryOf(12, v.cols, v.dtype), v.rows);
  options.clock = &clock;

  const TuneOutcome t = tuneSoftmax(v, 0, options);
  ASSERT_TRUE(t.metrics.tunedRows && t.metrics.target && t.metrics.search) << t.metrics.toJson().dump(2);
  EXPECT_EQ(*t.metrics.tunedRows, tunedRows);
  EXPECT_NE(t.metrics.search->stop, SearchStop::GoodEnough) << t.metrics.toJson().dump(2);
  EXPECT_NE(t.metrics.target->at("stop"), "near_roofline");
  ASSERT_TRUE(t.accepted) << t.metrics.toJson().dump(2);
  // The target's best time is the variant's: the accepted (best) candidate's
  // tuned-rows time scaled to all rows.
  EXPECT_NEAR(t.metrics.target->at("bestUs").get<double>(), t.metrics.kernel->kernelUs * 4,
              1e-9 * t.metrics.kernel->kernelUs);
}

// Note [A harness on fewer rows]: fp32 argmax over dim 1 of [64, 512, 1024], whose 64 outer rows (2 tiles of
// 512 positions each at the widest point) cannot fill the GPU on fewer, under a cap that holds its timed calls on
// all rows and the harness on 8: tuned so, and the plan (made for the variant) gives ATen's indices everywhere.
TEST(RowSubsetGpuTest, GivenAMiddleDimReductionWhoseHarnessOverrunsTheCapWhenTunedThenTheHarnessRunsOnFewerRows) {
  REQUIRE_CUDA();
  const kernels::ReduceDimVariant v{DType::Float32, 64, 512, 1024, kernels::ReduceOp::Argmax};
  ASSERT_TRUE(kernels::ReduceDimFamily::guardVariant(v));
  const int64_t cols = v.reduced * v.inner;
  TuningMemory memory = memoryOf(12, cols, v.dtype);
  memory.timedBytesPerRow = 7 * cols * 4;
  TunerOptions o;
  o.memoryCapBytes = memory.bytes(8) + v.outer * memory.timedBytesPerRow;
  o.minSpeedup = 0.5;
  o.searchEvaluations = 8;
  ASSERT_FALSE(tuningRowCount(v.outer, v.outer, memory, o.memoryCapBytes).has_value());

  const TuneOutcome t = tuneReduceDim(v, 0, o);
  ASSERT_TRUE(t.metrics.harnessRows.has_value()) << t.metrics.toJson().dump(2);
  EXPECT_EQ(*t.metrics.harnessRows, 8);
  EXPECT_EQ(t.metrics.toJson().at("harnessRows"), 8);
  EXPECT_FALSE(t.metrics.tunedRows.has_value());  // timed on all 64 outer rows
  ASSERT_TRUE(t.accepted) << t.metrics.toJson().dump(2);

  const VariantKey key = kernels::reduceDimKeyOf(v, 0);
  const Plan plan = makePlan(t.family, key, t.paramsJson, t.kernelName, t.cubin, 0);
  at::Tensor in;
  std::vector<at::Tensor> outs;
  EXPECT_EQ(servesAllRows(reduceDimSpec(v.op, v.inner), plan, v.dtype, v.outer, cols, &in, &outs), "");
  ASSERT_EQ(outs.size(), 1u);
  // Every outer row's indices are ATen's, those past the harness's rows included.
  const at::Tensor ref = atenReduceMiddleDim(in, v.op, v.inner);
  EXPECT_TRUE(at::equal(outs[0].reshape(ref.sizes()), ref));
}

TEST(RowSubsetGpuTest, GivenCapUnderTheRowsThatFillTheGpuWhenTunedThenRefusedNamingTheFewestRows) {
  REQUIRE_CUDA();
  const kernels::SoftmaxVariant v{DType::Float32, 8192, 4096};
  const TuningMemory memory = memoryOf(12, v.cols, v.dtype);
  const int64_t fill = fillRowsFor<SoftmaxFamily>(v);
  ASSERT_LT(fill, v.rows);
  TunerOptions o;
  o.memoryCapBytes = memory.bytes(fill) - 1;
  try {
    (void)tuneSoftmax(v, 0, o);
    FAIL() << "a variant whose fewest rows do not fit the cap was tuned";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("on its fewest rows (" + std::to_string(fill) + ", enough to fill the GPU)"),
              std::string::npos)
        << what;
  }
}

}  // namespace
}  // namespace hotkernel
