// A recorded profile as warm-up targets, and the warm-up's order: the
// profile's calls with injected ATen timings ranked by expected saving, not
// by calls x bytes.

#include <gtest/gtest.h>

#include <map>
#include <utility>
#include <vector>

#include "hotkernel/kernels/VariantOptions.h"
#include "hotkernel/optimizer/ProfileTargets.h"
#include "hotkernel/optimizer/QueueRanker.h"
#include "hotkernel/runtime/Check.h"

namespace hotkernel {
namespace {

nlohmann::json profileOf(nlohmann::json variants) {
  return {{"format", "hotkernel-profile"}, {"version", 1}, {"samplingProb", 0.05}, {"ops", nlohmann::json::array()},
          {"variants", std::move(variants)}};
}

nlohmann::json variant(const std::string& op, int64_t rows, int64_t cols, double calls) {
  return {{"op", op},   {"dtype", "bf16"}, {"device", 3}, {"rows", rows}, {"cols", cols}, {"sampledCalls", calls / 20},
          {"estimatedCalls", calls}};
}

// Times by rows; 4 TB/s.
class ProfileMeasurer : public TargetMeasurer {
 public:
  explicit ProfileMeasurer(std::map<int64_t, double> seconds) : seconds_(std::move(seconds)) {}
  MachinePeaks measurePeaks(int) override { return MachinePeaks{4e12, 0}; }
  double measureSecondsPerCall(const std::string&, const VariantKey& key) override { return seconds_.at(key.rows); }

 private:
  std::map<int64_t, double> seconds_;
};

TEST(ProfileTargetsTest, GivenProfileWhenReadThenServedVariantsOnTheWarmupDeviceAndOthersIgnored) {
  ProfileTargets t = targetsFromProfile(profileOf({variant("aten::_softmax", 4096, 32000, 2000),
                                                   variant("aten::mm", 64, 64, 1e6),
                                                   variant("aten::_log_softmax", 8, 1000, 10),
                                                   variant("aten::_softmax", 4096, 32000, 2000)}),  // twice
                                         /*device=*/1);
  ASSERT_EQ(t.targets.size(), 2u);
  EXPECT_EQ(t.ignored, 2);
  EXPECT_EQ(t.targets[0].job.op, "aten::_softmax");
  EXPECT_EQ(t.targets[0].job.key.device, 1);  // the profile's device 3 is the recording machine's
  EXPECT_EQ(t.targets[0].job.key.rows, 4096);
  EXPECT_EQ(kernels::variantString(t.targets[0].job.key), "dtype=bfloat16;rows=4096;cols=32000");
  EXPECT_DOUBLE_EQ(t.targets[0].estimatedCalls, 2000);
  EXPECT_EQ(t.targets[1].job.op, "aten::_log_softmax");
}

TEST(ProfileTargetsTest, GivenTwoWorkersProfilesWhenMergedThenOneTargetPerVariantWithTheCallsSummed) {
  ProfileTargets a = targetsFromProfile(profileOf({variant("aten::_softmax", 4096, 32000, 2000),
                                                   variant("aten::mm", 64, 64, 1e6)}),
                                        0);
  const ProfileTargets b = targetsFromProfile(profileOf({variant("aten::_log_softmax", 8, 1000, 10),
                                                         variant("aten::_softmax", 4096, 32000, 500)}),
                                              0);
  mergeTargets(a, b);
  ASSERT_EQ(a.targets.size(), 2u);
  EXPECT_EQ(a.targets[0].job.op, "aten::_softmax");
  EXPECT_DOUBLE_EQ(a.targets[0].estimatedCalls, 2500);
  EXPECT_EQ(a.targets[1].job.op, "aten::_log_softmax");  // new: after the others
  EXPECT_DOUBLE_EQ(a.targets[1].estimatedCalls, 10);
  EXPECT_EQ(a.ignored, 1);
  // The same variant of another op stays its own target.
  mergeTargets(a, targetsFromProfile(profileOf({variant("aten::_log_softmax", 4096, 32000, 7)}), 0));
  EXPECT_EQ(a.targets.size(), 3u);
}

TEST(ProfileTargetsTest, GivenVariantsWhoseCallsFusedChainsTookWhenReadThenOnlyTheCallsThatRanCount) {
  nlohmann::json taken = variant("aten::_softmax", 4096, 32000, 2000);
  taken["estimatedDeferredCalls"] = 2000;  // a version 1 key: not read
  nlohmann::json p = profileOf({variant("aten::_softmax", 4096, 32000, 2000), variant("aten::_log_softmax", 8, 1000, 10),
                                variant("aten::_softmax", 64, 1000, 400)});
  p["version"] = 3;
  p["sampling_prob"] = 0.05;
  for (nlohmann::json& v : p["variants"]) {
    v["sampled_calls"] = v["sampledCalls"];
    v["estimated_calls"] = v["estimatedCalls"];
    v.erase("sampledCalls");
    v.erase("estimatedCalls");
  }
  p["variants"][0]["estimated_deferred_calls"] = 2000.0;  // every call deferred
  p["variants"][2]["estimated_deferred_calls"] = 300.0;   // a quarter ran
  const ProfileTargets t = targetsFromProfile(p, 0);
  EXPECT_EQ(t.takenByChains, 1);
  ASSERT_EQ(t.targets.size(), 2u);
  EXPECT_EQ(t.targets[0].job.op, "aten::_log_softmax");
  EXPECT_DOUBLE_EQ(t.targets[0].estimatedCalls, 10);
  EXPECT_EQ(t.targets[1].job.key.rows, 64);
  EXPECT_DOUBLE_EQ(t.targets[1].estimatedCalls, 100);

  ProfileTargets merged = targetsFromProfile(profileOf({taken}), 0);  // version 1: every call counts
  ASSERT_EQ(merged.targets.size(), 1u);
  EXPECT_DOUBLE_EQ(merged.targets[0].estimatedCalls, 2000);
  mergeTargets(merged, t);
  EXPECT_EQ(merged.takenByChains, 1);
  EXPECT_EQ(merged.targets.size(), 3u);
}

TEST(ProfileTargetsTest, GivenNormVariantsWithFlagsWhenReadThenKeysCarryWeightAndBias) {
  nlohmann::json rms = variant("aten::_fused_rms_norm", 4096, 4096, 500);
  rms["weight"] = true;
  nlohmann::json ln = variant("aten::native_layer_norm", 32, 4096, 50);
  ln["weight"] = true;
  ln["bias"] = true;
  nlohmann::json bare = variant("aten::native_layer_norm", 32, 4096, 5);  // no flags: a different target
  nlohmann::json biasedRms = variant("aten::_fused_rms_norm", 8, 64, 5);
  biasedRms["bias"] = true;  // rms_norm takes no bias: ignored
  ProfileTargets t = targetsFromProfile(profileOf({rms, ln, bare, biasedRms}), /*device=*/0);
  ASSERT_EQ(t.targets.size(), 3u);
  EXPECT_EQ(t.ignored, 1);
  EXPECT_EQ(kernels::variantString(t.targets[0].job.key), "dtype=bfloat16;rows=4096;cols=4096;weight=1");
  EXPECT_EQ(kernels::variantString(t.targets[1].job.key), "dtype=bfloat16;rows=32;cols=4096;weight=1;bias=1");
  EXPECT_EQ(kernels::variantString(t.targets[2].job.key), "dtype=bfloat16;rows=32;cols=4096");
  EXPECT_EQ(t.targets[1].job.op, "aten::native_layer_norm");
}

TEST(ProfileTargetsTest, GivenCrossEntropyVariantsWhenReadThenKeysCarryTheReduction) {
  nlohmann::json sum = variant("aten::cross_entropy_loss", 4096, 32000, 500);
  sum["reduction"] = "sum";
  nlohmann::json none = variant("aten::cross_entropy_loss", 8, 128256, 50);
  none["reduction"] = "none";
  nlohmann::json bare = variant("aten::cross_entropy_loss", 8, 64, 5);  // no reduction: not a served key
  ProfileTargets t = targetsFromProfile(profileOf({sum, none, bare}), /*device=*/0);
  ASSERT_EQ(t.targets.size(), 2u);
  EXPECT_EQ(t.ignored, 1);
  EXPECT_EQ(kernels::variantString(t.targets[0].job.key), "dtype=bfloat16;rows=4096;cols=32000;reduction=sum");
  EXPECT_EQ(kernels::variantString(t.targets[1].job.key), "dtype=bfloat16;rows=8;cols=128256;reduction=none");
}

TEST(ProfileTargetsTest, GivenMiddleDimVariantsWhenReadThenKeysCarryTheInnerExtent) {
  nlohmann::json middle = variant("aten::amax", 32, 4096, 500);
  middle["inner"] = 1024;
  nlohmann::json last = variant("aten::amax", 32, 4096, 50);  // no inner: the last-dim variant, its own target
  nlohmann::json one = variant("aten::amax", 32, 4096, 5);
  one["inner"] = 1;  // no middle dim: not a served key
  nlohmann::json softmax = variant("aten::_softmax", 32, 4096, 5);
  softmax["inner"] = 1024;  // softmax over a middle dim (Note [Two softmax layouts]): a served key
  nlohmann::json norm = variant("aten::native_layer_norm", 32, 4096, 5);
  norm["inner"] = 1024;  // the norms have no middle-dim layout: not a served key
  ProfileTargets t = targetsFromProfile(profileOf({middle, last, one, softmax, norm}), /*device=*/0);
  ASSERT_EQ(t.targets.size(), 3u);
  EXPECT_EQ(t.ignored, 2);
  EXPECT_EQ(t.targets[0].job.key.inner, 1024);
  EXPECT_EQ(kernels::variantString(t.targets[0].job.key), "dtype=bfloat16;rows=32;cols=4096;inner=1024");
  EXPECT_EQ(kernels::variantString(t.targets[1].job.key), "dtype=bfloat16;rows=32;cols=4096");
  EXPECT_EQ(t.targets[2].job.op, "aten::_softmax");
  EXPECT_EQ(t.targets[2].job.key.inner, 1024);
  nlohmann::json bad = middle;
  bad["inner"] = "1024";
  EXPECT_THROW(targetsFromProfile(profileOf({bad}), 0), Error);
}

TEST(ProfileTargetsTest, GivenNotAProfileOrMalformedVariantWhenReadThenError) {
  try {
    targetsFromProfile(nlohmann::json::object(), 0);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("is not a hotkernel profile"), std::string::npos) << e.what();
  }
  nlohmann::json p = profileOf({variant("aten::_softmax", 8, 8, 1)});
  p["version"] = 4;  // newer than this reader
  EXPECT_THROW(targetsFromProfile(p, 0), Error);
  nlohmann::json bad = variant("aten::_softmax", 8, 8, 1);
  bad.erase("rows");
  EXPECT_THROW(targetsFromProfile(profileOf({bad}), 0), Error);
  bad = variant("aten::_softmax", 8, 8, 1);
  bad["dtype"] = "int7";
  EXPECT_THROW(targetsFromProfile(profileOf({bad}), 0), Error);
}

// fuzz_profile (tests/fuzz) found that a mistyped "format" or "version" threw
// nlohmann's type_error instead of Error; reading the same code showed rows or
// cols given as a float out of int64's range converted with undefined behaviour.
TEST(ProfileTargetsTest, GivenMistypedHeaderOrNonIntegerCountsWhenReadThenError) {
  for (const auto& [key, value] : std::vector<std::pair<std::string, nlohmann::json>>{
           {"format", 0}, {"format", nullptr}, {"version", "1"}, {"version", 1.5}, {"variants", "none"}}) {
    nlohmann::json p = profileOf({variant("aten::_softmax", 8, 8, 1)});
    p[key] = value;
    EXPECT_THROW(targetsFromProfile(p, 0), Error) << p.dump();
  }
  for (const char* key : {"rows", "cols"}) {
    for (const nlohmann::json& value : {nlohmann::json(1e300), nlohmann::json(-1e300), nlohmann::json(8.5),
                                        nlohmann::json(18446744073709551615ull), nlohmann::json("8")}) {
      nlohmann::json v = variant("aten::_softmax", 8, 8, 1);
      v[key] = value;
      EXPECT_THROW(targetsFromProfile(profileOf({v}), 0), Error) << v.dump();
    }
  }
  EXPECT_EQ(targetsFromProfile(profileOf({variant("aten::_softmax", 8, 8, 1)}), 0).targets.size(), 1u);
}

// calls x bytes would put A first (4.2e8 bytes x 20000 calls vs 4.1e7 x 100000: 8.4e12 > 4.1e12).
// With the ATen times measured: A runs at 97% of its roofline (nothing to gain, kept ATen);
// B (4.1e7 bytes) is 10x off its roofline with 10 s of GPU time; C is 6x off with 2 s.
TEST(ProfileTargetsTest, GivenProfileWithFakeTimingsWhenWarmupRanksThenExpectedSavingOrderAndBudgetSplit) {
  ProfileTargets t = targetsFromProfile(profileOf({variant("aten::_softmax", 4096, 25600, 20000),   // A
                                                   variant("aten::_softmax", 1024, 10000, 100000),  // B
                                                   variant("aten::_softmax", 2048, 32000, 5000),    // C
                                                   variant("aten::_softmax", 64, 1000, 50)}),       // D
                                         0);
  ASSERT_EQ(t.targets.size(), 4u);
  // Rooflines at 4 TB/s: A 104.9 us, B 10.24 us, C 65.5 us, D 0.064 us.
  ProfileMeasurer measurer({{4096, 108e-6}, {1024, 100e-6}, {2048, 400e-6}, {64, 5e-6}});
  std::map<std::string, double> calls;
  std::vector<OptimizerJob> jobs;
  for (const ProfileTarget& p : t.targets) {
    calls[jobId(p.job)] = p.estimatedCalls;
    jobs.push_back(p.job);
  }
  QueueRankerHooks hooks;
  hooks.estimatedCalls = [&calls](const OptimizerJob& j) { return calls.at(jobId(j)); };
  std::vector<TargetStop> skippedWhy;
  hooks.onSkipped = [&skippedWhy](const OptimizerJob&, const SkippedTarget& s) { skippedWhy.push_back(s.reason); };
  RankingOptions options;
  options.minBudgetSeconds = 30;
  QueueRanker ranker(measurer, options, hooks);
  QueueRanking r = ranker.rank(jobs, /*--budget*/ 600.0);

  ASSERT_EQ(r.order.queue.size(), 3u);
  EXPECT_EQ(r.order.queue[0].key.rows, 1024);  // B: 10 s x 0.90 = 9.0 s
  EXPECT_EQ(r.order.queue[1].key.rows, 2048);  // C: 2 s x 0.84 = 1.7 s
  EXPECT_EQ(r.order.queue[2].key.rows, 64);    // D: tiny
  EXPECT_NEAR(r.order.queue[0].target->expectedSavingSeconds, 10.0 * (1 - 10.24 / 100.0), 1e-9);
  ASSERT_EQ(skippedWhy.size(), 1u);
  EXPECT_EQ(skippedWhy[0], TargetStop::NearRoofline);  // A
  EXPECT_EQ(r.order.dropped[0].key.rows, 4096);
  double sum = 0;
  for (const OptimizerJob& j : r.order.queue) {
    EXPECT_GE(j.target->budgetSeconds, 30 - 1e-9);
    sum += j.target->budgetSeconds;
  }
  EXPECT_NEAR(sum, 600, 1e-9);
  EXPECT_GT(r.order.queue[0].target->budgetSeconds, r.order.queue[1].target->budgetSeconds);
}

}  // namespace
}  // namespace hotkernel
