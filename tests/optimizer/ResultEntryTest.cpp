// A tuning result is stored under the fingerprint of the device it was
// measured on (Note [A fingerprint per device]), with fake devices.
#include <gtest/gtest.h>

#include "hotkernel/optimizer/ResultEntry.h"
#include "hotkernel/runtime/Check.h"
#include "../runtime/FakeFingerprint.h"

namespace hotkernel {
namespace {

TuneOutcome accepted() {
  TuneOutcome out;
  out.accepted = true;
  out.family = "softmax_lastdim";
  out.paramsJson = {{"threads", 256}};
  out.kernelName = "hk_softmax";
  out.cubin = "cubin-bytes";
  out.metrics.kernel = KernelMetrics{};
  out.metrics.kernel->speedup = 1.5;
  out.metrics.arch = "sm_90a";
  return out;
}

TEST(ResultEntryTest, GivenResultsOnTwoDevicesWhenEntriesAreMadeThenEachCarriesItsOwnDevicesFingerprint) {
  DeviceFingerprints fps;
  const Fingerprint d0 = testing::fakeFingerprint("NVIDIA H200"), d1 = testing::fakeFingerprint("NVIDIA H100");
  fps.set(0, d0);
  fps.set(1, d1);
  const cache::Entry e0 = resultEntry(fps, 0, "aten::_softmax", "dtype=bf16;rows=4;cols=8;dev=0", "softmax_lastdim",
                                      accepted());
  const cache::Entry e1 = resultEntry(fps, 1, "aten::_softmax", "dtype=bf16;rows=4;cols=8;dev=1", "softmax_lastdim",
                                      accepted());
  EXPECT_EQ(e0.fingerprint, d0.key());
  EXPECT_EQ(e0.fingerprintJson, d0.canonicalJson());
  EXPECT_EQ(e1.fingerprint, d1.key());
  EXPECT_EQ(e1.fingerprintJson, d1.canonicalJson());
  EXPECT_EQ(e1.decision, cache::kDecisionKernel);
  EXPECT_EQ(e1.cubin, "cubin-bytes");
  EXPECT_EQ(e1.kernelName, "hk_softmax");
  EXPECT_EQ(nlohmann::json::parse(e1.metrics), accepted().metrics.toJson());
  EXPECT_EQ(nlohmann::json::parse(e1.metrics).at("speedup"), 1.5);
}

TEST(ResultEntryTest, GivenARejectedResultWhenTheEntryIsMadeThenItKeepsAtenUnderTheServedFamily) {
  DeviceFingerprints fps;
  fps.set(2, testing::fakeFingerprint("NVIDIA H200"));
  TuneOutcome out;
  out.accepted = false;
  out.family = "agent";
  const cache::Entry e = resultEntry(fps, 2, "aten::_log_softmax", "v", "log_softmax_lastdim", out);
  EXPECT_EQ(e.decision, cache::kDecisionKeepAten);
  EXPECT_EQ(e.family, "log_softmax_lastdim");
  EXPECT_EQ(e.params, "{}");
  EXPECT_TRUE(e.cubin.empty());
  EXPECT_EQ(e.metrics, R"({"candidates":[]})");
}

TEST(ResultEntryTest, GivenAnAcceptedChoiceWithoutACubinWhenTheEntryIsMadeThenItIsAnAtenBackendDecision) {
  DeviceFingerprints fps;
  fps.set(0, testing::fakeFingerprint("NVIDIA H200"));
  TuneOutcome out;
  out.accepted = true;
  out.family = "sdpa_backend";
  out.paramsJson = {{"format", "hotkernel-attention-choice"}, {"version", 1}, {"backend", "cudnn"}};
  out.metrics.kernel = KernelMetrics{};
  const cache::Entry e = resultEntry(fps, 0, "aten::scaled_dot_product_attention", "v", "sdpa_backend", out);
  EXPECT_EQ(e.decision, cache::kDecisionAtenBackend);
  EXPECT_EQ(e.family, "sdpa_backend");
  EXPECT_EQ(nlohmann::json::parse(e.params), out.paramsJson);
  EXPECT_TRUE(e.cubin.empty());
  EXPECT_TRUE(e.kernelName.empty());
}

TEST(ResultEntryTest, GivenADeviceWithNoFingerprintWhenAnEntryIsMadeThenItThrowsInsteadOfStoringUnderAnother) {
  DeviceFingerprints fps;
  fps.set(0, testing::fakeFingerprint("NVIDIA H200"));
  EXPECT_THROW(resultEntry(fps, 1, "aten::_softmax", "v", "softmax_lastdim", accepted()), Error);
}

}  // namespace
}  // namespace hotkernel
