#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>

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

}  // namespace
}  // namespace hotkernel
