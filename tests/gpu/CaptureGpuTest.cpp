// The background optimizer pauses while another thread captures a CUDA graph
// (Note [Pausing during graph capture] in interpose/preload/CaptureTracker.h).
// This executable carries the shim's capture wrappers and exports them, so
// torch's capture calls (libtorch_cuda -> cudaStreamBeginCapture /
// cudaStreamEndCapture) go through them, as under LD_PRELOAD.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "hotkernel/runtime/CaptureSignal.h"
#include "hotkernel/runtime/IdleGate.h"
#include "hotkernel/optimizer/OptimizerWorker.h"

namespace hotkernel {
namespace {

#define REQUIRE_CUDA()                                              \
  if (!at::cuda::is_available() || at::cuda::device_count() == 0) { \
    GTEST_SKIP() << "no CUDA device";                               \
  }

bool waitFor(const std::atomic<bool>& flag, double seconds) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (!flag.load()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

TEST(CaptureGpuTest, GivenTorchCapturingAGraphOnAnotherThreadWhenTheWorkerWantsToRunThenItWaitsForTheCaptureToEnd) {
  REQUIRE_CUDA();
  ASSERT_TRUE(CaptureSignal::process().available()) << "the capture wrappers are not exported by this executable";
  ASSERT_EQ(CaptureSignal::process().capturesInProgress(), 0);
  IdleGate& gate = IdleGate::instance();
  const uint64_t capturePauses = gate.capturePauses();

  std::atomic<bool> begun{false}, captureFailed{false}, waitFailed{false};
  std::atomic<int64_t> endCalledNs{0}, workStartNs{0};
  std::atomic<int> capturesSeenDuring{-1}, capturesAtWorkStart{-1};
  at::cuda::CUDAGraph graph;
  at::Tensor x, y;

  // The optimizer's side: the job waits for the gate as Engine::waitToStart
  // does, then runs GPU work the way the optimizer does (relaxed capture
  // mode, a stream of its own).
  OptimizerWorker worker([&](const OptimizerJob&) {
    IdleGate::ScopedOptimizerThread mark;
    if (!gate.waitUntilIdle(1.0, nullptr, 30.0, /*starting=*/true)) {
      waitFailed = true;
      return;
    }
    workStartNs = IdleGate::nowNs();
    capturesAtWorkStart = CaptureSignal::process().capturesInProgress();
    c10::cuda::CUDAStreamCaptureModeGuard relaxed(cudaStreamCaptureModeRelaxed);
    at::cuda::CUDAStream own = at::cuda::getStreamFromPool(false, 0);
    c10::cuda::CUDAStreamGuard guard(own);
    const double s = at::rand({1 << 20}, at::device(at::kCUDA)).sum().item<double>();
    EXPECT_GT(s, 0.0);
  });

  std::thread capturer([&] {
    try {
      c10::cuda::CUDAGuard device(0);
      at::cuda::CUDAStream side = at::cuda::getStreamFromPool(false, 0);
      c10::cuda::CUDAStreamGuard guard(side);
      x = at::ones({1024}, at::device(at::kCUDA));
      y = x * 2;  // warm-up on the capture stream
      side.synchronize();
      graph.capture_begin();  // global mode, as torch.cuda.graph
      y = x * 3;
      begun = true;
      // Hold the capture while the worker wants to run.
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      capturesSeenDuring = CaptureSignal::process().capturesInProgress();
      endCalledNs = IdleGate::nowNs();
      graph.capture_end();
    } catch (const std::exception& e) {
      ADD_FAILURE() << "capture failed: " << e.what();
      captureFailed = true;
      begun = true;
    }
  });
  const bool started = waitFor(begun, 30.0);
  EXPECT_TRUE(started) << "the capture did not begin";
  if (started) {
    EXPECT_EQ(CaptureSignal::process().capturesInProgress(), 1);
    EXPECT_TRUE(worker.enqueue(OptimizerJob{"aten::_softmax", VariantKey{0, 0, 1, 1}}));
  }
  capturer.join();  // joined on every path
  ASSERT_TRUE(started);
  ASSERT_TRUE(worker.waitIdle(60.0));
  ASSERT_FALSE(captureFailed.load());
  EXPECT_FALSE(waitFailed.load());
  EXPECT_EQ(capturesSeenDuring.load(), 1);
  EXPECT_EQ(capturesAtWorkStart.load(), 0);
  EXPECT_GE(workStartNs.load(), endCalledNs.load());  // no GPU work of the worker during the capture
  EXPECT_GE(gate.capturePauses(), capturePauses + 1);
  EXPECT_EQ(CaptureSignal::process().capturesInProgress(), 0);
  EXPECT_EQ(worker.jobsFailed(), 0u);

  // The capture was not disturbed: the graph replays what was captured.
  x.fill_(5.0);
  graph.replay();
  at::cuda::getCurrentCUDAStream().synchronize();
  EXPECT_TRUE(at::allclose(y.cpu(), at::full({1024}, 15.0)));
}

TEST(CaptureGpuTest, GivenNoCaptureWhenTheWorkerWantsToRunThenItStartsAtOnce) {
  REQUIRE_CUDA();
  ASSERT_EQ(CaptureSignal::process().capturesInProgress(), 0);
  const uint64_t pauses = IdleGate::instance().pauses();
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_TRUE(IdleGate::instance().waitUntilIdle(1.0, nullptr, 1.0, /*starting=*/true));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(50));
  EXPECT_EQ(IdleGate::instance().pauses(), pauses);
}

}  // namespace
}  // namespace hotkernel
