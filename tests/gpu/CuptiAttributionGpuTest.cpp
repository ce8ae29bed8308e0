// GPU time attributed with the real CUPTI source (Note [GPU time from CUPTI]):
// the recorder with p = 1 and CUPTI's activity records, then ops of known
// device time: each op's GPU time in the profile is its own kernels' (a cuBLAS
// matmul launched through the driver API, ATen's softmax through the runtime),
// bounded by the wall time of its loop. Own binary: the recorder takes one
// source per process. Label `gpu`; skips without a CUDA device.

#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>

#include <chrono>
#include <functional>
#include <fstream>

#include "hotkernel/interpose/Recorder.h"
#include "hotkernel/runtime/CuptiActivitySource.h"

namespace hotkernel {
namespace {

double wallNs(const std::function<void()>& body) {
  at::cuda::device_synchronize();
  const auto t0 = std::chrono::steady_clock::now();
  body();
  at::cuda::device_synchronize();
  return std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
}

const nlohmann::json* findOp(const nlohmann::json& profile, const std::string& op) {
  for (const auto& e : profile["ops"]) {
    if (e["op"] == op) return &e;
  }
  return nullptr;
}

TEST(CuptiAttributionGpuTest, GivenCuptiWhenCudaOpsRunThenEachOpGetsTheDeviceTimeOfItsOwnKernels) {
  if (!at::cuda::is_available() || at::cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device";
  Recorder& r = Recorder::instance();
  r.start(1.0, /*hotCalls=*/int64_t{1} << 40, [](const std::string&, const VariantKey&) {});
  ASSERT_TRUE(r.attributeGpuTime(makeCuptiActivitySource(), Recorder::GpuTimeStart::AtFirstCudaOp));

  const auto cuda = at::TensorOptions().device(at::kCUDA).dtype(at::kFloat);
  const at::Tensor a = at::randn({4096, 4096}, cuda);
  const at::Tensor x = at::randn({4096, 32000}, cuda);
  (void)at::mm(a, a);  // the first sampled op with a CUDA input starts the source
  // The softmax's first call loads its kernel (CUDA's lazy module loading) and allocates its output: outside
  // the timed loop, which must be device-bound.
  (void)at::_softmax(x, -1, false);
  const nlohmann::json early = r.profile();
  ASSERT_TRUE(r.gpuAttributing()) << early["gpu_time"].dump();

  constexpr int kMm = 20;
  constexpr int kSoftmax = 50;
  const double mmWall = wallNs([&] {
    for (int i = 0; i < kMm; ++i) (void)at::mm(a, a);
  });
  const double softmaxWall = wallNs([&] {
    for (int i = 0; i < kSoftmax; ++i) (void)at::_softmax(x, -1, false);
  });

  const std::string path = ::testing::TempDir() + "/hk-cupti-profile.json";
  ASSERT_TRUE(r.writeProfile(path));  // flushes CUPTI's buffers first
  std::ifstream f(path);
  const nlohmann::json p = nlohmann::json::parse(f);
  ASSERT_EQ(p["gpu_time"]["state"], "started") << p["gpu_time"].dump();
  EXPECT_EQ(p["gpu_time"]["dropped_records"], 0) << p["gpu_time"].dump();
  EXPECT_FALSE(p["gpu_time"].contains("taken_over")) << p["gpu_time"].dump();
  // Note [Launch API records only]: every sampled launch's API record comes, each with its correlation.
  EXPECT_GE(p["gpu_time"]["api_records"].get<int64_t>(), kMm + kSoftmax) << p["gpu_time"].dump();
  EXPECT_GE(p["gpu_time"]["correlations"].get<int64_t>(), kMm + kSoftmax) << p["gpu_time"].dump();
  const nlohmann::json* mm = findOp(p, "aten::mm");
  const nlohmann::json* softmax = findOp(p, "aten::_softmax");
  ASSERT_NE(mm, nullptr);
  ASSERT_NE(softmax, nullptr);
  // The warm-up matmul ran attributed too: kMm + 1 sampled calls.
  EXPECT_EQ((*mm)["gpu_sampled_calls"], kMm + 1);
  EXPECT_EQ((*softmax)["gpu_sampled_calls"], kSoftmax + 1);  // and the warm-up softmax
  const double mmNs = (*mm)["gpu_ns"].get<double>() * kMm / (kMm + 1);
  const double softmaxNs = (*softmax)["gpu_ns"].get<double>() * kSoftmax / (kSoftmax + 1);
  // Device-bound loops: the kernels fill most of the wall time and never exceed it.
  EXPECT_GT(mmNs, 0.5 * mmWall) << "mm: " << mmNs << " ns attributed, loop " << mmWall << " ns";
  EXPECT_LT(mmNs, 1.05 * mmWall) << "mm: " << mmNs << " ns attributed, loop " << mmWall << " ns";
  EXPECT_GT(softmaxNs, 0.5 * softmaxWall) << "softmax: " << softmaxNs << " ns, loop " << softmaxWall << " ns";
  EXPECT_LT(softmaxNs, 1.05 * softmaxWall) << "softmax: " << softmaxNs << " ns, loop " << softmaxWall << " ns";
  // The variant carries the same time as its op (one variant, no other caller of aten::_softmax here).
  bool sawVariant = false;
  for (const auto& v : p["variants"]) {
    if (v["op"] == "aten::_softmax" && v["rows"] == 4096 && v["cols"] == 32000) {
      EXPECT_EQ(v["gpu_ns"], (*softmax)["gpu_ns"]) << v.dump();
      sawVariant = true;
    }
  }
  EXPECT_TRUE(sawVariant);
  // randn's own kernels land on aten::randn's sampled calls (or the ops nested in it), never on mm or softmax.
  const int64_t kernelNs = p["gpu_time"]["kernel_ns"];
  EXPECT_LE(p["gpu_time"]["attributed_ns"].get<int64_t>(), kernelNs);
  EXPECT_GE(kernelNs, static_cast<int64_t>(mmNs + softmaxNs));
}

}  // namespace
}  // namespace hotkernel
