// `hotkernel cache ls/show/verify/rm` run as an unprivileged uid against a
// root-owned, read-only cache baked into an image (Note [Read-only cache
// directories]): the reading commands read it, `rm` is refused, and nothing
// in it changes. Runs as root to build the cache and drop to
// kUnprivilegedUid; skipped otherwise.

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "BakedCacheTestUtil.h"
#include "CacheTestUtil.h"
#include "RunCli.h"
#include "hotkernel/cache/CacheStore.h"
#include "hotkernel/cache/EntryKey.h"

namespace hotkernel::cli {
namespace {

using cache::CacheStore;
using cache::EntryKey;
using cache::EntryTrust;
using cache::test::DirectorySnapshot;
using cache::test::kernelEntry;
using cache::test::kUnprivilegedGid;
using cache::test::kUnprivilegedUid;
using cache::test::runUnprivileged;
using cache::test::TempDir;
using cache::test::testFingerprint;

const std::string kOp = "aten::_softmax";
const std::string kSigned = "dtype=bf16;rows=8;cols=64";
const std::string kUnsigned = "dtype=bf16;rows=16;cols=64";
const std::string kKeyBytes = "hotkernel-test-key-0123456789abcdef";

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

class CacheCommandsUnprivilegedTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) {
      GTEST_SKIP() << "building a root-owned cache and dropping to uid " << kUnprivilegedUid
                   << " needs root; this test runs as uid " << ::geteuid();
    }
    ASSERT_EQ(::chmod(tmp_.path().c_str(), 0755), 0);
    baked_ = tmp_.sub("image-cache");
    { CacheStore::open(baked_, EntryTrust::none())->put(kernelEntry(kOp, kUnsigned)); }
    { CacheStore::open(baked_, EntryTrust::withKey(EntryKey::fromBytes(kKeyBytes)))->put(kernelEntry(kOp, kSigned)); }
    cache::test::makeWorldReadable(baked_);
    keyFile_ = tmp_.sub("serving.key");  // the serving user's key (Note [Cache key file])
    cache::test::writeFile(keyFile_, kKeyBytes);
    ASSERT_EQ(::chown(keyFile_.c_str(), kUnprivilegedUid, kUnprivilegedGid), 0);
    ASSERT_EQ(::chmod(keyFile_.c_str(), 0400), 0);
  }

  TempDir tmp_;
  std::string baked_;
  std::string keyFile_;
};

TEST_F(CacheCommandsUnprivilegedTest, GivenARootBakedCacheWhenLsShowAndVerifyRunUnprivilegedThenTheyReadItAndChangeNothing) {
  const DirectorySnapshot before = DirectorySnapshot::of(baked_);

  auto ls = runUnprivileged(test::cliPath(), {"cache", "ls", "--json", "--dir", baked_}, {});
  ASSERT_EQ(ls.exitCode, 0) << ls.out << ls.err;
  const nlohmann::json listing = nlohmann::json::parse(ls.out);
  EXPECT_EQ(listing["found"], true);
  EXPECT_EQ(listing["database"], CacheStore::databasePathFor(baked_));
  ASSERT_EQ(listing["entries"].size(), 2u) << ls.out;

  auto show = runUnprivileged(test::cliPath(), {"cache", "show", kOp, kSigned, "--dir", baked_},
                              {{"HOTKERNEL_CACHE_KEY_FILE", keyFile_}});
  ASSERT_EQ(show.exitCode, 0) << show.out << show.err;
  EXPECT_TRUE(contains(show.out, "integrity:    ok")) << show.out;

  // Under the serving key: the signed entry verifies, the unsigned one is named (exit 1).
  auto verify = runUnprivileged(test::cliPath(), {"cache", "verify", "--json", "--dir", baked_},
                                {{"HOTKERNEL_CACHE_KEY_FILE", keyFile_}});
  EXPECT_EQ(verify.exitCode, 1) << verify.out << verify.err;
  const nlohmann::json report = nlohmann::json::parse(verify.out);
  EXPECT_EQ(report["found"], true);
  EXPECT_EQ(report["entries"], 2);
  EXPECT_EQ(report["failed"], 1);
  EXPECT_EQ(report["lost"], 0);
  EXPECT_EQ(report["key_id"], EntryKey::fromBytes(kKeyBytes).id());
  std::map<std::string, std::string> verdicts;
  for (const auto& s : report["signatures"]) verdicts[s["variant"]] = s["signature"];
  EXPECT_EQ(verdicts[kSigned], "ok (signed)") << verify.out;
  EXPECT_EQ(verdicts[kUnsigned], "unsigned") << verify.out;

  const DirectorySnapshot after = DirectorySnapshot::of(baked_);
  EXPECT_EQ(after.names(), before.names());
  EXPECT_TRUE(after == before);
}

TEST_F(CacheCommandsUnprivilegedTest, GivenARootBakedCacheWhenRmRunsUnprivilegedThenRefusedWithExitTwoAndNothingRemoved) {
  const DirectorySnapshot before = DirectorySnapshot::of(baked_);
  auto rm = runUnprivileged(test::cliPath(), {"cache", "rm", "--all", "--dir", baked_}, {});
  EXPECT_EQ(rm.exitCode, 2) << rm.out << rm.err;
  EXPECT_TRUE(contains(rm.err, "hotkernel: error: refusing cache directory " + baked_)) << rm.err;
  EXPECT_TRUE(contains(rm.err, "owned by uid 0, not by the current user (uid " + std::to_string(kUnprivilegedUid)))
      << rm.err;
  EXPECT_TRUE(DirectorySnapshot::of(baked_) == before);
  EXPECT_EQ(CacheStore::openBaked(baked_, EntryTrust::none())->listMetadata().size(), 2u);
}

TEST_F(CacheCommandsUnprivilegedTest, GivenABakedCacheItsGroupMayWriteWhenLsRunsUnprivilegedThenExitTwoWithTheReason) {
  ASSERT_EQ(::chmod(baked_.c_str(), 0775), 0);
  const DirectorySnapshot before = DirectorySnapshot::of(baked_);
  auto ls = runUnprivileged(test::cliPath(), {"cache", "ls", "--dir", baked_}, {});
  EXPECT_EQ(ls.exitCode, 2) << ls.out << ls.err;
  EXPECT_TRUE(contains(ls.err, "hotkernel: error: refusing cache directory " + baked_)) << ls.err;
  EXPECT_TRUE(contains(ls.err, "writable by group or others (mode 0775)")) << ls.err;
  EXPECT_TRUE(DirectorySnapshot::of(baked_) == before);
}

}  // namespace
}  // namespace hotkernel::cli
