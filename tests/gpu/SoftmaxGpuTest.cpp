#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAGraph.h>
#include <ATen/ops/_log_softmax_cuda_dispatch.h>
#include <ATen/ops/_softmax_cuda_dispatch.h>
#include <c10/cuda/CUDAGuard.h>
#include <tbb/parallel_for.h>

#include "SoftmaxOverride.h"
#include "hotkernel/interpose/ServedOps.h"
#include "hotkernel/kernels/FamilyDescriptor.h"
#include "hotkernel/kernels/SoftmaxFamily.h"
#include "hotkernel/optimizer/Benchmark.h"
#include "hotkernel/optimizer/Harness.h"
#include "hotkernel/optimizer/PlanFactory.h"
#include "hotkernel/optimizer/SoftmaxTuner.h"
#include "hotkernel/runtime/CudaDriver.h"
#include "hotkernel/runtime/CudaKernelLauncher.h"
#include "hotkernel/runtime/Nvrtc.h"

namespace hotkernel {
namespace {

using kernels::DType;
using kernels::SoftmaxFamily;

#define REQUIRE_CUDA()                                                   \
  if (!at::cuda::is_available() || at::cuda::device_count() == 0) {      \
    GTEST_SKIP() << "no CUDA device";                                     \
  }

at::ScalarType scalar(DType d) {
  return d == DType::Float32 ? at::kFloat : d == DType::Float16 ? at::kHalf : at::kBFloat16;
}

double maxErr(const at::Tensor& a, const at::Tensor& b) {
  return (a.to(at::kDouble) - b.to(at::kDouble)).abs().max().item<double>();
}

// Every parameter point the family offers on this GPU (cluster points
// included on sm_90+), for odd and extreme sizes in every dtype, against the
// ATen kernel of `op`.
void expectEveryPointMatchesAten(kernels::SoftmaxOp op) {
  const DeviceInfo info = queryDevice(0);
  const std::string arch = info.nvrtcArch();
  const int cc = info.ccMajor * 10 + info.ccMinor;
  struct Case {
    DType dtype;
    int64_t rows, cols;
    kernels::SoftmaxParams params;
    std::string cubin, error;
  };
  std::vector<Case> cases;
  int clusterCases = 0, wideClusterCases = 0, splitStreamCases = 0;
  for (DType d : {DType::Float32, DType::Float16, DType::BFloat16}) {
    for (auto [rows, cols] : std::vector<std::pair<int64_t, int64_t>>{{1, 1},
                                                                      {7, 13},
                                                                      {3, 1000003},
                                                                      {1, 128256},
                                                                      {2, 128256},
                                                                      {33, 4097},
                                                                      {5, 40000},
                                                                      {257, 32000},
                                                                      {1000, 8}}) {
      kernels::SoftmaxVariant v{d, rows, cols};
      if (!SoftmaxFamily::guardVariant(v)) continue;
      for (const auto& p : SoftmaxFamily::parameterSpace(v, cc)) {
        cases.push_back(Case{d, rows, cols, p, "", ""});
        clusterCases += p.cluster > 1;
        wideClusterCases += p.cluster > 8;  // non-portable: the launcher's opt-in
      }
    }
  }
  // Split streaming (Note [Split streaming]) is offered for many long rows
  // only: every cluster size and both CTA sizes on odd sizes, empty slices
  // (8 columns over 4..16 CTAs) and a million-long row included.
  if (cc >= 90) {
    for (DType d : {DType::Float32, DType::Float16, DType::BFloat16}) {
      const int vec = static_cast<int>(16 / kernels::elementSize(d));
      for (auto [rows, cols] :
           std::vector<std::pair<int64_t, int64_t>>{{1, 8}, {7, 4104}, {3, 1000000}, {2, 128256}, {300, 65536}}) {
        for (int cluster : {2, 4, 8, 16}) {
          for (int threads : {512, 1024}) {
            const kernels::SoftmaxParams p{threads, vec, 0, 1, cluster};
            if (!SoftmaxFamily::guardParams({d, rows, cols}, p)) continue;
            cases.push_back(Case{d, rows, cols, p, "", ""});
            ++splitStreamCases;
          }
        }
      }
    }
  }
  ASSERT_FALSE(cases.empty());
  if (cc >= 90) EXPECT_GE(splitStreamCases, 100) << "split-streaming points went untested";
  if (cc >= 90) EXPECT_GT(clusterCases, 0) << "no cluster point was tested on an sm_90+ GPU";
  if (cc >= 90) EXPECT_GT(wideClusterCases, 0) << "no 16-CTA cluster point was tested on an sm_90+ GPU";
  tbb::parallel_for(size_t(0), cases.size(), [&](size_t i) {
    try {
      cases[i].cubin = compileToCubin(SoftmaxFamily::source(), "softmax.cu", arch,
                                      SoftmaxFamily::compileOptions(cases[i].dtype, cases[i].params, op))
                           .cubin;
    } catch (const std::exception& e) {
      cases[i].error = e.what();
    }
  });
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(kernels::softmaxOpName(op)) + " " + kernels::dtypeName(c.dtype) + " " +
                 std::to_string(c.rows) + "x" + std::to_string(c.cols) + " " + c.params.describe());
    ASSERT_TRUE(c.error.empty()) << c.error;
    VariantKey key{static_cast<int32_t>(c.dtype), 0, c.rows, c.cols};
    Plan plan = kernels::softmaxDescriptor(op).makePlan(key, c.params.toJson(), c.cubin, 0);
    at::Tensor x = (at::randn({c.rows, c.cols}, at::kCUDA) * 5).to(scalar(c.dtype));
    at::Tensor out = at::full_like(x, std::numeric_limits<float>::quiet_NaN());
    ASSERT_TRUE(plan.launcher->launch({x.const_data_ptr(), out.mutable_data_ptr(), c.rows, c.cols},
                                      at::cuda::getCurrentCUDAStream().stream()));
    // A fault poisons the context: name the case that caused it, then stop.
    try {
      at::cuda::getCurrentCUDAStream().synchronize();
    } catch (const std::exception& e) {
      FAIL() << "the kernel faulted: " << e.what();
    }
    ASSERT_FALSE(out.isnan().any().item<bool>());
    if (op == kernels::SoftmaxOp::Softmax) {
      EXPECT_LE(maxErr(out, at::cuda::_softmax(x, -1, false)), SoftmaxFamily::tolerance(c.dtype, c.cols));
    } else {
      const at::Tensor ref = at::cuda::_log_softmax(x, -1, false).to(at::kDouble);
      const SoftmaxFamily::Bound b = SoftmaxFamily::logSoftmaxTolerance(c.dtype);
      const at::Tensor excess = (out.to(at::kDouble) - ref).abs() - (ref.abs() * b.relative + b.absolute);
      EXPECT_LE(excess.max().item<double>(), 0.0);
    }
  }
}

TEST(SoftmaxGpuTest, GivenEveryParameterPointWhenRunOnOddSizesThenMatchesAten) {
  REQUIRE_CUDA();
  expectEveryPointMatchesAten(kernels::SoftmaxOp::Softmax);
}

TEST(SoftmaxGpuTest, GivenEveryParameterPointAsLogSoftmaxWhenRunOnOddSizesThenMatchesAten) {
  REQUIRE_CUDA();
  expectEveryPointMatchesAten(kernels::SoftmaxOp::LogSoftmax);
}

// Split rows and log_softmax pass all five stages (special values, sweep,
// determinism across the cluster's merge) on the harness.
TEST(SoftmaxGpuTest, GivenClusterAndLogPointsWhenRunThroughTheHarnessThenAllFiveStagesPass) {
  REQUIRE_CUDA();
  const DeviceInfo info = queryDevice(0);
  const bool clusters = info.ccMajor >= 9;
  struct Case {
    kernels::SoftmaxOp op;
    kernels::SoftmaxVariant v;
    kernels::SoftmaxParams p;
  };
  std::vector<Case> cases = {
      {kernels::SoftmaxOp::LogSoftmax, {DType::BFloat16, 64, 4096}, {512, 8, 1}},
      {kernels::SoftmaxOp::LogSoftmax, {DType::Float32, 33, 20000}, {1024, 4, 0}},
      {kernels::SoftmaxOp::LogSoftmax, {DType::Float16, 300, 64}, {128, 8, 1, 16}},
  };
  if (clusters) {
    cases.push_back({kernels::SoftmaxOp::Softmax, {DType::BFloat16, 3, 128256}, {1024, 8, 2, 1, 8}});
    cases.push_back({kernels::SoftmaxOp::Softmax, {DType::Float32, 5, 40000}, {1024, 4, 4, 1, 4}});
    cases.push_back({kernels::SoftmaxOp::LogSoftmax, {DType::BFloat16, 3, 128256}, {512, 8, 4, 1, 8}});
    cases.push_back({kernels::SoftmaxOp::LogSoftmax, {DType::Float16, 9, 30000}, {256, 8, 8, 1, 2}});
    // Non-portable clusters of 16 (Note [Decode clusters]), register- and
    // shared-memory-resident, at the decode shapes and an odd one.
    kernels::SoftmaxParams staged{256, 8, 4, 1, 16};
    staged.smem = true;
    cases.push_back({kernels::SoftmaxOp::Softmax, {DType::BFloat16, 32, 128256}, {256, 8, 4, 1, 16}});
    cases.push_back({kernels::SoftmaxOp::Softmax, {DType::BFloat16, 1, 128256}, staged});
    cases.push_back({kernels::SoftmaxOp::Softmax, {DType::Float32, 3, 100000}, {512, 4, 4, 1, 16}});
    cases.push_back({kernels::SoftmaxOp::LogSoftmax, {DType::BFloat16, 32, 128256}, {512, 8, 2, 1, 16}});
    // A tight staged slice (Note [Tight staged slices]): 13 items of 512 threads hold float32 rows of 400,000
    // columns in clusters of 16 (104 KB a CTA), here on a few rows.
    kernels::SoftmaxParams tight{512, 4, 13, 1, 16};
    tight.smem = true;
    cases.push_back({kernels::SoftmaxOp::Softmax, {DType::Float32, 3, 400000}, tight});
    cases.push_back({kernels::SoftmaxOp::LogSoftmax, {DType::Float32, 2, 400000}, tight});
    // Its pipelined twins (Note [Pipelined slices]): one cluster serves the harness's rows in turn.
    kernels::SoftmaxParams piped = tight;
    piped.clusterRows = 4;
    cases.push_back({kernels::SoftmaxOp::Softmax, {DType::Float32, 7, 400000}, piped});
    piped.clusterRows = 16;
    cases.push_back({kernels::SoftmaxOp::LogSoftmax, {DType::Float32, 5, 400000}, piped});
    // Split streaming (Note [Split streaming]).
    cases.push_back({kernels::SoftmaxOp::Softmax, {DType::BFloat16, 300, 65536}, {1024, 8, 0, 1, 4}});
    cases.push_back({kernels::SoftmaxOp::Softmax, {DType::Float16, 2, 128256}, {512, 8, 0, 1, 16}});
    cases.push_back({kernels::SoftmaxOp::LogSoftmax, {DType::Float32, 3, 100000}, {512, 4, 0, 1, 8}});
  }
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(kernels::softmaxOpName(c.op)) + " " + kernels::dtypeName(c.v.dtype) + " " +
                 std::to_string(c.v.rows) + "x" + std::to_string(c.v.cols) + " " + c.p.describe());
    ASSERT_TRUE(SoftmaxFamily::guardParams(c.v, c.p));
    const std::string cubin = compileToCubin(SoftmaxFamily::source(), "softmax.cu", info.nvrtcArch(),
                                             SoftmaxFamily::compileOptions(c.v.dtype, c.p, c.op))
                                  .cubin;
    const HarnessReport r = runHarness(softmaxSpec(c.op), softmaxCandidate(c.v.dtype, c.p, cubin), c.v.dtype,
                                       c.v.rows, c.v.cols, 0);
    EXPECT_TRUE(r.passed) << (r.failure() ? std::string(toString(r.failure()->stage)) + ": " + r.failure()->detail
                                          : std::string("?"));
    EXPECT_EQ(r.stages.size(), 5u);
  }
}

// The cluster kernel's rows after a cluster's first (a CTA barrier and a
// cluster barrier before the next row, the pushed pairs' double buffer by row
// parity): never run with the family's grid (a cluster a row), so here with
// grids of one, two and three clusters for 37 rows. Register-resident (16-bit:
// Note [Rescaled split softmax]; fp32), shared-memory-resident and split
// streaming points, softmax and log_softmax: each output is bitwise the
// one-cluster-a-row grid's, which matches ATen.
TEST(SoftmaxGpuTest, GivenClusterPointsWhenTheGridHoldsFewerClustersThanRowsThenClustersServeSeveralRows) {
  REQUIRE_CUDA();
  const DeviceInfo info = queryDevice(0);
  if (info.ccMajor < 9) GTEST_SKIP() << "thread-block clusters need sm_90";
  struct Case {
    kernels::SoftmaxOp op;
    DType dtype;
    kernels::SoftmaxParams p;
  };
  kernels::SoftmaxParams staged{256, 8, 4, 1, 4};
  staged.smem = true;
  const std::vector<Case> cases = {
      {kernels::SoftmaxOp::Softmax, DType::BFloat16, {256, 8, 2, 1, 8}},
      {kernels::SoftmaxOp::Softmax, DType::BFloat16, {256, 8, 1, 1, 16}},
      {kernels::SoftmaxOp::Softmax, DType::Float32, {256, 4, 4, 1, 8}},
      {kernels::SoftmaxOp::Softmax, DType::BFloat16, staged},
      {kernels::SoftmaxOp::Softmax, DType::BFloat16, {512, 8, 0, 1, 4}},
      {kernels::SoftmaxOp::LogSoftmax, DType::Float16, {256, 8, 2, 1, 8}},
  };
  const int64_t rows = 37, cols = 20000;
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(kernels::softmaxOpName(c.op)) + " " + kernels::dtypeName(c.dtype) + " " +
                 c.p.describe());
    const kernels::SoftmaxVariant v{c.dtype, rows, cols};
    ASSERT_TRUE(SoftmaxFamily::guardParams(v, c.p));
    const std::string cubin = compileToCubin(SoftmaxFamily::source(), "softmax.cu", info.nvrtcArch(),
                                             SoftmaxFamily::compileOptions(c.dtype, c.p, c.op))
                                  .cubin;
    const kernels::LaunchGeometry g = SoftmaxFamily::launchGeometry(v, c.p);
    const auto launcher =
        CudaKernelLauncher::load(0, cubin, SoftmaxFamily::kKernelName, LaunchGeometry{g.gridX, g.blockX, g.sharedBytes},
                                 SoftmaxFamily::requiredAlignment(c.dtype, c.p), c.p.describe());
    const at::Tensor x = (at::randn({rows, cols}, at::kCUDA) * 5).to(scalar(c.dtype));
    auto run = [&](unsigned clusters) {
      at::Tensor out = at::full_like(x, std::numeric_limits<float>::quiet_NaN());
      LaunchGeometry grid{g.gridX, g.blockX, g.sharedBytes};
      if (clusters > 0) grid.gridX = clusters * static_cast<unsigned>(c.p.cluster);
      EXPECT_TRUE(launcher->launchWith(RowKernelArgs{x.const_data_ptr(), out.mutable_data_ptr(), rows, cols},
                                       at::cuda::getCurrentCUDAStream().stream(), grid));
      at::cuda::getCurrentCUDAStream().synchronize();
      return out;
    };
    const at::Tensor full = run(0);
    ASSERT_FALSE(full.isnan().any().item<bool>());
    if (c.op == kernels::SoftmaxOp::Softmax) {
      EXPECT_LE(maxErr(full, at::cuda::_softmax(x, -1, false)), SoftmaxFamily::tolerance(c.dtype, cols));
    }
    for (unsigned clusters : {1u, 2u, 3u}) {
      const at::Tensor got = run(clusters);
      EXPECT_TRUE(got.equal(full)) << clusters << " clusters: max difference " << maxErr(got, full);
    }
  }
}

// Note [Pipelined slices]: a pipelined point computes what its staged twin computes, row by row, with each slot of
// the stage refilled with the next row during the current row's write pass; rows the grid gives a cluster in turn
// (4 and 16, and a last cluster with fewer), slices with slots past their end (which keep the first row's -inf),
// the widest stage (16 items, 128 KB), in place too, softmax and log_softmax: the staged twin's bits.
TEST(SoftmaxGpuTest, GivenAPipelinedPointWhenRunThenTheSameBitsAsItsStagedTwin) {
  REQUIRE_CUDA();
  const DeviceInfo info = queryDevice(0);
  if (info.ccMajor < 9) GTEST_SKIP() << "thread-block clusters need sm_90";
  struct Case {
    kernels::SoftmaxOp op;
    kernels::SoftmaxVariant v;
    kernels::SoftmaxParams staged;
  };
  kernels::SoftmaxParams tight{512, 4, 13, 1, 16};
  tight.smem = true;
  kernels::SoftmaxParams bf16{256, 8, 4, 1, 4};
  bf16.smem = true;
  kernels::SoftmaxParams wide{512, 4, 16, 1, 16};
  wide.smem = true;
  const std::vector<Case> cases = {
      {kernels::SoftmaxOp::Softmax, {DType::Float32, 37, 400000}, tight},
      {kernels::SoftmaxOp::LogSoftmax, {DType::Float32, 21, 399996}, tight},
      {kernels::SoftmaxOp::Softmax, {DType::BFloat16, 131, 20000}, bf16},
      {kernels::SoftmaxOp::LogSoftmax, {DType::BFloat16, 70, 32000}, bf16},
      {kernels::SoftmaxOp::Softmax, {DType::Float32, 19, 480000}, wide},
  };
  auto load = [&](const Case& c, const kernels::SoftmaxParams& p) {
    const std::string cubin = compileToCubin(SoftmaxFamily::source(), "softmax.cu", info.nvrtcArch(),
                                             SoftmaxFamily::compileOptions(c.v.dtype, p, c.op))
                                  .cubin;
    const kernels::LaunchGeometry g = SoftmaxFamily::launchGeometry(c.v, p);
    return CudaKernelLauncher::load(0, cubin, SoftmaxFamily::kKernelName,
                                    LaunchGeometry{g.gridX, g.blockX, g.sharedBytes},
                                    SoftmaxFamily::requiredAlignment(c.v.dtype, p), p.describe());
  };
  for (const Case& c : cases) {
    const at::Tensor x = (at::randn({c.v.rows, c.v.cols}, at::kCUDA) * 5).to(scalar(c.v.dtype));
    auto run = [&](const std::shared_ptr<CudaKernelLauncher>& launcher, const at::Tensor& in, at::Tensor out) {
      EXPECT_TRUE(launcher->launch(RowKernelArgs{in.const_data_ptr(), out.mutable_data_ptr(), c.v.rows, c.v.cols},
                                   at::cuda::getCurrentCUDAStream().stream()));
      at::cuda::getCurrentCUDAStream().synchronize();
      return out;
    };
    ASSERT_TRUE(SoftmaxFamily::guardParams(c.v, c.staged));
    const at::Tensor want = run(load(c, c.staged), x, at::full_like(x, std::numeric_limits<float>::quiet_NaN()));
    ASSERT_FALSE(want.isnan().any().item<bool>());
    const at::Tensor aten = c.op == kernels::SoftmaxOp::Softmax ? at::cuda::_softmax(x, -1, false)
                                                                : at::cuda::_log_softmax(x, -1, false);
    if (c.op == kernels::SoftmaxOp::Softmax) EXPECT_LE(maxErr(want, aten), SoftmaxFamily::tolerance(c.v.dtype, c.v.cols));
    for (int clusterRows : SoftmaxFamily::kPipelinedClusterRows) {
      kernels::SoftmaxParams piped = c.staged;
      piped.clusterRows = clusterRows;
      SCOPED_TRACE(std::string(kernels::softmaxOpName(c.op)) + " " + kernels::dtypeName(c.v.dtype) + " " +
                   std::to_string(c.v.rows) + "x" + std::to_string(c.v.cols) + " " + piped.describe());
      ASSERT_TRUE(SoftmaxFamily::guardParams(c.v, piped));
      const auto launcher = load(c, piped);
      const at::Tensor got = run(launcher, x, at::full_like(x, std::numeric_limits<float>::quiet_NaN()));
      EXPECT_TRUE(got.equal(want)) << "max difference " << maxErr(got, want);
      const at::Tensor inPlace = x.clone();
      run(launcher, inPlace, inPlace);
      EXPECT_TRUE(inPlace.equal(want)) << "in place: max difference " << maxErr(inPlace, want);
    }
  }
}

// A softmax kernel run as log_softmax (or the reverse) is caught by the harness.
TEST(SoftmaxGpuTest, GivenTheWrongOpsKernelWhenRunThroughTheHarnessThenSmokeFails) {
  REQUIRE_CUDA();
  const kernels::SoftmaxVariant v{DType::BFloat16, 64, 4096};
  const kernels::SoftmaxParams p{512, 8, 1};
  const std::string arch = queryDevice(0).nvrtcArch();
  const std::string softmaxCubin =
      compileToCubin(SoftmaxFamily::source(), "softmax.cu", arch, SoftmaxFamily::compileOptions(v.dtype, p)).cubin;
  const HarnessReport r = runHarness(softmaxSpec(kernels::SoftmaxOp::LogSoftmax),
                                     softmaxCandidate(v.dtype, p, softmaxCubin), v.dtype, v.rows, v.cols, 0);
  ASSERT_FALSE(r.passed);
  EXPECT_EQ(r.failure()->stage, HarnessStage::Smoke);
}

class SoftmaxCudaOverrideTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!at::cuda::is_available() || at::cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device";
    SoftmaxOverride::install(c10::DispatchKey::CUDA);
  }
};

TEST_F(SoftmaxCudaOverrideTest, GivenTunedVariantWhenCalledThroughDispatcherThenSwappedKernelRunsAndMatches) {
  const kernels::SoftmaxVariant v{DType::BFloat16, 4096, 32000};
  TuneOutcome t = tuneSoftmax(v, 0);
  ASSERT_TRUE(t.accepted) << t.metrics.toJson().dump(2);
  EXPECT_GT(t.metrics.kernel->speedupCi.low, 1.02);
  VariantKey key{static_cast<int32_t>(v.dtype), 0, v.rows, v.cols};
  plansOf(servedOp("aten::_softmax")).publish(kernels::softmaxDescriptor(kernels::SoftmaxOp::Softmax).makePlan(key, t.paramsJson, t.cubin, 0));

  at::Tensor x = at::randn({v.rows, v.cols}, at::kCUDA).to(at::kBFloat16);
  const uint64_t hits = hitsOf(servedOp("aten::_softmax"));
  at::Tensor y = at::softmax(x, -1);
  EXPECT_EQ(hitsOf(servedOp("aten::_softmax")), hits + 1);
  EXPECT_LE(maxErr(y, at::cuda::_softmax(x, -1, false)), SoftmaxFamily::tolerance(v.dtype, v.cols));

  // The tuner's claim holds when measured through the dispatcher.
  Comparison viaDispatcher = benchmarkInterleaved([&] { (void)at::cuda::_softmax(x, -1, false); },
                                                  [&] { (void)at::softmax(x, -1); }, 0);
  const double claimed = t.metrics.kernel->speedup;
  EXPECT_NEAR(viaDispatcher.speedup.median, claimed, 0.25 * claimed);
  EXPECT_GT(viaDispatcher.speedup.low, 1.0);

  // A miss (other shape) goes to ATen.
  at::Tensor z = at::randn({17, 300}, at::kCUDA).to(at::kBFloat16);
  const uint64_t misses = missesOf(servedOp("aten::_softmax"));
  at::Tensor w = at::softmax(z, -1);
  EXPECT_EQ(missesOf(servedOp("aten::_softmax")), misses + 1);
  EXPECT_EQ(maxErr(w, at::cuda::_softmax(z, -1, false)), 0.0);
}

TEST_F(SoftmaxCudaOverrideTest, GivenTunedLogSoftmaxVariantWhenCalledThroughDispatcherThenSwappedKernelRuns) {
  using Op = SoftmaxOverride::Op;
  SoftmaxOverride::install(c10::DispatchKey::CUDA, Op::LogSoftmax);
  const kernels::SoftmaxVariant v{DType::BFloat16, 4096, 32000};
  TuneOutcome t = tuneSoftmax(v, 0, {}, Op::LogSoftmax);
  ASSERT_TRUE(t.accepted) << t.metrics.toJson().dump(2);
  EXPECT_EQ(t.family, "log_softmax_lastdim");
  VariantKey key{static_cast<int32_t>(v.dtype), 0, v.rows, v.cols};
  plansOf(servedOp("aten::_log_softmax")).publish(makePlan(t.family, key, t.paramsJson, t.kernelName, t.cubin, 0));

  at::Tensor x = at::randn({v.rows, v.cols}, at::kCUDA).mul_(3).to(at::kBFloat16);
  const uint64_t hits = hitsOf(servedOp("aten::_log_softmax"));
  at::Tensor y = at::log_softmax(x, -1);
  EXPECT_EQ(hitsOf(servedOp("aten::_log_softmax")), hits + 1);
  const at::Tensor ref = at::cuda::_log_softmax(x, -1, false).to(at::kDouble);
  const SoftmaxFamily::Bound b = SoftmaxFamily::logSoftmaxTolerance(v.dtype);
  EXPECT_LE(((y.to(at::kDouble) - ref).abs() - (ref.abs() * b.relative + b.absolute)).max().item<double>(), 0.0);
  // softmax of the same shape still computes softmax (its own plan or ATen, never the log plan).
  at::Tensor z = at::softmax(x, -1);
  EXPECT_LE(maxErr(z, at::cuda::_softmax(x, -1, false)), SoftmaxFamily::tolerance(v.dtype, v.cols));
}

TEST_F(SoftmaxCudaOverrideTest, GivenPlanWhenCapturedInCudaGraphThenReplayMatchesAten) {
  const kernels::SoftmaxVariant v{DType::Float16, 512, 2048};
  auto params = SoftmaxFamily::parameterSpace(v).front();
  std::string cubin = compileToCubin(SoftmaxFamily::source(), "softmax.cu", queryDevice(0).nvrtcArch(),
                                     SoftmaxFamily::compileOptions(v.dtype, params))
                          .cubin;
  VariantKey key{static_cast<int32_t>(v.dtype), 0, v.rows, v.cols};
  plansOf(servedOp("aten::_softmax")).publish(kernels::softmaxDescriptor(kernels::SoftmaxOp::Softmax).makePlan(key, params.toJson(), cubin, 0));

  at::Tensor x = at::randn({v.rows, v.cols}, at::kCUDA).to(at::kHalf);
  at::cuda::CUDAStream side = at::cuda::getStreamFromPool();
  at::Tensor y;
  at::cuda::CUDAGraph graph;
  {
    c10::cuda::CUDAStreamGuard g(side);
    (void)at::softmax(x, -1);  // warm-up on the capture stream
    side.synchronize();
    const uint64_t hits = hitsOf(servedOp("aten::_softmax"));
    graph.capture_begin();
    y = at::softmax(x, -1);
    graph.capture_end();
    EXPECT_EQ(hitsOf(servedOp("aten::_softmax")), hits + 1);
  }
  x.copy_(at::randn_like(x));
  graph.replay();
  at::cuda::getCurrentCUDAStream().synchronize();
  side.synchronize();
  EXPECT_LE(maxErr(y, at::cuda::_softmax(x, -1, false)), SoftmaxFamily::tolerance(v.dtype, v.cols));
}

}  // namespace
}  // namespace hotkernel
