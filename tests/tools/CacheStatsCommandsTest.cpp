// `hotkernel cache stats` and `hotkernel cache prune --stale`, run as a
// subprocess against caches filled through CacheStore. The test entries carry
// made-up fingerprints, so they never match the machine the tests run on (with
// or without a GPU); the matching itself is tested in CacheStatsTest and
// StaleSelectionTest.

#include <gtest/gtest.h>

#include <ctime>
#include <nlohmann/json.hpp>

#include "CacheTestUtil.h"
#include "RunCli.h"
#include "hotkernel/Config.h"
#include "hotkernel/cache/CacheStore.h"

namespace hotkernel::cli {
namespace {

using cache::CacheStore;
using cache::EntryTrust;
using cache::test::keepAtenEntry;
using cache::test::kernelEntry;
using cache::test::TempDir;
using cache::test::testFingerprint;
using nlohmann::json;
using test::runCli;

const std::string kOp = "aten::_softmax";
constexpr int64_t kDay = 86400;

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

Fingerprint current(const std::string& gpu) {
  Fingerprint f = testFingerprint(gpu);
  f.hotkernelVersion = HOTKERNEL_VERSION;
  return f;
}

Fingerprint oldVersion() {
  Fingerprint f = testFingerprint("NVIDIA H100");
  f.hotkernelVersion = "0.0.1-old";
  return f;
}

// fresh (H200, this version, written now: 2 entries), aged (A100, this version, 40 days old: 1 entry),
// other (H100, another version, written now: 1 entry).
void fill(const std::string& dir) {
  const int64_t now = static_cast<int64_t>(std::time(nullptr));
  auto store = CacheStore::open(dir, EntryTrust::none());
  cache::Entry a = kernelEntry(kOp, "v1", current("NVIDIA H200"));
  a.createdUnix = now;
  cache::Entry b = keepAtenEntry("aten::_log_softmax", "v1", current("NVIDIA H200"));
  b.createdUnix = now;
  cache::Entry c = kernelEntry(kOp, "v1", current("NVIDIA A100"));
  c.createdUnix = now - 40 * kDay;
  cache::Entry d = kernelEntry(kOp, "v1", oldVersion());
  d.createdUnix = now;
  for (const cache::Entry& e : {a, b, c, d}) store->put(e);
}

json parse(const std::string& out) {
  json j = json::parse(out, nullptr, /*allow_exceptions=*/false);
  EXPECT_TRUE(j.is_object()) << out;
  return j.is_object() ? j : json::object();
}

TEST(CacheStatsCommandsTest, GivenAFilledCacheWhenStatsJsonThenCountsByOpDecisionAndFingerprint) {
  TempDir tmp;
  fill(tmp.path());
  auto r = runCli({"cache", "stats", "--json", "--dir", tmp.path()});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  json j = parse(r.out);
  // "format" and "version" first, as in every --json object.
  EXPECT_EQ(r.out.rfind("{\n  \"format\": \"hotkernel-cache-stats\",\n  \"version\": 1,", 0), 0u) << r.out;
  EXPECT_EQ(j["format"], "hotkernel-cache-stats");
  EXPECT_EQ(j["version"], 1);
  EXPECT_EQ(j["found"], true);
  EXPECT_EQ(j["entries"], 4);
  EXPECT_EQ(j["by_op"][kOp]["entries"], 3);
  EXPECT_EQ(j["by_op"][kOp]["kernel"], 3);
  EXPECT_EQ(j["by_op"]["aten::_log_softmax"]["kernel"], 0);
  EXPECT_EQ(j["by_decision"]["kernel"], 3);
  EXPECT_EQ(j["by_decision"]["keep_aten"], 1);
  ASSERT_EQ(j["by_fingerprint"].size(), 3u);
  for (const json& f : j["by_fingerprint"]) {
    EXPECT_EQ(f["matches_machine"], false);
    if (f["fingerprint"] == current("NVIDIA H200").key()) {
      EXPECT_EQ(f["entries"], 2);
      EXPECT_EQ(f["gpu"], "NVIDIA H200");
      EXPECT_EQ(f["hotkernel"], HOTKERNEL_VERSION);
    }
  }
  ASSERT_TRUE(j["machine"]["known"].is_boolean());
  if (j["machine"]["known"].get<bool>()) {
    EXPECT_EQ(j["matching_entries"], 0);
  } else {
    EXPECT_EQ(j["matching_entries"], nullptr);
    EXPECT_TRUE(j["machine"]["unknown"].is_string());
  }
}

TEST(CacheStatsCommandsTest, GivenAFilledCacheWhenStatsThenTablesAndTheMachineLine) {
  TempDir tmp;
  fill(tmp.path());
  auto r = runCli({"cache", "stats", "--dir", tmp.path()});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "4 entries, ")) << r.out;
  EXPECT_TRUE(contains(r.out, "DECISION")) << r.out;
  EXPECT_TRUE(contains(r.out, "keep_aten  1")) << r.out;
  EXPECT_TRUE(contains(r.out, "0.0.1-old")) << r.out;
  EXPECT_TRUE(contains(r.out, "none can be matched to this machine: its fingerprint is unknown (") ||
              contains(r.out, "0 of 4 entries match this machine (fingerprint"))
      << r.out;
}

TEST(CacheStatsCommandsTest, GivenNoCacheWhenStatsThenEmptyAndNothingCreated) {
  TempDir tmp;
  auto r = runCli({"cache", "stats", "--json", "--dir", tmp.sub("none")});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  json j = parse(r.out);
  EXPECT_EQ(j["found"], false);
  EXPECT_EQ(j["entries"], 0);
  EXPECT_FALSE(std::filesystem::exists(tmp.sub("none")));
}

TEST(CacheStatsCommandsTest, GivenStaleFingerprintsWhenPruneDryRunThenNamedAndNothingRemoved) {
  TempDir tmp;
  fill(tmp.path());
  auto r = runCli({"cache", "prune", "--stale", "--dry-run", "--json", "--dir", tmp.path()});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  json j = parse(r.out);
  EXPECT_EQ(j["format"], "hotkernel-cache-prune");
  EXPECT_EQ(j["version"], 1);
  EXPECT_EQ(j["dry_run"], true);
  EXPECT_EQ(j["max_age_days"], 30);
  EXPECT_EQ(j["removed"], 2);
  ASSERT_EQ(j["stale"].size(), 2u);
  for (const json& s : j["stale"]) {
    if (s["fingerprint"] == oldVersion().key()) {
      EXPECT_EQ(s["reason"], std::string("hotkernel 0.0.1-old, not ") + HOTKERNEL_VERSION);
    } else {
      EXPECT_EQ(s["fingerprint"], current("NVIDIA A100").key());
      EXPECT_EQ(s["reason"], "newest entry 40 days old, over 30");
    }
  }
  EXPECT_EQ(CacheStore::openReadOnly(tmp.path(), EntryTrust::none())->listMetadata().size(), 4u);
}

TEST(CacheStatsCommandsTest, GivenStaleFingerprintsWhenPruneThenOnlyTheirEntriesRemoved) {
  TempDir tmp;
  fill(tmp.path());
  auto r = runCli({"cache", "prune", "--stale", "--dir", tmp.path()});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "removing 1 entry of fingerprint " + oldVersion().key())) << r.out;
  EXPECT_TRUE(contains(r.out, "removed 2 entries of 2 stale fingerprints (older than 30 days")) << r.out;
  // Without a known fingerprint nothing is kept for this machine, and it says so; the made-up
  // fingerprints never are this machine's.
  const bool known = parse(runCli({"cache", "stats", "--json", "--dir", tmp.path()}).out)["machine"]["known"];
  EXPECT_EQ(contains(r.out, "this machine's fingerprint is unknown ("), !known) << r.out;
  EXPECT_FALSE(contains(r.out, "keeping fingerprint")) << r.out;
  auto left = CacheStore::openReadOnly(tmp.path(), EntryTrust::none())->listMetadata();
  ASSERT_EQ(left.size(), 2u);
  for (const cache::Entry& e : left) EXPECT_EQ(e.fingerprint, current("NVIDIA H200").key());
  // Pruning again finds nothing stale.
  auto again = runCli({"cache", "prune", "--stale", "--json", "--dir", tmp.path()});
  EXPECT_EQ(parse(again.out)["removed"], 0);
  EXPECT_TRUE(parse(again.out)["stale"].empty());
}

TEST(CacheStatsCommandsTest, GivenDaysWhenPruneThenTheLimitApplies) {
  TempDir tmp;
  fill(tmp.path());
  auto r = runCli({"cache", "prune", "--stale", "--days", "41", "--dry-run", "--json", "--dir", tmp.path()});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_EQ(parse(r.out)["removed"], 1);  // only the other version's entry
}

TEST(CacheStatsCommandsTest, GivenBadPruneUsageWhenRunThenExitTwoWithOneReason) {
  TempDir tmp;
  auto noStale = runCli({"cache", "prune", "--dir", tmp.path()});
  EXPECT_EQ(noStale.exitCode, 2);
  EXPECT_TRUE(contains(noStale.err, "--stale is required")) << noStale.err;
  auto negative = runCli({"cache", "prune", "--stale", "--days", "-1", "--dir", tmp.path()});
  EXPECT_EQ(negative.exitCode, 2);
  EXPECT_TRUE(contains(negative.err, "--days: must be an integer in [0, 36500], got '-1'")) << negative.err;
}

TEST(CacheStatsCommandsTest, GivenNoCacheWhenPruneThenNothingCreated) {
  TempDir tmp;
  auto r = runCli({"cache", "prune", "--stale", "--dir", tmp.sub("none")});
  EXPECT_EQ(r.exitCode, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "removed 0 entries")) << r.out;
  EXPECT_FALSE(std::filesystem::exists(tmp.sub("none")));
}

}  // namespace
}  // namespace hotkernel::cli
