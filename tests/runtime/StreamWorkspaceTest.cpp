// StreamWorkspaces (Note [A persistent workspace per stream]) on CPU tensors:
// the pooling rules and the layout that keeps the counter at one place. The
// CUDA side (capture status, launches on two streams and in a graph) is in
// tests/gpu/CrossEntropyRuntimeGpuTest.cpp.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <algorithm>
#include <thread>
#include <vector>

#include "hotkernel/runtime/StreamWorkspace.h"
#include "hotkernel/runtime/Check.h"

namespace hotkernel {
namespace {

const at::TensorOptions kCpu = at::TensorOptions().device(at::kCPU);
const void* const kStreamA = reinterpret_cast<const void*>(0x1000);
const void* const kStreamB = reinterpret_cast<const void*>(0x2000);

const float* lastOf(const at::Tensor& t) { return t.const_data_ptr<float>() + t.numel() - 1; }

TEST(StreamWorkspaceTest, GivenARequestWhenAcquiredThenFloat32OfThatSizeWithItsLastFloatZero) {
  StreamWorkspaces pools;
  const at::Tensor w = pools.acquire(33, kCpu, kStreamA, false);
  EXPECT_EQ(w.numel(), 33);
  EXPECT_EQ(w.scalar_type(), at::kFloat);
  EXPECT_EQ(*lastOf(w), 0.0f);
  EXPECT_EQ(pools.pooledBuffers(), 1u);
  EXPECT_GE(pools.capacityOf(kCpu, kStreamA), 33);
}

TEST(StreamWorkspaceTest, GivenOneStreamWhenRowCountsDifferThenEveryViewEndsAtTheSameCounter) {
  StreamWorkspaces pools;
  at::Tensor big = pools.acquire(101, kCpu, kStreamA, false);
  // A launch for 100 rows writes its losses and leaves its counter at 0.
  big.narrow(0, 0, 100).fill_(7.5f);
  const at::Tensor small = pools.acquire(3, kCpu, kStreamA, false);
  EXPECT_EQ(lastOf(small), lastOf(big)) << "the counter moved with the row count";
  EXPECT_EQ(*lastOf(small), 0.0f) << "a smaller launch would read a loss as its counter";
  EXPECT_EQ(pools.pooledBuffers(), 1u);
}

TEST(StreamWorkspaceTest, GivenTwoStreamsWhenAcquiredThenEachHasItsOwnCounter) {
  StreamWorkspaces pools;
  const at::Tensor a = pools.acquire(9, kCpu, kStreamA, false);
  const at::Tensor b = pools.acquire(9, kCpu, kStreamB, false);
  EXPECT_NE(lastOf(a), lastOf(b));
  EXPECT_EQ(pools.pooledBuffers(), 2u);
  EXPECT_EQ(lastOf(pools.acquire(9, kCpu, kStreamA, false)), lastOf(a)) << "reused, not reallocated";
}

TEST(StreamWorkspaceTest, GivenALargerRequestWhenAcquiredThenTheBufferGrowsZeroedAtLeastTwofold) {
  StreamWorkspaces pools;
  at::Tensor first = pools.acquire(10, kCpu, kStreamA, false);
  const int64_t held = pools.capacityOf(kCpu, kStreamA);
  first.fill_(3.0f);  // garbage a grown buffer must not inherit
  const at::Tensor grown = pools.acquire(held + 1, kCpu, kStreamA, false);
  EXPECT_GE(pools.capacityOf(kCpu, kStreamA), 2 * held);
  EXPECT_EQ(*lastOf(grown), 0.0f);
  EXPECT_EQ(pools.pooledBuffers(), 1u);
  EXPECT_EQ(lastOf(pools.acquire(2, kCpu, kStreamA, false)), lastOf(grown));
}

TEST(StreamWorkspaceTest, GivenAGraphCaptureWhenAcquiredThenAFreshBufferOutsideThePool) {
  StreamWorkspaces pools;
  const at::Tensor pooled = pools.acquire(5, kCpu, kStreamA, false);
  const at::Tensor captured = pools.acquire(5, kCpu, kStreamA, true);
  EXPECT_NE(lastOf(captured), lastOf(pooled)) << "a graph would keep the pooled counter's address";
  EXPECT_EQ(*lastOf(captured), 0.0f);
  EXPECT_EQ(captured.numel(), 5);
  EXPECT_EQ(pools.pooledBuffers(), 1u);
  EXPECT_EQ(pools.acquire(5, kCpu, kStreamB, true).numel(), 5);
  EXPECT_EQ(pools.pooledBuffers(), 1u) << "capture created a pooled buffer";
}

TEST(StreamWorkspaceTest, GivenARequestAboveTheCapWhenAcquiredThenFreshAndNotPooled) {
  StreamWorkspaces pools;
  const int64_t n = StreamWorkspaces::kMaxPooledFloats + 1;
  const at::Tensor w = pools.acquire(n, kCpu, kStreamA, false);
  EXPECT_EQ(w.numel(), n);
  EXPECT_EQ(*lastOf(w), 0.0f);
  EXPECT_EQ(pools.pooledBuffers(), 0u);
  EXPECT_EQ(pools.acquire(StreamWorkspaces::kMaxPooledFloats, kCpu, kStreamA, false).numel(),
            StreamWorkspaces::kMaxPooledFloats);
  EXPECT_EQ(pools.capacityOf(kCpu, kStreamA), StreamWorkspaces::kMaxPooledFloats) << "capped, not doubled past it";
}

TEST(StreamWorkspaceTest, GivenNoFloatsWhenAcquiredThenAnError) {
  StreamWorkspaces pools;
  EXPECT_THROW(pools.acquire(0, kCpu, kStreamA, false), Error);
  EXPECT_THROW(pools.acquire(-4, kCpu, kStreamA, false), Error);
  EXPECT_EQ(pools.pooledBuffers(), 0u);
}

TEST(StreamWorkspaceTest, GivenACpuTensorWhenAcquiredLikeItThenPooledUnderTheNullStream) {
  StreamWorkspaces pools;
  const at::Tensor like = at::zeros({4, 4}, kCpu.dtype(at::kBFloat16));
  const at::Tensor w = pools.forLaunchLike(5, like);
  EXPECT_EQ(w.scalar_type(), at::kFloat);
  EXPECT_EQ(w.numel(), 5);
  EXPECT_EQ(*lastOf(w), 0.0f);
  EXPECT_EQ(pools.pooledBuffers(), 1u);
  EXPECT_EQ(lastOf(pools.acquire(3, kCpu, nullptr, false)), lastOf(w));
}

TEST(StreamWorkspaceTest, GivenACpuTensorWhenAcquiredOnAStreamThenTheStreamIsIgnoredAndTheNullStreamsBufferServes) {
  StreamWorkspaces pools;
  const at::Tensor like = at::zeros({4, 4}, kCpu.dtype(at::kHalf));
  const at::Tensor w = pools.forLaunchOn(7, like, const_cast<void*>(kStreamA));
  EXPECT_EQ(w.scalar_type(), at::kFloat);
  EXPECT_EQ(w.numel(), 7);
  EXPECT_EQ(*lastOf(w), 0.0f);
  EXPECT_EQ(pools.pooledBuffers(), 1u);
  EXPECT_EQ(pools.capacityOf(kCpu, kStreamA), 0) << "a CPU launch has no stream to key by";
  EXPECT_EQ(lastOf(pools.forLaunchLike(2, like)), lastOf(w));
}

TEST(StreamWorkspaceTest, GivenManyThreadsOnOneStreamWhenAcquiringThenOneBufferAndTheCounterStaysZero) {
  StreamWorkspaces pools;
  auto request = [](int thread, int k) { return int64_t{(k * (thread + 1) * 37) % 5000 + 1}; };
  int64_t largest = 0;
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i) {
    for (int k = 1; k < 200; ++k) largest = std::max(largest, request(i, k));
    threads.emplace_back([&pools, &request, i] {
      for (int k = 1; k < 200; ++k) {
        const at::Tensor w = pools.acquire(request(i, k), kCpu, kStreamA, false);
        EXPECT_EQ(w.numel(), request(i, k));
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(pools.pooledBuffers(), 1u);
  EXPECT_EQ(*lastOf(pools.acquire(1, kCpu, kStreamA, false)), 0.0f);
  EXPECT_GE(pools.capacityOf(kCpu, kStreamA), largest);
}

}  // namespace
}  // namespace hotkernel
