#include "hotkernel/optimizer/Benchmark.h"

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAGuard.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "hotkernel/runtime/Check.h"

namespace hotkernel {
namespace {

// Note [The benchmark stream waits for its inputs]
// The timed calls run on a fresh pool stream, but their inputs were made on
// the caller's current stream by kernels (randn, randint, fill) that may still
// be queued there. Without an edge between the two streams the first timed
// calls read half-written tensors: harmless for timing softmax, fatal for
// cross_entropy, whose ATen decomposition asserted on the device on garbage
// class targets ("t >= 0 && t < n_classes", nll_loss) on the H200 while the
// background optimizer tuned it, which loses the host's CUDA context.
at::cuda::CUDAStream benchmarkStream(int device) {
  const at::cuda::CUDAStream caller = at::cuda::getCurrentCUDAStream(static_cast<c10::DeviceIndex>(device));
  at::cuda::CUDAStream stream = at::cuda::getStreamFromPool(/*isHighPriority=*/false, device);
  at::cuda::CUDAEvent ready(cudaEventDisableTiming);
  ready.record(caller);
  ready.block(stream);
  return stream;
}

}  // namespace

Comparison benchmarkInterleaved(const Workload& baseline, const Workload& candidate, int device,
                                const BenchmarkOptions& options) {
  HOTKERNEL_CHECK(options.pairs >= 3, "need at least 3 pairs");
  c10::cuda::CUDAGuard deviceGuard(static_cast<c10::DeviceIndex>(device));
  at::cuda::CUDAStream stream = benchmarkStream(device);
  c10::cuda::CUDAStreamGuard streamGuard(stream);

  // Writing a buffer of twice the L2 size evicts the inputs of the last run.
  const int64_t l2 = at::cuda::getDeviceProperties(device)->l2CacheSize;
  at::Tensor flush = at::empty({std::max<int64_t>(2 * l2, 1 << 20)}, at::TensorOptions().dtype(at::kByte).device(at::kCUDA, device));

  // With a yield point, at most one pair (warm-up and estimate included) is
  // in flight when it is called (Note [Bounded units of background GPU work]).
  auto yieldBeforePair = [&] {
    if (!options.beforePair) return;
    stream.synchronize();
    HOTKERNEL_CHECK(options.beforePair(), "benchmark interrupted");
  };
  int candidateCalls = 0;
  auto beforeCandidate = [&](bool last) {
    if (options.beforeCandidate) options.beforeCandidate(candidateCalls, last);
    ++candidateCalls;
  };
  for (int i = 0; i < options.warmup; ++i) {
    yieldBeforePair();
    baseline();
    beforeCandidate(false);
    candidate();
  }
  yieldBeforePair();
  // Estimate one pair's cost to respect the time budget.
  at::cuda::CUDAEvent e0(cudaEventDefault), e1(cudaEventDefault);
  beforeCandidate(false);
  e0.record(stream);
  baseline();
  candidate();
  e1.record(stream);
  e1.synchronize();
  const double pairMs = std::max(1e-3, static_cast<double>(e0.elapsed_time(e1)));
  int pairs = options.pairs;
  const int affordable = static_cast<int>(options.maxSeconds * 1000.0 / (pairMs * 1.5));
  pairs = std::max(7, std::min(pairs, affordable));

  std::vector<std::unique_ptr<at::cuda::CUDAEvent>> events;
  events.reserve(4 * pairs);
  for (int i = 0; i < 4 * pairs; ++i) events.push_back(std::make_unique<at::cuda::CUDAEvent>(cudaEventDefault));
  auto timed = [&](const Workload& w, int slot, int round, bool isCandidate) {
    if (isCandidate) beforeCandidate(round == pairs - 1);
    flush.fill_(static_cast<uint8_t>(round & 0xff));
    events[2 * slot]->record(stream);
    w();
    events[2 * slot + 1]->record(stream);
  };
  for (int i = 0; i < pairs; ++i) {
    yieldBeforePair();
    // Slots: 2i is A, 2i+1 is B; the order alternates to cancel order effects.
    if (i % 2 == 0) {
      timed(baseline, 2 * i, i, false);
      timed(candidate, 2 * i + 1, i, true);
    } else {
      timed(candidate, 2 * i + 1, i, true);
      timed(baseline, 2 * i, i, false);
    }
  }
  stream.synchronize();
  std::vector<double> a(pairs), b(pairs);
  for (int i = 0; i < pairs; ++i) {
    a[i] = 1000.0 * events[4 * i]->elapsed_time(*events[4 * i + 1]);
    b[i] = 1000.0 * events[4 * i + 2]->elapsed_time(*events[4 * i + 3]);
  }
  return compareSamples(a, b);
}

MedianCi benchmarkOne(const Workload& work, int device, const BenchmarkOptions& options) {
  HOTKERNEL_CHECK(options.pairs >= 3, "need at least 3 runs");
  c10::cuda::CUDAGuard deviceGuard(static_cast<c10::DeviceIndex>(device));
  at::cuda::CUDAStream stream = benchmarkStream(device);
  c10::cuda::CUDAStreamGuard streamGuard(stream);
  const int64_t l2 = at::cuda::getDeviceProperties(device)->l2CacheSize;
  at::Tensor flush = at::empty({std::max<int64_t>(2 * l2, 1 << 20)}, at::TensorOptions().dtype(at::kByte).device(at::kCUDA, device));

  auto yieldBeforeRun = [&] {
    if (!options.beforePair) return;
    stream.synchronize();
    HOTKERNEL_CHECK(options.beforePair(), "benchmark interrupted");
  };
  for (int i = 0; i < options.warmup; ++i) {
    yieldBeforeRun();
    work();
  }
  yieldBeforeRun();
  at::cuda::CUDAEvent e0(cudaEventDefault), e1(cudaEventDefault);
  e0.record(stream);
  work();
  e1.record(stream);
  e1.synchronize();
  const double runMs = std::max(1e-3, static_cast<double>(e0.elapsed_time(e1)));
  const int affordable = static_cast<int>(options.maxSeconds * 1000.0 / (runMs * 1.5));
  const int runs = std::max(7, std::min(options.pairs, affordable));

  std::vector<std::unique_ptr<at::cuda::CUDAEvent>> events;
  events.reserve(2 * runs);
  for (int i = 0; i < 2 * runs; ++i) events.push_back(std::make_unique<at::cuda::CUDAEvent>(cudaEventDefault));
  for (int i = 0; i < runs; ++i) {
    yieldBeforeRun();
    flush.fill_(static_cast<uint8_t>(i & 0xff));
    events[2 * i]->record(stream);
    work();
    events[2 * i + 1]->record(stream);
  }
  stream.synchronize();
  std::vector<double> us(runs);
  for (int i = 0; i < runs; ++i) us[i] = 1000.0 * events[2 * i]->elapsed_time(*events[2 * i + 1]);
  return medianWithCi(us);
}

}  // namespace hotkernel
