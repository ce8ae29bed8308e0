// The fusion fuzz suite on CUDA with real fused kernels (Note [The fuzz suite
// on a GPU]; label `gpu`, skipped without a device): a short batch of random
// programs compared with plain eager, and the suite's own check that it
// catches a fused kernel that reports a launch it never made (its outputs
// left as the engine's NaN fill). fusion_fuzz_gpu is the long run.
#include <gtest/gtest.h>

#include <ATen/cuda/CUDAContext.h>

#include <memory>
#include <string>
#include <vector>

#include "FuzzChainKernels.h"

using namespace hotkernel::fusion;
using namespace hotkernel::fusion::fuzz;

namespace {

#define REQUIRE_CUDA()                                              \
  if (!at::cuda::is_available() || at::cuda::device_count() == 0) { \
    GTEST_SKIP() << "no CUDA device";                               \
  }

// A kernel that says it launched and writes nothing (a planted bug).
class SilentKernel final : public FusedChainKernel {
 public:
  bool launch(const std::vector<at::Tensor>&, const std::vector<at::Tensor>&, c10::Stream) noexcept override {
    return true;
  }
  std::string describe() const override { return "silent"; }
};

}  // namespace

TEST(FusionFuzzGpuTest, GivenRandomProgramsOnCudaWithRealFusedKernelsWhenRunWithTheEngineThenEveryValueMatchesEager) {
  REQUIRE_CUDA();
  setFuzzDevice(c10::DeviceType::CUDA);
  gpu::FuzzKernelCounts kernels;
  FuzzOptions options;
  options.seed = 40;
  options.programs = 600;
  options.programsPerPool = 300;
  options.makeKernels = gpu::chainKernelMaker(kernels);
  FuzzReport r = runFusionFuzz(options);
  gpu::addKernelCounts(r, kernels);
  EXPECT_EQ(r.mismatches, 0u) << failuresText(r);
  EXPECT_EQ(r.unwrittenReads, 0u) << failuresText(r);
  EXPECT_GE(r.programs, 580);
  for (const char* feature : {"deferredCalls", "fusedFlushes", "unfusedFlushes", "deviceLaunches", "kernelsHarnessed",
                              "comparedBitwise", "comparedWithinTolerance", "itemsOfPending", "threadStepsOnPending",
                              "streamSwitches", "concurrentPrograms", "matmulsOfPending"}) {
    EXPECT_GT(countOf(r, feature), 0u) << feature;
  }
  EXPECT_EQ(countOf(r, "failedFlushes"), 0u);
  EXPECT_EQ(countOf(r, "streamViolations"), 0u);
}

TEST(FusionFuzzGpuTest, GivenFusedKernelsThatWriteNothingWhenProgramsRunOnCudaThenTheSuiteReportsUnwrittenReads) {
  REQUIRE_CUDA();
  setFuzzDevice(c10::DeviceType::CUDA);
  FuzzOptions options;
  options.seed = 41;
  options.programs = 200;
  options.programsPerPool = 200;
  options.makeKernels = [](const std::vector<HotChain>& hot, LaunchLog& log) {
    std::vector<std::shared_ptr<FusedChainKernel>> out;
    for (size_t k = 0; k < hot.size(); ++k) out.push_back(loggedKernel(std::make_shared<SilentKernel>(), log, 0));
    return out;
  };
  const FuzzReport r = runFusionFuzz(options);
  EXPECT_GT(countOf(r, "fusedFlushes"), 0u);
  EXPECT_GT(r.unwrittenReads, 0u);
  EXPECT_GT(r.mismatches, 0u);
}
