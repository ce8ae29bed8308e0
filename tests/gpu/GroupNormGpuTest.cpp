// The group_norm family on the GPU: layer_norm.cu's group mode compiled with
// NVRTC for the device, every point of the family's space for diffusion-model
// shapes run through the five-stage harness against ATen's native_group_norm
// (out, mean and rstd of the input's dtype, with and without weight and bias,
// neighbour row counts that are no multiple of the groups), and the tuner on a
// Stable Diffusion UNet variant. Own binary: no override is installed, so
// at::cuda::native_group_norm is ATen's. No timing asserted: speed is the
// tuner's and bench/ops_bench.py's.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/ops/native_group_norm_cuda_dispatch.h>

#include <iostream>
#include <limits>

#include "hotkernel/kernels/FamilyDescriptor.h"
#include "hotkernel/kernels/GroupNormFamily.h"
#include "hotkernel/optimizer/GroupNormTuner.h"
#include "hotkernel/runtime/CudaDriver.h"
#include "hotkernel/runtime/Nvrtc.h"

namespace hotkernel {
namespace {

using kernels::DType;
using kernels::GroupNormFamily;
using kernels::GroupNormVariant;
using kernels::NormParams;

class GroupNormGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!at::cuda::is_available() || at::cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device";
    const DeviceInfo info = queryDevice(0);
    cc_ = info.ccMajor * 10 + info.ccMinor;
    arch_ = info.nvrtcArch();
  }
  // Every point of the family's space for `v` through the harness; returns how many passed.
  int harnessSpace(const GroupNormVariant& v, uint64_t seed) {
    const RowOpSpec spec = groupNormSpec(v.groups, v.hw, v.hasWeight, v.hasBias);
    int passed = 0;
    for (const NormParams& p : GroupNormFamily::parameterSpace(v, cc_)) {
      if (p.minComputeCapability() > cc_) continue;
      SCOPED_TRACE(p.describe());
      const NvrtcOutput built = compileToCubin(GroupNormFamily::source(), "layer_norm.cu", arch_,
                                               GroupNormFamily::compileOptions(v, p));
      const HarnessCandidate c = groupNormCandidate(v, p, built.cubin, /*colsSpecialized=*/true);
      HarnessOptions options;
      options.seed = seed;
      const HarnessReport report = runHarness(spec, c, v.dtype, v.rows, v.cols, 0, options);
      const StageResult* failure = report.failure();
      EXPECT_TRUE(report.passed) << (failure ? failure->detail : std::string("no stage"));
      passed += report.passed ? 1 : 0;
    }
    return passed;
  }
  int cc_ = 0;
  std::string arch_;
};

// Stable Diffusion's UNet (GroupNorm(32, 320) at 64 x 64, batch 2) in every dtype and every weight /
// bias combination in bfloat16; every point of the space passes the five stages.
TEST_F(GroupNormGpuTest, GivenTheUnetsFirstGroupNormWhenEveryPointIsHarnessedThenAllPass) {
  for (DType d : kernels::kAllDTypes) {
    EXPECT_GT(harnessSpace({d, 2 * 32, 10 * 4096, 32, 4096, true, true}, 11), 0) << kernels::dtypeName(d);
  }
  for (auto [w, b] : {std::pair{true, false}, std::pair{false, true}, std::pair{false, false}}) {
    EXPECT_GT(harnessSpace({DType::BFloat16, 2 * 32, 10 * 4096, 32, 4096, w, b}, 12), 0) << w << b;
  }
}

// Many short groups (1280 channels at 8 x 8, batch 8), a 7 x 7 map (vec 1 only), and a VAE decoder
// layer (512 channels at 128 x 128, batch 1: 32 rows of 262,144).
TEST_F(GroupNormGpuTest, GivenShortOddAndVeryLongGroupsWhenEveryPointIsHarnessedThenAllPass) {
  EXPECT_GT(harnessSpace({DType::Float16, 8 * 32, 40 * 64, 32, 64, true, true}, 21), 0);
  EXPECT_GT(harnessSpace({DType::BFloat16, 2 * 32, 10 * 49, 32, 49, true, true}, 22), 0);
  EXPECT_GT(harnessSpace({DType::BFloat16, 1 * 32, 16 * 16384, 32, 16384, true, true}, 23), 0);
}

// The statistics come back in the input's dtype, rounded as ATen rounds them: on an ordinary input
// every mean and rstd of a bfloat16 point equals ATen's bit for bit but where the two float32 values
// straddle a rounding boundary (a handful of rows at most).
TEST_F(GroupNormGpuTest, GivenABfloat16PlanWhenLaunchedThenItsStatisticsAreAtensRoundedValues) {
  const GroupNormVariant v{DType::BFloat16, 4 * 32, 10 * 1024, 32, 1024, true, true};
  const std::vector<NormParams> space = GroupNormFamily::parameterSpace(v, cc_);
  ASSERT_FALSE(space.empty());
  const NormParams p = space.back();
  const NvrtcOutput built =
      compileToCubin(GroupNormFamily::source(), "layer_norm.cu", arch_, GroupNormFamily::compileOptions(v, p));
  const Plan plan = kernels::groupNormDescriptor().makePlan(kernels::groupNormKeyOf(v, 0), p.toJson(), built.cubin, 0);
  const auto opts = at::TensorOptions().device(at::kCUDA).dtype(at::kBFloat16);
  at::Tensor x = (at::randn({4, 320, 32, 32}, at::kCUDA) * 3 + 1).to(at::kBFloat16);
  at::Tensor w = at::rand({320}, at::kCUDA).to(at::kBFloat16), b = at::rand({320}, at::kCUDA).to(at::kBFloat16);
  at::Tensor out = at::full_like(x, std::numeric_limits<float>::quiet_NaN());
  at::Tensor mean = at::full({4, 32}, std::numeric_limits<float>::quiet_NaN(), opts);
  at::Tensor rstd = at::full({4, 32}, std::numeric_limits<float>::quiet_NaN(), opts);
  ASSERT_EQ(plan.workspaceFloats, 0) << p.describe();
  ASSERT_TRUE(plan.launcher->launchArgs(KernelArgs()
                                            .pointer(x.const_data_ptr())
                                            .pointer(w.const_data_ptr())
                                            .pointer(b.const_data_ptr())
                                            .pointer(out.mutable_data_ptr())
                                            .pointer(mean.mutable_data_ptr())
                                            .pointer(rstd.mutable_data_ptr())
                                            .int64(v.rows)
                                            .int64(v.cols)
                                            .float32(GroupNormFamily::kernelEps(v.dtype, 1e-5))
                                            .pointer(nullptr)
                                            .pointer(nullptr),
                                        at::cuda::getCurrentCUDAStream().stream()));
  auto [refOut, refMean, refRstd] = at::cuda::native_group_norm(x, w, b, 4, 320, 1024, 32, 1e-5);
  ASSERT_EQ(refMean.scalar_type(), at::kBFloat16);
  const int64_t meanDiffer = (mean != refMean).sum().item<int64_t>();
  const int64_t rstdDiffer = (rstd != refRstd).sum().item<int64_t>();
  EXPECT_LE(meanDiffer, 4);
  EXPECT_LE(rstdDiffer, 4);
  // Where the statistics agree, the output is ATen's up to one bfloat16 unit (a float32 fma's last bit).
  const at::Tensor agree = ((mean == refMean) & (rstd == refRstd)).view({4 * 32, 1});
  const at::Tensor diff = (out.view({4 * 32, -1}).to(at::kFloat) - refOut.view({4 * 32, -1}).to(at::kFloat)).abs();
  const at::Tensor ulp = refOut.view({4 * 32, -1}).to(at::kFloat).abs().mul(1.0 / 128.0).clamp_min(1e-6);
  EXPECT_FALSE((diff.gt(ulp) & agree).any().item<bool>()) << "max |diff| " << diff.max().item<float>();
  std::cout << "[group_norm bf16 " << p.describe() << "] statistics differing from ATen's: mean " << meanDiffer
            << ", rstd " << rstdDiffer << " of 128\n";
}

// The tuner on the UNet's first group norm: candidates pass the harness and are timed against ATen.
TEST_F(GroupNormGpuTest, GivenTheUnetsGroupNormWhenTunedThenACorrectCandidateIsTimedAgainstAten) {
  const GroupNormVariant v{DType::Float16, 2 * 32, 10 * 4096, 32, 4096, true, true};
  const TuneOutcome outcome = tuneGroupNorm(v, 0);
  EXPECT_EQ(outcome.family, "group_norm");
  int timed = 0;
  for (const CandidateRecord& c : outcome.metrics.candidates) {
    if (c.speedup) ++timed;
  }
  EXPECT_GT(timed, 0);
  std::cout << "[group_norm tuner fp16 [64, 40960]] accepted " << outcome.accepted;
  if (outcome.metrics.kernel) {
    std::cout << " speedup " << outcome.metrics.kernel->speedup << " (" << outcome.metrics.kernel->kernelUs
              << " us vs ATen " << outcome.metrics.kernel->atenUs << " us) " << outcome.paramsJson.dump();
  }
  std::cout << "\n";
}

}  // namespace
}  // namespace hotkernel
