// The CPU side of chain tuning: the harness's comparison of a candidate's
// outputs with ATen's (NaN, infinities, the bound of Note [Chain harness
// tolerance]), the bound per chain, and the cache entry of a tuning's
// outcome (ChainHarness.h, ChainTuner.h).

#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <cmath>
#include <limits>
#include <string>

#include "hotkernel/chain/ChainEntry.h"
#include "hotkernel/chain/ChainJson.h"
#include "hotkernel/chain/NamedChains.h"
#include "hotkernel/optimizer/ChainHarness.h"
#include "hotkernel/optimizer/ChainTuner.h"
#include "hotkernel/runtime/Check.h"

namespace hotkernel {
namespace {

using chain::DType;

bool holds(const std::string& text, const std::string& needle) { return text.find(needle) != std::string::npos; }

TEST(ChainTunerTest, GivenEachChainKindWhenItsToleranceIsAskedThenSixteenBitIsLooseAndFloat32Tight) {
  EXPECT_EQ(chainTolerance(chain::rmsNormChain(DType::BFloat16, 1e-6)), 1.0 / 16);
  EXPECT_EQ(chainTolerance(chain::swigluChain(DType::Float16)), 1.0 / 16);
  // A float32 output of a 16-bit chain inherits its roundings.
  EXPECT_EQ(chainTolerance(chain::residualAddCastChain(DType::BFloat16, DType::Float32)), 1.0 / 16);
  EXPECT_EQ(chainTolerance(chain::rmsNormChain(DType::Float32, 1e-6)), std::ldexp(1.0, -12));
  EXPECT_EQ(chainTolerance(chain::newGeluChain(DType::Float32)), std::ldexp(1.0, -20));
  // A float32 eval batch norm's reference may be cuDNN's, which rounds relative to its terms.
  EXPECT_EQ(chainTolerance(chain::batchNormActChain(DType::Float32, 1e-5, chain::OpKind::Relu)), std::ldexp(1.0, -17));
  EXPECT_EQ(chainTolerance(chain::batchNormActChain(DType::BFloat16, 1e-5, chain::OpKind::Relu)), 1.0 / 16);
}

TEST(ChainTunerTest, GivenOutputsWithinTheBoundWhenComparedThenTheyPassAndTheWorstErrorIsReported) {
  const at::Tensor ref = at::tensor({1.0f, -2.0f, 0.0f, 100.0f, NAN, INFINITY}).to(at::kBFloat16);
  at::Tensor got = at::tensor({1.0625f, -2.0f, 0.0f, 106.0f, NAN, INFINITY}).to(at::kBFloat16);
  double worst = 0;
  EXPECT_EQ(compareChainOutputs({got}, {ref}, 1.0 / 16, &worst), "");
  EXPECT_EQ(worst, 6.0);  // 106 vs 100: 6 <= (1 + 100) / 16
}

TEST(ChainTunerTest, GivenOutputsThatBreakARuleWhenComparedThenTheReasonNamesTheOutputAndElement) {
  const at::Tensor ref = at::tensor({1.0f, -2.0f, 3.0f, 4.0f});
  auto with = [&](int64_t i, float v) {
    at::Tensor t = ref.clone();
    t[i] = v;
    return t;
  };
  // An element left unwritten (NaN pre-fill) where ATen's is a number.
  std::string why = compareChainOutputs({ref, with(2, NAN)}, {ref, ref}, 1e-3);
  EXPECT_TRUE(holds(why, "output 1 is NaN where ATen's is not")) << why;
  EXPECT_TRUE(holds(why, "element 2")) << why;
  // A number where ATen has NaN.
  why = compareChainOutputs({ref}, {with(0, NAN)}, 1e-3);
  EXPECT_TRUE(holds(why, "NaN where ATen's is not, or not where it is")) << why;
  // An infinity of the wrong sign, a finite value for an infinity.
  why = compareChainOutputs({with(1, -INFINITY)}, {with(1, INFINITY)}, 1e-3);
  EXPECT_TRUE(holds(why, "infinities")) << why;
  why = compareChainOutputs({with(1, 3e38f)}, {with(1, INFINITY)}, 1e-3);
  EXPECT_TRUE(holds(why, "infinities")) << why;
  // Just over the bound: b (1 + |ref|) = 0.01 * 5 at 4.
  why = compareChainOutputs({with(3, 4.06f)}, {ref}, 0.01);
  EXPECT_TRUE(holds(why, "output 0 is off by more than 0.01")) << why;
  EXPECT_TRUE(holds(why, "element 3")) << why;
  EXPECT_EQ(compareChainOutputs({with(3, 4.04f)}, {ref}, 0.01), "");
  // Counts and shapes.
  EXPECT_TRUE(holds(compareChainOutputs({ref}, {ref, ref}, 0.01), "got 1 outputs, ATen 2"));
  EXPECT_TRUE(holds(compareChainOutputs({ref.view({2, 2})}, {ref}, 0.01), "another shape"));
}

Fingerprint fakeFingerprint() {
  Fingerprint f;
  f.gpuName = "NVIDIA H200";
  f.computeCapability = "9.0";
  f.driverVersion = 13000;
  f.nvrtcVersion = 13000;
  f.torchVersion = "2.11.0";
  f.hotkernelVersion = "test";
  f.kernelSources = "0";
  return f;
}

TEST(ChainTunerTest, GivenAnAcceptedOutcomeWhenItsEntryIsMadeThenItIsAKernelEntryOfTheChainUnderTheDevicesFingerprint) {
  DeviceFingerprints fps;
  fps.set(1, fakeFingerprint());
  const chain::ChainVariant v{chain::rmsNormChain(DType::BFloat16, 1e-6), 64, 4096, 1};
  TuneOutcome out;
  out.accepted = true;
  out.family = chain::kChainFamily;
  out.paramsJson = chain::chainEntryParams(v, chain::ChainKernelParams{256, 8, 1, 2});
  out.kernelName = chain::kChainKernelName;
  out.cubin = "cubin bytes";
  const cache::Entry e = chainResultEntry(fps, v, out);
  EXPECT_EQ(e.op, "hotkernel::chain");
  EXPECT_EQ(e.variant, chain::chainVariantString(v));
  EXPECT_EQ(e.fingerprint, fakeFingerprint().key());
  EXPECT_EQ(e.decision, cache::kDecisionKernel);
  EXPECT_EQ(e.family, "chain");
  EXPECT_EQ(e.kernelName, "hk_chain");
  EXPECT_EQ(e.cubin, "cubin bytes");
  const std::optional<chain::ChainKernelParams> p = chain::readChainEntry(e.params, v);
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(*p, (chain::ChainKernelParams{256, 8, 1, 2}));
  // Another device has no fingerprint: no entry.
  chain::ChainVariant elsewhere = v;
  elsewhere.device = 0;
  EXPECT_THROW(chainResultEntry(fps, elsewhere, out), Error);
}

TEST(ChainTunerTest, GivenAKeepAtenOutcomeWhenItsEntryIsMadeThenItNamesTheChainWithoutAKernel) {
  DeviceFingerprints fps;
  fps.set(0, fakeFingerprint());
  const chain::ChainVariant v{chain::swigluChain(DType::Float32), 8, 64, 0};
  TuneOutcome out;  // nothing accepted
  const cache::Entry e = chainResultEntry(fps, v, out);
  EXPECT_EQ(e.decision, cache::kDecisionKeepAten);
  EXPECT_EQ(e.family, "chain");
  EXPECT_TRUE(e.cubin.empty());
  EXPECT_EQ(chain::chainFromJson(nlohmann::json::parse(e.params).at("chain")), v.ir);
  EXPECT_FALSE(chain::readChainEntry(e.params, v).has_value());
}

}  // namespace
}  // namespace hotkernel
