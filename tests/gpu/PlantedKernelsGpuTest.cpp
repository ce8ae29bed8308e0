// The planted-kernel suite (issue 17, "a harness that cannot be fooled"):
// each deliberately wrong kernel must be rejected by a named stage of the
// five-stage harness, or by the tuner's check of its timed launches, with a
// reason that says what was wrong; the correct controls pass; and after all
// of them this process still computes correctly. The sources are in
// PlantedKernels.h (compiled on CPU by CubinSectionsTest.cpp).
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/ops/_softmax_cuda_dispatch.h>
#include <c10/cuda/CUDAGuard.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>

#include "PlantedKernels.h"
#include "hotkernel/kernels/LayerNormFamily.h"
#include "hotkernel/kernels/RmsNormFamily.h"
#include "hotkernel/optimizer/CubinSections.h"
#include "hotkernel/optimizer/FamilyTuner.h"
#include "hotkernel/optimizer/Harness.h"
#include "hotkernel/optimizer/NormTuner.h"
#include "hotkernel/optimizer/SoftmaxTuner.h"
#include "hotkernel/runtime/CudaDriver.h"
#include "hotkernel/runtime/Nvrtc.h"

namespace hotkernel {
namespace {

constexpr int64_t kRows = 64, kCols = 1000;

std::string stageOf(const HarnessReport& r) {
  return r.failure() ? std::string(toString(r.failure()->stage)) + ": " + r.failure()->detail : "passed";
}

bool containsAny(const std::string& s, std::initializer_list<const char*> parts) {
  for (const char* p : parts) {
    if (s.find(p) != std::string::npos) return true;
  }
  return false;
}

// A softmax on this process's CUDA context, against float64 on the CPU: the
// process still computes correctly.
void expectSoftmaxStillComputes() {
  const at::Tensor x = at::randn({256, 4096}, at::TensorOptions().dtype(at::kFloat).device(at::kCUDA, 0));
  const at::Tensor got = at::softmax(x, -1).cpu().to(at::kDouble);
  const at::Tensor want = at::softmax(x.cpu().to(at::kDouble), -1);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << "the CUDA context is broken";
  EXPECT_LT((got - want).abs().max().item<double>(), 1e-6) << "softmax on the GPU is wrong after the planted kernels";
  EXPECT_LT((got.sum(-1) - 1.0).abs().max().item<double>(), 1e-5);
}

class PlantedKernelsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!at::cuda::is_available() || at::cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device";
  }
  static std::string cubinOf(const std::string& name) {
    return compileToCubin(planted::kSource, "planted.cu", queryDevice(0).nvrtcArch(), planted::plantedDefines(name))
        .cubin;
  }
  static unsigned ctasPerRow(const std::string& name) { return name == "race-two-ctas-a-row" ? 2 : 1; }
  static HarnessCandidate candidateOf(const std::string& name) {
    HarnessCandidate c;
    c.cubin = cubinOf(name);
    c.kernelName = "planted";
    c.description = "planted[" + name + "]";
    const unsigned k = ctasPerRow(name);
    c.geometry = [k](int64_t rows, int64_t) { return LaunchGeometry{static_cast<unsigned>(rows) * k, 256, 0}; };
    c.acceptsShape = [](int64_t rows, int64_t cols) { return rows >= 1 && rows < 32768 && cols >= 1; };
    c.acceptsPointers = [](const void* in, const void* out) { return in && out && in != out; };
    c.alignment = 1;
    return c;
  }
  // The five stages on the planted variant `name` at [64, 1000].
  static HarnessReport check(const std::string& name, kernels::DType dtype = kernels::DType::Float32,
                             double watchdogSeconds = 10.0) {
    HarnessOptions o;
    o.watchdogSeconds = watchdogSeconds;
    return runHarness(softmaxSpec(), candidateOf(name), dtype, kRows, kCols, 0, o);
  }
  // What the tuner does after the harness (Note [Timed outputs are checked]):
  // a plan of the planted kernel timed against ATen's softmax with 31 pairs
  // over two inputs, its first and last timed outputs checked.
  static TimedCandidate timeAndCheck(const std::string& name) {
    c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(0));
    const HarnessCandidate c = candidateOf(name);
    Plan plan;
    plan.key = VariantKey{static_cast<int32_t>(kernels::DType::Float32), 0, kRows, kCols};
    plan.launcher = CudaKernelLauncher::load(0, c.cubin, c.kernelName, c.geometry(kRows, kCols), 1, c.description);
    plan.description = c.description;
    FamilyTuneSpec fs;
    fs.family = "planted";
    fs.kernelName = "planted";
    fs.dtype = kernels::DType::Float32;
    fs.rows = kRows;
    fs.cols = kCols;
    fs.harnessSpec = softmaxSpec();
    const auto opts = at::TensorOptions().dtype(at::kFloat).device(at::kCUDA, 0);
    fs.timedInputs = drawTimedInputs(
        fs.harnessSpec, fs.dtype, kRows, kCols, 0, [&](int64_t k) { return at::randn({k, kCols}, opts).mul_(4.0); },
        {});
    fs.atenCall = [](const TimedInput& t) { (void)at::cuda::_softmax(t.in, -1, false); };
    return timeAndCheckCandidate(fs, plan, 0, 31);
  }
  // Rejected by the harness at `stage` with a reason holding one of `reasons`.
  static void expectRejected(const HarnessReport& r, HarnessStage stage, std::initializer_list<const char*> reasons) {
    ASSERT_FALSE(r.passed) << "the planted kernel passed all five stages";
    ASSERT_NE(r.failure(), nullptr);
    EXPECT_EQ(toString(r.failure()->stage), std::string(toString(stage))) << stageOf(r);
    EXPECT_TRUE(containsAny(r.failure()->detail, reasons)) << "unexpected reason: " << stageOf(r);
  }
  void TearDown() override {
    if (!IsSkipped()) expectSoftmaxStillComputes();
  }
};

TEST_F(PlantedKernelsTest, GivenCorrectControlKernelWhenCheckedThenAllFiveStagesPassAndItsTimedOutputsToo) {
  const HarnessReport r = check("control");
  EXPECT_TRUE(r.passed) << stageOf(r);
  EXPECT_EQ(r.stages.size(), 5u);
  const TimedCandidate t = timeAndCheck("control");
  EXPECT_TRUE(t.comparison.has_value()) << t.failure;
  EXPECT_EQ(t.failure, "");
}

TEST_F(PlantedKernelsTest, GivenCorrectBf16ControlKernelWhenCheckedThenAllFiveStagesPass) {
  const HarnessReport r = check("control-bf16", kernels::DType::BFloat16);
  EXPECT_TRUE(r.passed) << stageOf(r);
  EXPECT_EQ(r.stages.size(), 5u);
}

// 1. Checks for the pre-fill: writes only where it finds NaN. Every second
// launch is pre-filled with random bits (Note [Randomized pre-fill and guards]).
TEST_F(PlantedKernelsTest, GivenKernelThatWritesOnlyWhereItSeesNaNWhenCheckedThenARandomBitPrefillExposesIt) {
  const HarnessReport r = check("prefill-check");
  ASSERT_FALSE(r.passed) << "a kernel that checks for the pre-fill passed";
  EXPECT_NE(r.failure()->stage, HarnessStage::EdgeCases) << stageOf(r);
  EXPECT_TRUE(containsAny(r.failure()->detail, {"pre-filled with random bits", "differs bitwise"})) << stageOf(r);
}

// 2. Early return after N launches (a __device__ launch counter): the
// timed launches are checked, not only the harness's.
TEST_F(PlantedKernelsTest, GivenKernelThatStopsWorkingAfterSixteenLaunchesWhenTimedThenTheTimedCheckRejectsIt) {
  EXPECT_FALSE(writableGlobalData(cubinOf("early-return-after-n")).empty()) << "an agent round would refuse it";
  const TimedCandidate t = timeAndCheck("early-return-after-n");
  EXPECT_FALSE(t.comparison.has_value()) << "its timing was accepted";
  EXPECT_EQ(t.failure.rfind("timed: the ", 0), 0u) << t.failure;
  EXPECT_NE(t.failure.find("timed launch"), std::string::npos) << t.failure;
  EXPECT_NE(t.failure.find("is wrong"), std::string::npos) << t.failure;
}

// 3. State across calls: every call after the first returns the first call's result.
TEST_F(PlantedKernelsTest, GivenKernelThatReturnsItsFirstResultAgainWhenCheckedAndTimedThenBothRejectIt) {
  const HarnessReport r = check("state-across-calls");
  expectRejected(r, HarnessStage::Sweep, {"outside the bound", "NaN or infinity"});
  const TimedCandidate t = timeAndCheck("state-across-calls");
  EXPECT_FALSE(t.comparison.has_value()) << "its timing was accepted";
  EXPECT_EQ(t.failure.rfind("timed: the ", 0), 0u) << t.failure;
}

// 4. 1% relative error on every element, bfloat16: passed the absolute 2^-8
// bound (Note [Softmax bound]).
TEST_F(PlantedKernelsTest, GivenBf16KernelOffByOnePercentEverywhereWhenCheckedThenSmokeRejectsItOutsideTheBound) {
  expectRejected(check("relative-error-1pct-bf16", kernels::DType::BFloat16), HarnessStage::Smoke,
                 {"outside the bound"});
}

// 5. Every probability below 2^-8 (bfloat16's old absolute tolerance) written as 0.
TEST_F(PlantedKernelsTest, GivenBf16KernelZeroingProbabilitiesBelowTheOldToleranceWhenCheckedThenSmokeRejectsIt) {
  expectRejected(check("zero-below-tolerance-bf16", kernels::DType::BFloat16), HarnessStage::Smoke,
                 {"outside the bound"});
}

// 6a. Writes one element past the end of its output.
TEST_F(PlantedKernelsTest, GivenOutOfBoundsWriteInTheTailWhenCheckedThenSmokeStageCatchesIt) {
  expectRejected(check("write-past-end"), HarnessStage::Smoke, {"wrote past the end of the output"});
}

// 6b. Writes one element before the start of its output (the guard before it).
TEST_F(PlantedKernelsTest, GivenWriteBeforeTheOutputWhenCheckedThenSmokeStageCatchesItInTheGuardBefore) {
  expectRejected(check("write-before-start"), HarnessStage::Smoke, {"wrote before the start of the output"});
}

// 7. Skips the last row (leaves it as pre-filled).
TEST_F(PlantedKernelsTest, GivenKernelSkippingTheLastRowWhenCheckedThenSmokeSeesThePrefillLeftThere) {
  expectRejected(check("skip-last-row"), HarnessStage::Smoke, {"NaN or infinity", "outside the bound"});
}

// 8. Wrong on one row only (row 37 halved).
TEST_F(PlantedKernelsTest, GivenKernelWrongOnOneRowOnlyWhenCheckedThenSmokeRejectsIt) {
  const HarnessReport r = check("wrong-on-one-row");
  expectRejected(r, HarnessStage::Smoke, {"outside the bound"});
  EXPECT_NE(r.failure()->detail.find("flat index 37"), std::string::npos)
      << "the worst element should lie in row 37 (flat index 37000..37999): " << stageOf(r);
}

// 9. An illegal address on rows == 1. The fault leaves a sticky error that
// ruins the CUDA context of the process it happens in (Note [Harness runs
// in-process]), so the harness runs in a child process (a death test,
// re-executed: a fresh CUDA context); this process must be unaffected.
TEST_F(PlantedKernelsTest, GivenKernelFaultingOnOneRowWhenCheckedInAChildProcessThenSweepRejectsItWithTheCudaError) {
#ifdef GTEST_FLAG_SET
  GTEST_FLAG_SET(death_test_style, "threadsafe");
#else
  ::testing::FLAGS_gtest_death_test_style = "threadsafe";
#endif
  EXPECT_EXIT(
      {
        const HarnessReport r = check("fault-on-one-row");
        std::fprintf(stderr, "verdict: %s\n", stageOf(r).c_str());
        std::fflush(stderr);
        const bool expected = r.failure() && r.failure()->stage == HarnessStage::Sweep &&
                              r.failure()->detail.find("CUDA error") != std::string::npos;
        std::_Exit(expected ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "verdict: sweep: CUDA error");
}

// 10. Two CTAs a row that exchange their halves' sums without waiting for
// each other (a race the late CTA always loses).
TEST_F(PlantedKernelsTest, GivenRacingCtasOfOneRowWhenCheckedThenSmokeRejectsTheRacyResult) {
  expectRejected(check("race-two-ctas-a-row"), HarnessStage::Smoke, {"outside the bound", "NaN or infinity"});
}

// 11. Assumes the tuned variant's row stride (1000) for every row length:
// right at [64, 1000], wrong on the sweep's longer rows.
TEST_F(PlantedKernelsTest, GivenKernelAssumingTheVariantsRowStrideWhenCheckedThenTheSweepsLongerRowsExposeIt) {
  const HarnessReport r = check("wrong-stride");
  expectRejected(r, HarnessStage::Sweep, {"[33, 1001]"});
}

// 12. NaN-swallowing: NaN elements counted as 0 and NaN results written as 0.
TEST_F(PlantedKernelsTest, GivenKernelSwallowingNaNWhenCheckedThenStabilityRejectsItOnTheNaNInput) {
  const HarnessReport r = check("nan-swallowing");
  expectRejected(r, HarnessStage::Stability, {"NaN or infinity"});
  EXPECT_EQ(r.failure()->detail.rfind("-inf and NaN", 0), 0u) << stageOf(r);
}

TEST_F(PlantedKernelsTest, GivenKernelWrongOnlyOnNegatedInputsWhenCheckedThenStabilityStageCatchesIt) {
  expectRejected(check("wrong-on-negated-inputs"), HarnessStage::Stability, {"negated"});
}

TEST_F(PlantedKernelsTest, GivenNondeterministicAtomicSumWhenCheckedThenDeterminismStageCatchesIt) {
  expectRejected(check("atomic-sum"), HarnessStage::Determinism, {"differs bitwise"});
}

TEST_F(PlantedKernelsTest, GivenKernelWritingIntoItsInputWhenCheckedThenSmokeStageCatchesTheAlias) {
  expectRejected(check("alias"), HarnessStage::Smoke, {"modified its input"});
}

TEST_F(PlantedKernelsTest, GivenKernelThatNeverFinishesWhenCheckedThenWatchdogStopsItInSmoke) {
  const auto t0 = std::chrono::steady_clock::now();
  HarnessReport r = check("hang", kernels::DType::Float32, /*watchdogSeconds=*/1.0);
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  expectRejected(r, HarnessStage::Smoke, {"watchdog"});
  EXPECT_LT(waited, 8.0);
  // Let the planted kernel run out before the process tears its context down.
  at::cuda::device_synchronize();
}

// After every planted kernel above (tests run in their order in this file),
// the process computes a correct softmax (each test's TearDown checks it too).
TEST_F(PlantedKernelsTest, GivenEveryPlantedKernelCheckedWhenThisProcessComputesASoftmaxThenItIsCorrect) {
  expectSoftmaxStillComputes();
  const HarnessReport r = check("control");
  EXPECT_TRUE(r.passed) << stageOf(r);
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
