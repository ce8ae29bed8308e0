// selectStale (Note [Stale fingerprints]) with an injected clock and machine:
// other hotkernel versions, fingerprints with nothing new for maxAgeDays, and
// this machine's fingerprints kept.

#include "StaleSelection.h"

#include <gtest/gtest.h>

#include "CacheTestUtil.h"

namespace hotkernel::cli {
namespace {

using cache::Entry;
using cache::test::kernelEntry;
using cache::test::testFingerprint;

constexpr int64_t kDay = 86400;
constexpr int64_t kNow = 1800000000;

Fingerprint withVersion(const std::string& gpu, const std::string& version) {
  Fingerprint f = testFingerprint(gpu);
  f.hotkernelVersion = version;
  return f;
}

Entry at(const Fingerprint& f, const std::string& variant, int64_t createdUnix) {
  Entry e = kernelEntry("aten::_softmax", variant, f, 16);
  e.createdUnix = createdUnix;
  return e;
}

StalePolicy policy(int64_t days = 30) {
  StalePolicy p;
  p.nowUnix = kNow;
  p.maxAgeDays = days;
  p.hotkernelVersion = "0.1.0";
  return p;
}

MachineFingerprints machineOf(const std::vector<std::string>& keys) {
  MachineFingerprints m;
  m.keys = keys;
  std::sort(m.keys.begin(), m.keys.end());
  return m;
}

TEST(StaleSelectionTest, GivenAFingerprintWhoseNewestEntryIsOldWhenSelectedThenStaleWithItsAge) {
  const Fingerprint old = testFingerprint("NVIDIA A100");
  const Fingerprint fresh = testFingerprint("NVIDIA H200");
  // The old fingerprint's newest entry is 31 days old; the fresh one has an old entry and a new one.
  std::vector<Entry> entries = {at(old, "v1", kNow - 40 * kDay), at(old, "v2", kNow - 31 * kDay),
                                at(fresh, "v1", kNow - 90 * kDay), at(fresh, "v2", kNow - 29 * kDay)};
  StaleSelection s = selectStale(entries, policy(), machineOf({}));
  ASSERT_EQ(s.stale.size(), 1u);
  EXPECT_EQ(s.stale[0].fingerprint, old.key());
  EXPECT_EQ(s.stale[0].entries, 2u);
  EXPECT_EQ(s.stale[0].newestUnix, kNow - 31 * kDay);
  EXPECT_EQ(s.stale[0].reason, "newest entry 31 days old, over 30");
  EXPECT_EQ(s.staleEntries(), 2u);
  EXPECT_TRUE(s.keptForMachine.empty());
}

TEST(StaleSelectionTest, GivenTheAgeLimitWhenAnEntryIsExactlyThatOldThenNotStale) {
  const Fingerprint f = testFingerprint();
  EXPECT_TRUE(selectStale({at(f, "v", kNow - 30 * kDay)}, policy(), machineOf({})).stale.empty());
  EXPECT_EQ(selectStale({at(f, "v", kNow - 30 * kDay - 1)}, policy(), machineOf({})).stale.size(), 1u);
  // --days 0: anything written before now.
  EXPECT_EQ(selectStale({at(f, "v", kNow - 1)}, policy(0), machineOf({})).stale.size(), 1u);
  // A clock that went backwards never makes an entry stale.
  EXPECT_TRUE(selectStale({at(f, "v", kNow + kDay)}, policy(0), machineOf({})).stale.empty());
}

TEST(StaleSelectionTest, GivenAnotherHotkernelVersionWhenSelectedThenStaleHoweverNew) {
  const Fingerprint other = withVersion("NVIDIA H200", "0.0.9");
  StaleSelection s = selectStale({at(other, "v", kNow)}, policy(), machineOf({}));
  ASSERT_EQ(s.stale.size(), 1u);
  EXPECT_EQ(s.stale[0].hotkernelVersion, "0.0.9");
  EXPECT_EQ(s.stale[0].reason, "hotkernel 0.0.9, not 0.1.0");
}

TEST(StaleSelectionTest, GivenThisMachinesFingerprintWhenStaleThenKept) {
  const Fingerprint mine = testFingerprint();
  const Fingerprint other = testFingerprint("NVIDIA A100");
  std::vector<Entry> entries = {at(mine, "v", kNow - 400 * kDay), at(other, "v", kNow - 400 * kDay)};
  StaleSelection s = selectStale(entries, policy(), machineOf({mine.key()}));
  ASSERT_EQ(s.stale.size(), 1u);
  EXPECT_EQ(s.stale[0].fingerprint, other.key());
  EXPECT_EQ(s.keptForMachine, std::vector<std::string>{mine.key()});
}

TEST(StaleSelectionTest, GivenAnUnreadableFingerprintJsonWhenSelectedThenJudgedByAgeAlone) {
  Entry fresh = at(testFingerprint(), "v", kNow);
  fresh.fingerprintJson = "{damaged";
  EXPECT_TRUE(selectStale({fresh}, policy(), machineOf({})).stale.empty());
  Entry old = at(testFingerprint(), "v", kNow - 100 * kDay);
  old.fingerprintJson = "{damaged";
  StaleSelection s = selectStale({old}, policy(), machineOf({}));
  ASSERT_EQ(s.stale.size(), 1u);
  EXPECT_EQ(s.stale[0].hotkernelVersion, "");
  EXPECT_EQ(s.stale[0].reason, "newest entry 100 days old, over 30");
}

}  // namespace
}  // namespace hotkernel::cli
