#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/Sleep.h>
#include <c10/cuda/CUDAGuard.h>

#include <vector>

#include "hotkernel/optimizer/Benchmark.h"

namespace hotkernel {
namespace {

// The benchmark method must time the work it is given: copying a buffer twice
// takes about twice as long as copying it once.
TEST(BenchmarkGpuTest, GivenWorkTwiceAsLongWhenComparedThenSpeedupIsAboutOneHalf) {
  if (!at::cuda::is_available() || at::cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device";
  at::Tensor src = at::randn({64 << 20}, at::kCUDA);  // 256 MiB, well past L2
  at::Tensor dst = at::empty_like(src);
  Comparison c = benchmarkInterleaved([&] { dst.copy_(src); },
                                      [&] {
                                        dst.copy_(src);
                                        dst.copy_(src);
                                      },
                                      0);
  EXPECT_GT(c.speedup.median, 0.4);
  EXPECT_LT(c.speedup.median, 0.6);
  EXPECT_LE(c.speedup.low, c.speedup.median);
  EXPECT_GE(c.speedup.high, c.speedup.median);
  // 2 x 256 MiB moved per copy: the time is physically plausible (< 10 TB/s).
  EXPECT_GT(c.baseline.median, 2.0 * 256 * 1048576 / 10e12 * 1e6);
  EXPECT_FALSE(c.clears(1.0));
}

// Note [The benchmark stream waits for its inputs]: inputs still being written
// on the caller's stream (a long sleep, then the fill) must be complete when
// the first timed or warm-up call reads them on the benchmark's own stream.
TEST(BenchmarkGpuTest, GivenInputsStillBeingWrittenOnTheCallersStreamWhenBenchmarkedThenEveryCallSeesThemWritten) {
  if (!at::cuda::is_available() || at::cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device";
  c10::cuda::CUDAStreamGuard callerGuard(at::cuda::getStreamFromPool(false, 0));
  at::Tensor x = at::zeros({1 << 16}, at::kCUDA);
  at::cuda::getCurrentCUDAStream().synchronize();
  at::cuda::sleep(int64_t{200} * 1000 * 1000);  // ~0.1 s at ~2 GHz, on the caller's stream
  x.fill_(7.0);                                 // queued behind the sleep
  std::vector<at::Tensor> seen;
  BenchmarkOptions options;
  options.pairs = 3;
  options.warmup = 1;
  benchmarkOne([&] { seen.push_back(x.clone()); }, 0, options);
  ASSERT_FALSE(seen.empty());
  for (size_t i = 0; i < seen.size(); ++i) {
    EXPECT_TRUE(at::all(seen[i] == 7.0).item<bool>()) << "call " << i << " read the input before it was written";
  }
}

}  // namespace
}  // namespace hotkernel
