// The background optimizer's units of GPU work between two yield points are
// bounded (Note [Bounded units of background GPU work] in
// optimizer/WorkSlices.h): the harness and the benchmark on the variant
// bench/YieldLatencyBench.cpp tunes, bf16 [4096, 32000].
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/ops/_softmax_cuda_dispatch.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <vector>

#include "hotkernel/kernels/SoftmaxFamily.h"
#include "hotkernel/optimizer/Benchmark.h"
#include "hotkernel/optimizer/Harness.h"
#include "hotkernel/optimizer/SoftmaxTuner.h"
#include "hotkernel/runtime/Check.h"
#include "hotkernel/runtime/CudaDriver.h"
#include "hotkernel/runtime/CudaKernelLauncher.h"
#include "hotkernel/runtime/Nvrtc.h"

namespace hotkernel {
namespace {

using kernels::DType;
using kernels::SoftmaxFamily;

#define REQUIRE_CUDA_AND_NVRTC()                                                           \
  if (!at::cuda::is_available() || at::cuda::device_count() == 0 || !nvrtcAvailable()) { \
    GTEST_SKIP() << "no CUDA device";                                                      \
  }

// The longest unit the optimizer may enqueue between two yield points on an
// H200 (the yield latency target is 5 ms; the idle gate polls every 0.5 ms).
constexpr double kMaxUnitMs = 4.0;

const kernels::SoftmaxVariant kVariant{DType::BFloat16, 4096, 32000};

// At each yield point: the wall time since the previous one returned (the
// callers synchronize before a yield point, so it covers the unit's GPU
// time), and whether work of the caller's current stream (the harness's or
// the benchmark's) is still in flight. Stops (returns false) at call `stopAt`.
struct UnitRecorder {
  std::vector<double> unitsMs;
  int inFlight = 0;
  int calls = 0;
  int stopAt = -1;
  std::chrono::steady_clock::time_point last = std::chrono::steady_clock::now();

  std::function<bool()> yieldPoint() {
    return [this] {
      const auto now = std::chrono::steady_clock::now();
      unitsMs.push_back(std::chrono::duration<double, std::milli>(now - last).count());
      if (!at::cuda::getCurrentCUDAStream().query()) ++inFlight;
      ++calls;
      last = std::chrono::steady_clock::now();
      return stopAt < 0 || calls < stopAt;
    };
  }
  double maxMs() const { return unitsMs.empty() ? 0.0 : *std::max_element(unitsMs.begin(), unitsMs.end()); }
};

struct Compiled {
  kernels::SoftmaxParams params;
  std::string cubin;
};

Compiled compileStreamingPoint() {
  Compiled c;
  c.params = kernels::SoftmaxParams{512, 8, 0};  // streaming, 512 threads, vec 8
  if (!SoftmaxFamily::guardParams(kVariant, c.params)) c.params = SoftmaxFamily::parameterSpace(kVariant).front();
  c.cubin = compileToCubin(SoftmaxFamily::source(), "softmax.cu", queryDevice(0).nvrtcArch(),
                           SoftmaxFamily::compileOptions(kVariant.dtype, c.params))
                .cubin;
  return c;
}

std::string describe(const HarnessReport& r) {
  return r.failure() ? std::string(toString(r.failure()->stage)) + ": " + r.failure()->detail : std::string("passed");
}

TEST(HarnessYieldGpuTest, GivenALargeVariantWhenTheHarnessAndBenchmarkRunThenEveryUnitBetweenYieldPointsIsShort) {
  REQUIRE_CUDA_AND_NVRTC();
  const Compiled c = compileStreamingPoint();
  // A first run loads what it needs once (ATen's kernels are loaded lazily,
  // the generator initialized): the units measured are those of a warm process.
  ASSERT_TRUE(runHarness(softmaxSpec(), softmaxCandidate(kVariant.dtype, c.params, c.cubin), kVariant.dtype,
                         kVariant.rows, kVariant.cols, 0)
                  .passed);
  UnitRecorder harnessUnits;
  HarnessOptions ho;
  ho.yieldPoint = harnessUnits.yieldPoint();
  const HarnessReport r = runHarness(softmaxSpec(), softmaxCandidate(kVariant.dtype, c.params, c.cubin),
                                     kVariant.dtype, kVariant.rows, kVariant.cols, 0, ho);
  ASSERT_TRUE(r.passed) << describe(r);
  EXPECT_EQ(r.stages.size(), 5u);
  EXPECT_EQ(harnessUnits.inFlight, 0);
  // Smoke, 9 neighbours and 7 stability sets, each a few yield points, plus the determinism runs.
  EXPECT_GT(harnessUnits.calls, 60);
  harnessUnits.unitsMs.erase(harnessUnits.unitsMs.begin());  // setup before the first yield point
  RecordProperty("harness_units", harnessUnits.calls);
  RecordProperty("harness_max_unit_us", static_cast<int>(harnessUnits.maxMs() * 1000));
  EXPECT_LE(harnessUnits.maxMs(), kMaxUnitMs);

  // The benchmark: warm-up, estimate and timed pairs, one pair per unit.
  const at::Tensor in = at::rand({kVariant.rows, kVariant.cols}, at::device(at::kCUDA)).to(at::kBFloat16);
  const at::Tensor out = at::empty_like(in);
  const HarnessCandidate hc = softmaxCandidate(kVariant.dtype, c.params, c.cubin);
  std::shared_ptr<CudaKernelLauncher> launcher = CudaKernelLauncher::load(
      0, c.cubin, hc.kernelName, hc.geometry(kVariant.rows, kVariant.cols), hc.alignment, "yield test");
  UnitRecorder benchUnits;
  BenchmarkOptions bo;
  bo.pairs = 15;
  bo.beforePair = benchUnits.yieldPoint();
  const Comparison cmp = benchmarkInterleaved(
      [&] { (void)at::cuda::_softmax(in, -1, false); },
      [&] {
        HOTKERNEL_CHECK(launcher->launch({in.const_data_ptr(), out.mutable_data_ptr(), kVariant.rows, kVariant.cols},
                                         at::cuda::getCurrentCUDAStream().stream()),
                        "launch failed");
      },
      0, bo);
  EXPECT_GT(cmp.candidate.median, 0.0);
  EXPECT_EQ(benchUnits.inFlight, 0);
  EXPECT_EQ(benchUnits.calls, 3 + 1 + static_cast<int>(cmp.speedup.n));  // warm-up pairs, the estimate, the timed pairs
  benchUnits.unitsMs.erase(benchUnits.unitsMs.begin());
  RecordProperty("benchmark_max_unit_us", static_cast<int>(benchUnits.maxMs() * 1000));
  EXPECT_LE(benchUnits.maxMs(), kMaxUnitMs);
}

TEST(HarnessYieldGpuTest, GivenAYieldPointThatStopsMidRunWhenTheHarnessRunsThenTheRunIsAbandonedAsInterrupted) {
  REQUIRE_CUDA_AND_NVRTC();
  const Compiled c = compileStreamingPoint();
  const HarnessCandidate hc = softmaxCandidate(kVariant.dtype, c.params, c.cubin);
  UnitRecorder all;
  HarnessOptions ho;
  ho.yieldPoint = all.yieldPoint();
  ASSERT_TRUE(runHarness(softmaxSpec(), hc, kVariant.dtype, kVariant.rows, kVariant.cols, 0, ho).passed);
  for (int stopAt : {1, 3, all.calls / 2, all.calls}) {
    SCOPED_TRACE("stop at yield point " + std::to_string(stopAt) + " of " + std::to_string(all.calls));
    UnitRecorder stopping;
    stopping.stopAt = stopAt;
    ho.yieldPoint = stopping.yieldPoint();
    const HarnessReport r = runHarness(softmaxSpec(), hc, kVariant.dtype, kVariant.rows, kVariant.cols, 0, ho);
    EXPECT_FALSE(r.passed);
    ASSERT_NE(r.failure(), nullptr);
    EXPECT_EQ(r.failure()->detail, "interrupted");
    EXPECT_EQ(r.failure(), &r.stages.back());  // nothing after the interrupted stage
    EXPECT_EQ(stopping.calls, stopAt);         // no yield point (no GPU work) after the refusal
    EXPECT_EQ(stopping.inFlight, 0);
  }
}

TEST(HarnessYieldGpuTest, GivenABenchmarkYieldPointThatStopsWhenTimingThenItThrowsAndReturnsNoTiming) {
  REQUIRE_CUDA_AND_NVRTC();
  const at::Tensor in = at::rand({1024, 4096}, at::device(at::kCUDA)).to(at::kBFloat16);
  for (int stopAt : {1, 4, 6}) {  // a warm-up pair, the estimate, a timed pair
    UnitRecorder stopping;
    stopping.stopAt = stopAt;
    BenchmarkOptions bo;
    bo.beforePair = stopping.yieldPoint();
    EXPECT_THROW(benchmarkInterleaved([&] { (void)at::cuda::_softmax(in, -1, false); },
                                      [&] { (void)at::cuda::_softmax(in, -1, false); }, 0, bo),
                 Error)
        << stopAt;
    EXPECT_EQ(stopping.calls, stopAt);
  }
}

}  // namespace
}  // namespace hotkernel
