// Note [Cached kernels checked before first use] on a GPU: a kernel of each
// family, compiled at its tuner's first seed point as the tuner compiles it
// (Note [A tuner's spec]), passes checkCachedKernel; a kernel that computes
// something else under the same parameters (log_softmax's cubin stored as a
// softmax entry: what a signed but tampered entry would hold) and parameters
// outside the family's space are refused.
#include "hotkernel/optimizer/CachedKernelCheck.h"

#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAGraphsC10Utils.h>

#include <string>
#include <vector>

#include "hotkernel/kernels/CrossEntropyFamily.h"
#include "hotkernel/kernels/BatchNormFamily.h"
#include "hotkernel/kernels/GroupNormFamily.h"
#include "hotkernel/kernels/LayerNormFamily.h"
#include "hotkernel/kernels/ReduceDimFamily.h"
#include "hotkernel/kernels/ReduceFamily.h"
#include "hotkernel/kernels/RmsNormFamily.h"
#include "hotkernel/kernels/SoftmaxDimFamily.h"
#include "hotkernel/kernels/SoftmaxFamily.h"
#include "SeedKernel.h"
#include "hotkernel/kernels/VariantOptions.h"
#include "hotkernel/optimizer/FamilyTuner.h"
#include "hotkernel/optimizer/FamilyTuning.h"
#include "hotkernel/runtime/Check.h"
#include "hotkernel/runtime/CudaDriver.h"
#include "hotkernel/runtime/Nvrtc.h"

namespace hotkernel {
namespace {

#define REQUIRE_CUDA()                                              \
  if (!at::cuda::is_available() || at::cuda::device_count() == 0) { \
    GTEST_SKIP() << "no CUDA device";                               \
  }

using kernels::DType;
using kernels::ReduceOp;
using kernels::SoftmaxOp;

TunerOptions checkOptions() {
  TunerOptions o;
  o.memoryCapBytes = int64_t{2} << 30;
  o.yieldPoint = [] { return true; };
  return o;
}

gputest::SeedKernel seedKernel(const kernels::FamilyDescriptor& family, const VariantKey& key) {
  return gputest::seedKernel(family, key, checkOptions());
}

struct FamilyCase {
  const char* name;
  const kernels::FamilyDescriptor& family;
  VariantKey key;
};

std::vector<FamilyCase> familyCases() {
  VariantKey rms{static_cast<int32_t>(DType::BFloat16), 0, 512, 2048};
  rms.options = kernels::weightBiasOptions(true, false);
  VariantKey layer{static_cast<int32_t>(DType::Float16), 0, 512, 2048};
  layer.options = kernels::weightBiasOptions(true, true);
  VariantKey ce{static_cast<int32_t>(DType::BFloat16), 0, 256, 8192};
  ce.options = kernels::reductionOptions(static_cast<int32_t>(kernels::CrossEntropyReduction::Mean));
  return {
      {"softmax", kernels::softmaxDescriptor(SoftmaxOp::Softmax),
       VariantKey{static_cast<int32_t>(DType::Float32), 0, 512, 1024}},
      {"softmax middle dim", kernels::softmaxDescriptor(SoftmaxOp::Softmax),
       kernels::softmaxDimKeyOf(kernels::SoftmaxDimVariant{DType::Float16, 64, 128, 256}, 0)},
      {"rms_norm", kernels::rmsNormDescriptor(), rms},
      {"layer_norm", kernels::layerNormDescriptor(), layer},
      {"cross_entropy", kernels::crossEntropyDescriptor(), ce},
      {"group_norm", kernels::groupNormDescriptor(),
       kernels::groupNormKeyOf(kernels::GroupNormVariant{DType::BFloat16, 2 * 32, 10 * 1024, 32, 1024, true, true}, 0)},
      {"batch_norm", kernels::batchNormDescriptor(), VariantKey{static_cast<int32_t>(DType::BFloat16), 0, 256, 576}},
      {"sum", kernels::reduceDescriptor(ReduceOp::Sum), VariantKey{static_cast<int32_t>(DType::Float32), 0, 1024, 4096}},
      {"sum middle dim", kernels::reduceDescriptor(ReduceOp::Sum),
       kernels::reduceDimKeyOf(kernels::ReduceDimVariant{DType::BFloat16, 32, 256, 512, ReduceOp::Sum}, 0)},
  };
}

TEST(CachedKernelCheckGpuTest, GivenEachFamilysKernelAtItsSeedPointWhenCheckedBeforeFirstUseThenItPasses) {
  REQUIRE_CUDA();
  for (const FamilyCase& c : familyCases()) {
    SCOPED_TRACE(c.name);
    const gputest::SeedKernel k = seedKernel(c.family, c.key);
    ASSERT_FALSE(k.cubin.empty()) << "no seed point";
    EXPECT_EQ(checkCachedKernel(c.family, c.key, k.params, k.cubin, checkOptions()), "");
  }
}

TEST(CachedKernelCheckGpuTest, GivenLogSoftmaxsKernelStoredAsASoftmaxEntryWhenCheckedThenItIsRefused) {
  REQUIRE_CUDA();
  const VariantKey key{static_cast<int32_t>(DType::Float32), 0, 512, 1024};
  // Same template, kernel name and parameter point: only the results differ (a signed, tampered entry).
  const gputest::SeedKernel wrong = seedKernel(kernels::softmaxDescriptor(SoftmaxOp::LogSoftmax), key);
  ASSERT_FALSE(wrong.cubin.empty());

  const std::string why =
      checkCachedKernel(kernels::softmaxDescriptor(SoftmaxOp::Softmax), key, wrong.params, wrong.cubin, checkOptions());
  EXPECT_NE(why.find("stage"), std::string::npos) << why;
  // This process's CUDA context stays usable.
  const at::Tensor x = at::randn({8, 8}, at::kCUDA);
  EXPECT_NEAR(at::softmax(x, -1).sum().item<double>(), 8.0, 1e-4);
}

TEST(CachedKernelCheckGpuTest, GivenParametersOutsideTheFamilysSpaceWhenCheckedThenTheyAreRefusedBeforeAnyLaunch) {
  REQUIRE_CUDA();
  const VariantKey key{static_cast<int32_t>(DType::Float32), 0, 512, 1024};
  const gputest::SeedKernel k = seedKernel(kernels::softmaxDescriptor(SoftmaxOp::Softmax), key);
  ASSERT_FALSE(k.cubin.empty());
  nlohmann::json params = nlohmann::json::parse(k.params);
  params["threads"] = 3;

  const std::string why =
      checkCachedKernel(kernels::softmaxDescriptor(SoftmaxOp::Softmax), key, params.dump(), k.cubin, checkOptions());
  EXPECT_NE(why.find("not a point"), std::string::npos) << why;
  EXPECT_NE(checkCachedKernel(kernels::softmaxDescriptor(SoftmaxOp::Softmax), key, "{not json", k.cubin,
                              checkOptions()),
            "");
}

TEST(CachedKernelCheckGpuTest, GivenAYieldPointThatSaysStopWhenCheckingThenTheCheckIsInterrupted) {
  REQUIRE_CUDA();
  const VariantKey key{static_cast<int32_t>(DType::Float32), 0, 512, 1024};
  const gputest::SeedKernel k = seedKernel(kernels::softmaxDescriptor(SoftmaxOp::Softmax), key);
  ASSERT_FALSE(k.cubin.empty());
  TunerOptions stop = checkOptions();
  stop.yieldPoint = [] { return false; };

  EXPECT_THROW(checkCachedKernel(kernels::softmaxDescriptor(SoftmaxOp::Softmax), key, k.params, k.cubin, stop),
               Error);
}

}  // namespace
}  // namespace hotkernel
