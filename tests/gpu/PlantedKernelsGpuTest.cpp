// The planted-bad-kernel suite: each broken candidate must be caught by a
// named stage of the five-stage harness; the correct control must pass.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>

#include <chrono>

#include "hotkernel/kernels/LayerNormFamily.h"
#include "hotkernel/kernels/RmsNormFamily.h"
#include "hotkernel/optimizer/Harness.h"
#include "hotkernel/optimizer/NormTuner.h"
#include "hotkernel/optimizer/SoftmaxTuner.h"
#include "hotkernel/runtime/CudaDriver.h"
#include "hotkernel/runtime/Nvrtc.h"

namespace hotkernel {
namespace {

// A plain float32 softmax, one 256-thread block per row, with hooks for the bugs.
const char* kPlanted = R"(
#ifndef LOAD
#define LOAD(v) (v)
#endif
#ifndef LIMIT
#define LIMIT cols
#endif
extern "C" __global__ void __launch_bounds__(256) planted(const float* in, float* out, long long rows, long long cols) {
  __shared__ float red[256];
  __shared__ float total;
  const long long row = blockIdx.x;
  if (row >= rows) return;
  const float* x = in + row * cols;
#ifdef ALIAS
  float* y = const_cast<float*>(x);
#else
  float* y = out + row * cols;
#endif
  const int t = threadIdx.x;
  float m = -__int_as_float(0x7f800000);
  for (long long c = t; c < cols; c += 256) m = fmaxf(m, LOAD(x[c]));
  red[t] = m;
  __syncthreads();
  for (int o = 128; o > 0; o >>= 1) {
    if (t < o) red[t] = fmaxf(red[t], red[t + o]);
    __syncthreads();
  }
  m = red[0];
  __syncthreads();
#ifdef HANG
  const long long start = clock64();
  while (clock64() - start < 8000000000LL) {}  // ~4 s at 2 GHz: "forever" for a 1 s watchdog
#endif
#ifdef ATOMIC_SUM
  if (t == 0) total = 0.0f;
  __syncthreads();
  for (long long c = t; c < cols; c += 256) atomicAdd(&total, expf(LOAD(x[c]) - m));
  __syncthreads();
  const float s = total;
#else
  float s = 0.0f;
  for (long long c = t; c < cols; c += 256) s += expf(LOAD(x[c]) - m);
  red[t] = s;
  __syncthreads();
  for (int o = 128; o > 0; o >>= 1) {
    if (t < o) red[t] += red[t + o];
    __syncthreads();
  }
  s = red[0];
  __syncthreads();
#endif
  for (long long c = t; c < LIMIT; c += 256) y[c] = expf(LOAD(x[c]) - m) / s;
}
)";

class PlantedKernelsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!at::cuda::is_available() || at::cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device";
  }
  static HarnessReport check(const std::vector<std::string>& defines, double watchdogSeconds = 10.0) {
    std::string cubin = compileToCubin(kPlanted, "planted.cu", queryDevice(0).nvrtcArch(), defines).cubin;
    HarnessCandidate c;
    c.cubin = cubin;
    c.kernelName = "planted";
    c.description = "planted";
    c.geometry = [](int64_t rows, int64_t) { return LaunchGeometry{static_cast<unsigned>(rows), 256, 0}; };
    c.acceptsShape = [](int64_t rows, int64_t cols) { return rows >= 1 && rows < 65536 && cols >= 1; };
    c.acceptsPointers = [](const void* in, const void* out) { return in && out && in != out; };
    c.alignment = 1;
    HarnessOptions o;
    o.watchdogSeconds = watchdogSeconds;
    return runHarness(softmaxSpec(), c, kernels::DType::Float32, 64, 1000, 0, o);
  }
  static std::string stageOf(const HarnessReport& r) {
    return r.failure() ? std::string(toString(r.failure()->stage)) + ": " + r.failure()->detail : "passed";
  }
};

TEST_F(PlantedKernelsTest, GivenCorrectControlKernelWhenCheckedThenAllFiveStagesPass) {
  HarnessReport r = check({});
  EXPECT_TRUE(r.passed) << stageOf(r);
  EXPECT_EQ(r.stages.size(), 5u);
}

TEST_F(PlantedKernelsTest, GivenKernelWrongOnlyOnNegatedInputsWhenCheckedThenStabilityStageCatchesIt) {
  HarnessReport r = check({"-DLOAD(v)=fmaxf((v),-3.0f)"});
  ASSERT_FALSE(r.passed);
  EXPECT_EQ(r.failure()->stage, HarnessStage::Stability) << stageOf(r);
  EXPECT_NE(r.failure()->detail.find("negated"), std::string::npos) << stageOf(r);
}

TEST_F(PlantedKernelsTest, GivenNondeterministicAtomicSumWhenCheckedThenDeterminismStageCatchesIt) {
  HarnessReport r = check({"-DATOMIC_SUM"});
  ASSERT_FALSE(r.passed);
  EXPECT_EQ(r.failure()->stage, HarnessStage::Determinism) << stageOf(r);
}

TEST_F(PlantedKernelsTest, GivenOutOfBoundsWriteInTheTailWhenCheckedThenSmokeStageCatchesIt) {
  HarnessReport r = check({"-DLIMIT=(cols+1)"});
  ASSERT_FALSE(r.passed);
  EXPECT_EQ(r.failure()->stage, HarnessStage::Smoke) << stageOf(r);
  EXPECT_NE(r.failure()->detail.find("past the end"), std::string::npos) << stageOf(r);
}

TEST_F(PlantedKernelsTest, GivenKernelWritingIntoItsInputWhenCheckedThenSmokeStageCatchesTheAlias) {
  HarnessReport r = check({"-DALIAS"});
  ASSERT_FALSE(r.passed);
  EXPECT_EQ(r.failure()->stage, HarnessStage::Smoke) << stageOf(r);
  EXPECT_NE(r.failure()->detail.find("modified its input"), std::string::npos) << stageOf(r);
}

TEST_F(PlantedKernelsTest, GivenKernelThatNeverFinishesWhenCheckedThenWatchdogStopsItInSmoke) {
  const auto t0 = std::chrono::steady_clock::now();
  HarnessReport r = check({"-DHANG"}, /*watchdogSeconds=*/1.0);
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_FALSE(r.passed);
  EXPECT_EQ(r.failure()->stage, HarnessStage::Smoke) << stageOf(r);
  EXPECT_NE(r.failure()->detail.find("watchdog"), std::string::npos) << stageOf(r);
  EXPECT_LT(waited, 8.0);
  // Let the planted kernel run out before the process tears its context down.
  at::cuda::device_synchronize();
}

// The harness in its general form (weights, eps and several outputs): the
// rms_norm template with the weight multiply removed must be caught although
// it computes rstd and normalizes correctly; the unmodified templates pass.
class PlantedNormKernelsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!at::cuda::is_available() || at::cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device";
  }
  static constexpr const char* kWeightMultiply = "return hk_to_float(w) * (r * x);";

  static HarnessReport checkRmsNorm(const std::string& source, kernels::DType dtype) {
    const kernels::RmsNormVariant v{dtype, 64, 4096, /*hasWeight=*/true};
    const kernels::NormParams p = kernels::RmsNormFamily::parameterSpace(v).front();
    const std::string cubin = compileToCubin(source, "rms_norm.cu", queryDevice(0).nvrtcArch(),
                                             kernels::RmsNormFamily::compileOptions(dtype, p, true))
                                  .cubin;
    return runHarness(rmsNormSpec(true), rmsNormCandidate(v, p, cubin, /*colsSpecialized=*/false), dtype, v.rows,
                      v.cols, 0);
  }
  static std::string stageOf(const HarnessReport& r) {
    return r.failure() ? std::string(toString(r.failure()->stage)) + ": " + r.failure()->detail : "passed";
  }
};

TEST_F(PlantedNormKernelsTest, GivenRmsNormTemplateWhenCheckedThenAllFiveStagesPass) {
  for (kernels::DType d : kernels::kAllDTypes) {
    HarnessReport r = checkRmsNorm(kernels::RmsNormFamily::source(), d);
    EXPECT_TRUE(r.passed) << kernels::dtypeName(d) << " " << stageOf(r);
    EXPECT_EQ(r.stages.size(), 5u);
  }
}

// Note [Specialized columns] in kernels/norm/rms_norm.cu: what the tuner
// compiles passes all five stages when the harness keeps to the variant's
// columns; run on other columns, the same cubin is wrong, and the sweep says so.
TEST_F(PlantedNormKernelsTest, GivenRmsNormCompiledForTheVariantsColumnsWhenCheckedThenPassesOnlyOnThoseColumns) {
  const kernels::RmsNormVariant v{kernels::DType::BFloat16, 64, 4096, /*hasWeight=*/true};
  for (const kernels::NormParams& p : {kernels::NormParams{512, 8, 0}, kernels::NormParams{256, 8, 2}}) {
    SCOPED_TRACE(p.describe());
    const std::string cubin = compileToCubin(kernels::RmsNormFamily::source(), "rms_norm.cu", queryDevice(0).nvrtcArch(),
                                             kernels::RmsNormFamily::compileOptions(v.dtype, p, true, v.cols))
                                  .cubin;
    const HarnessReport ok =
        runHarness(rmsNormSpec(true), rmsNormCandidate(v, p, cubin, /*colsSpecialized=*/true), v.dtype, v.rows, v.cols, 0);
    EXPECT_TRUE(ok.passed) << stageOf(ok);
    EXPECT_EQ(ok.stages.size(), 5u);
    const HarnessReport wrong =
        runHarness(rmsNormSpec(true), rmsNormCandidate(v, p, cubin, /*colsSpecialized=*/false), v.dtype, v.rows,
                   v.cols, 0);
    ASSERT_NE(wrong.failure(), nullptr);
    EXPECT_EQ(wrong.failure()->stage, HarnessStage::Sweep) << stageOf(wrong);
  }
}

TEST_F(PlantedNormKernelsTest, GivenRmsNormKernelThatIgnoresTheWeightWhenCheckedThenSmokeStageCatchesItInOut) {
  std::string source = kernels::RmsNormFamily::source();
  const size_t at = source.find(kWeightMultiply);
  ASSERT_NE(at, std::string::npos) << "the template no longer holds the weight multiply this test removes";
  source.replace(at, std::string(kWeightMultiply).size(), "return r * x;");
  HarnessReport r = checkRmsNorm(source, kernels::DType::BFloat16);
  ASSERT_FALSE(r.passed);
  EXPECT_EQ(r.failure()->stage, HarnessStage::Smoke) << stageOf(r);
  // rstd is right: the bad output is named.
  EXPECT_EQ(r.failure()->detail.rfind("out: ", 0), 0u) << stageOf(r);
}

TEST_F(PlantedNormKernelsTest, GivenLayerNormTemplateWithEveryArrayConfigurationWhenCheckedThenAllFiveStagesPass) {
  for (kernels::DType d : kernels::kAllDTypes) {
    for (auto [w, b] : std::vector<std::pair<bool, bool>>{{true, true}, {false, false}, {false, true}}) {
      const kernels::LayerNormVariant v{d, 64, 4096, w, b};
      const kernels::NormParams p = kernels::LayerNormFamily::parameterSpace(v).front();
      const std::string cubin =
          compileToCubin(kernels::LayerNormFamily::source(), "layer_norm.cu", queryDevice(0).nvrtcArch(),
                         kernels::LayerNormFamily::compileOptions(d, p, w, b))
              .cubin;
      HarnessReport r =
          runHarness(layerNormSpec(w, b), layerNormCandidate(v, p, cubin, /*colsSpecialized=*/false), d, v.rows,
                     v.cols, 0);
      EXPECT_TRUE(r.passed) << kernels::dtypeName(d) << " weight=" << w << " bias=" << b << " " << stageOf(r);
    }
  }
}

}  // namespace
}  // namespace hotkernel
