#include "hotkernel/optimizer/SoftmaxTuner.h"

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAGeneratorImpl.h>
#include <ATen/ops/_softmax_cuda_dispatch.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAGraphsC10Utils.h>
#include <tbb/parallel_for.h>

#include <chrono>
#include <cmath>
#include <limits>
#include <random>

#include "hotkernel/optimizer/Benchmark.h"
#include "hotkernel/optimizer/PlanFactory.h"
#include "hotkernel/runtime/Check.h"
#include "hotkernel/runtime/CudaDriver.h"
#include "hotkernel/runtime/Logging.h"
#include "hotkernel/runtime/Nvrtc.h"

namespace hotkernel {
namespace {

using kernels::DType;
using kernels::SoftmaxFamily;
using kernels::SoftmaxParams;
using kernels::SoftmaxVariant;

at::ScalarType scalarType(DType d) {
  switch (d) {
    case DType::Float32:
      return at::kFloat;
    case DType::Float16:
      return at::kHalf;
    case DType::BFloat16:
      return at::kBFloat16;
  }
  HOTKERNEL_INTERNAL_ASSERT(false, "unknown dtype");
  return at::kFloat;
}

struct Compiled {
  SoftmaxParams params;
  std::string cubin;
  std::string error;
  double seconds = 0;
};

// Max |out - ref| over elements, with NaN positions required to match
// (a NaN where the reference has none, or the reverse, is +inf error).
double maxAbsError(const at::Tensor& out, const at::Tensor& ref) {
  at::Tensor o = out.to(at::kFloat), r = ref.to(at::kFloat);
  if (!at::equal(o.isnan(), r.isnan())) return std::numeric_limits<double>::infinity();
  at::Tensor diff = (at::nan_to_num(o, 0.0) - at::nan_to_num(r, 0.0)).abs();
  return diff.numel() ? diff.max().item<double>() : 0.0;
}

}  // namespace

TuneOutcome tuneSoftmax(const SoftmaxVariant& v, int device, const TunerOptions& options) {
  HOTKERNEL_CHECK(SoftmaxFamily::guardVariant(v), "softmax family cannot serve this variant");
  HOTKERNEL_CHECK(nvrtcAvailable(), "NVRTC is unavailable");
  const DeviceInfo info = queryDevice(device);
  const std::string arch = info.nvrtcArch();
  c10::cuda::CUDAGuard deviceGuard(static_cast<c10::DeviceIndex>(device));
  // Never invalidate another thread's graph capture (Note in DESIGN: capture safety).
  c10::cuda::CUDAStreamCaptureModeGuard captureGuard(cudaStreamCaptureModeRelaxed);
  at::cuda::CUDAStream stream = at::cuda::getStreamFromPool(false, device);
  c10::cuda::CUDAStreamGuard streamGuard(stream);

  TuneOutcome outcome;
  outcome.arch = arch;
  nlohmann::json candidatesLog = nlohmann::json::array();

  // 1. Compile every parameter point in parallel on CPU threads.
  std::vector<SoftmaxParams> points = SoftmaxFamily::parameterSpace(v);
  std::vector<Compiled> compiled(points.size());
  tbb::parallel_for(size_t(0), points.size(), [&](size_t i) {
    compiled[i].params = points[i];
    auto t0 = std::chrono::steady_clock::now();
    try {
      compiled[i].cubin = compileToCubin(SoftmaxFamily::source(), "softmax_lastdim.cu", arch,
                                         SoftmaxFamily::compileOptions(v.dtype, points[i]))
                              .cubin;
    } catch (const std::exception& e) {
      compiled[i].error = e.what();
    }
    compiled[i].seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  });

  // 2. Fresh random inputs: seed recorded, never fixed.
  const uint64_t seed = std::random_device{}() ^ (static_cast<uint64_t>(std::random_device{}()) << 32);
  at::Generator gen = at::cuda::detail::getDefaultCUDAGenerator(device).clone();
  gen.set_current_seed(seed);
  const auto opts = at::TensorOptions().dtype(scalarType(v.dtype)).device(at::kCUDA, device);
  at::Tensor x = at::randn({v.rows, v.cols}, gen, opts.dtype(at::kFloat)).mul_(4.0).to(scalarType(v.dtype));
  // Numerical-stability inputs: negated and scaled up, and a large-magnitude shift.
  std::vector<at::Tensor> inputs = {x, x.neg().mul(3.0), x.mul(0.01), x.add(scalarType(v.dtype) == at::kHalf ? 1e4 : 1e5)};
  std::vector<at::Tensor> refs;
  for (const at::Tensor& in : inputs) refs.push_back(at::cuda::_softmax(in, -1, false));
  const double tol = SoftmaxFamily::tolerance(v.dtype, v.cols);

  double bestSpeedup = 0;
  for (const Compiled& c : compiled) {
    nlohmann::json log = {{"params", c.params.toJson()}, {"compileSeconds", c.seconds}};
    if (!c.error.empty()) {
      log["stage"] = "compile";
      log["error"] = c.error.substr(0, 2000);
      candidatesLog.push_back(log);
      continue;
    }
    try {
      VariantKey key{static_cast<int32_t>(v.dtype), device, v.rows, v.cols};
      Plan plan = makeSoftmaxPlan(key, c.params, c.cubin, device);
      double worst = 0;
      for (size_t i = 0; i < inputs.size(); ++i) {
        at::Tensor out = at::full_like(inputs[i], std::numeric_limits<float>::quiet_NaN());
        HOTKERNEL_CHECK(plan.launcher->launch({inputs[i].const_data_ptr(), out.mutable_data_ptr(), v.rows, v.cols},
                                              stream.stream()),
                        "launch failed");
        stream.synchronize();
        worst = std::max(worst, maxAbsError(out, refs[i]));
      }
      log["maxAbsError"] = std::isfinite(worst) ? nlohmann::json(worst) : nlohmann::json("inf");
      if (!(worst <= tol)) {
        log["stage"] = "correctness";
        candidatesLog.push_back(log);
        continue;
      }
      const at::Tensor& in = inputs[0];
      auto launcher = plan.launcher;
      Workload aten = [&] { (void)at::cuda::_softmax(in, -1, false); };
      // Both workloads run on the benchmark's current stream (the stream its
      // events are recorded on), like a dispatcher call would.
      Workload mine = [&, launcher] {
        at::Tensor out = at::empty_like(in);
        HOTKERNEL_CHECK(launcher->launch({in.const_data_ptr(), out.mutable_data_ptr(), v.rows, v.cols},
                                         at::cuda::getCurrentCUDAStream(device).stream()),
                        "launch failed");
      };
      BenchmarkOptions bo;
      bo.pairs = options.pairs;
      Comparison cmp = benchmarkInterleaved(aten, mine, device, bo);
      log["stage"] = "benchmark";
      log["atenUs"] = cmp.baseline.median;
      log["kernelUs"] = cmp.candidate.median;
      log["speedup"] = cmp.speedup.median;
      log["speedupCi"] = {cmp.speedup.low, cmp.speedup.high};
      log["pairs"] = cmp.speedup.n;
      const bool accept = cmp.clears(options.minSpeedup);
      log["accepted"] = accept;
      if (accept && cmp.speedup.median > bestSpeedup) {
        bestSpeedup = cmp.speedup.median;
        outcome.accepted = true;
        outcome.params = c.params;
        outcome.cubin = c.cubin;
        outcome.metrics = {{"speedup", cmp.speedup.median},
                           {"speedupCi", {cmp.speedup.low, cmp.speedup.high}},
                           {"atenUs", cmp.baseline.median},
                           {"kernelUs", cmp.candidate.median},
                           {"maxAbsError", worst},
                           {"tolerance", tol},
                           {"pairs", cmp.speedup.n}};
      }
    } catch (const std::exception& e) {
      log["stage"] = "run";
      log["error"] = std::string(e.what()).substr(0, 2000);
    }
    candidatesLog.push_back(log);
  }
  outcome.metrics["seed"] = std::to_string(seed);
  outcome.metrics["arch"] = arch;
  outcome.metrics["candidates"] = candidatesLog;
  return outcome;
}

}  // namespace hotkernel
