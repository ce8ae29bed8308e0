// computeCacheStats: counts by op, decision and fingerprint from metadata, and
// the entries of this machine's fingerprints (injected: no GPU needed).

#include "CacheStats.h"

#include <gtest/gtest.h>

#include "CacheTestUtil.h"

namespace hotkernel::cli {
namespace {

using cache::Entry;
using cache::test::keepAtenEntry;
using cache::test::kernelEntry;
using cache::test::testFingerprint;

Entry withMetadata(Entry e, int64_t createdUnix) {
  e.cubinBytes = static_cast<int64_t>(e.cubin.size());
  e.cubin.clear();  // as listMetadata returns it
  e.createdUnix = createdUnix;
  return e;
}

std::vector<Entry> sample() {
  const Fingerprint a100 = testFingerprint("NVIDIA A100");
  return {withMetadata(kernelEntry("aten::_softmax", "v1", testFingerprint(), 100), 1000),
          withMetadata(kernelEntry("aten::_softmax", "v2", testFingerprint(), 50), 3000),
          withMetadata(keepAtenEntry("aten::_log_softmax", "v1"), 2000),
          withMetadata(kernelEntry("aten::_softmax", "v1", a100, 10), 500)};
}

MachineFingerprints machineOf(const std::vector<std::string>& keys) {
  MachineFingerprints m;
  m.keys = keys;
  std::sort(m.keys.begin(), m.keys.end());
  if (keys.empty()) m.unknown = "no CUDA device";
  return m;
}

TEST(CacheStatsTest, GivenEntriesWhenCountedThenByOpDecisionAndFingerprint) {
  CacheStats s = computeCacheStats(sample(), machineOf({}));
  EXPECT_EQ(s.entries, 4u);
  EXPECT_EQ(s.cubinBytes, 160);
  ASSERT_EQ(s.byOp.size(), 2u);
  EXPECT_EQ(s.byOp["aten::_softmax"].entries, 3u);
  EXPECT_EQ(s.byOp["aten::_softmax"].kernels, 3u);
  EXPECT_EQ(s.byOp["aten::_log_softmax"].entries, 1u);
  EXPECT_EQ(s.byOp["aten::_log_softmax"].kernels, 0u);
  EXPECT_EQ(s.byDecision["kernel"], 3u);
  EXPECT_EQ(s.byDecision["keep_aten"], 1u);
  ASSERT_EQ(s.byFingerprint.size(), 2u);
  EXPECT_LT(s.byFingerprint[0].fingerprint, s.byFingerprint[1].fingerprint);
  for (const FingerprintStats& f : s.byFingerprint) {
    const bool h200 = f.fingerprint == testFingerprint().key();
    EXPECT_EQ(f.gpu, h200 ? "NVIDIA H200" : "NVIDIA A100");
    EXPECT_EQ(f.entries, h200 ? 3u : 1u);
    EXPECT_EQ(f.newestUnix, h200 ? 3000 : 500);
    EXPECT_EQ(f.hotkernelVersion, "0.1.0");
    EXPECT_EQ(f.torchVersion, "2.11.0+cu130");
    EXPECT_FALSE(f.matchesMachine);
  }
  EXPECT_EQ(s.matchingEntries, 0u);
}

TEST(CacheStatsTest, GivenThisMachinesFingerprintWhenCountedThenItsEntriesMatch) {
  CacheStats s = computeCacheStats(sample(), machineOf({testFingerprint().key()}));
  EXPECT_EQ(s.matchingEntries, 3u);
  for (const FingerprintStats& f : s.byFingerprint) {
    EXPECT_EQ(f.matchesMachine, f.fingerprint == testFingerprint().key()) << f.fingerprint;
  }
  CacheStats both = computeCacheStats(sample(), machineOf({testFingerprint().key(), testFingerprint("NVIDIA A100").key()}));
  EXPECT_EQ(both.matchingEntries, 4u);
}

TEST(CacheStatsTest, GivenADamagedFingerprintJsonOrAnUnknownDecisionWhenCountedThenStillCounted) {
  std::vector<Entry> entries = sample();
  entries[3].fingerprintJson = "{not json";
  entries[2].decision = "future_decision";
  CacheStats s = computeCacheStats(entries, machineOf({}));
  EXPECT_EQ(s.byDecision["future_decision"], 1u);
  for (const FingerprintStats& f : s.byFingerprint) {
    if (f.fingerprint != testFingerprint().key()) EXPECT_EQ(f.gpu, "");
  }
}

TEST(CacheStatsTest, GivenNoEntriesWhenCountedThenAllZero) {
  CacheStats s = computeCacheStats({}, machineOf({testFingerprint().key()}));
  EXPECT_EQ(s.entries, 0u);
  EXPECT_TRUE(s.byOp.empty());
  EXPECT_TRUE(s.byFingerprint.empty());
}

}  // namespace
}  // namespace hotkernel::cli
