// Note [Cache tiers] and Note [Read-only cache directories] as a serving
// process meets them: a root-owned, read-only cache baked into an image, read
// by a process running as an unprivileged uid (hotkernel_cache_tier_probe:
// the engine's calls, configured from the environment), which writes to its
// own cache only and changes nothing in the baked one. Runs as root to build
// the caches and drop to kUnprivilegedUid; skipped otherwise.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

#include "BakedCacheTestUtil.h"
#include "CacheTestUtil.h"
#include "hotkernel/cache/CacheStore.h"

namespace hotkernel::cache {
namespace {

using test::DirectorySnapshot;
using test::kernelEntry;
using test::kUnprivilegedGid;
using test::kUnprivilegedUid;
using test::TempDir;
using test::testFingerprint;

const char* kSoftmax = "aten::_softmax";
const std::string kBakedVariant = "dtype=bf16;rows=8;cols=64";
const std::string kUnsignedVariant = "dtype=bf16;rows=16;cols=64";
const std::string kTunedVariant = "dtype=bf16;rows=64;cols=64";
const std::string kKeyBytes = "hotkernel-test-key-0123456789abcdef";

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

bool hasLine(const std::string& text, const std::string& line) {
  const std::vector<std::string> all = lines(text);
  return std::find(all.begin(), all.end(), line) != all.end();
}

// Lines of Note [Tier probe output, version 1] that start with `prefix`.
std::vector<std::string> linesStartingWith(const std::string& text, const std::string& prefix) {
  std::vector<std::string> out;
  for (const std::string& line : lines(text)) {
    if (line.rfind(prefix, 0) == 0) out.push_back(line);
  }
  return out;
}

std::string entryLine(const char* when, const std::string& variant) {
  const Entry e = kernelEntry(kSoftmax, variant);
  return std::string("v1 entry ") + when + " " + variant + " " + e.decision + " " + e.params;
}

class CacheTiersUnprivilegedTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) {
      GTEST_SKIP() << "building root-owned caches and dropping to uid " << kUnprivilegedUid
                   << " needs root; this test runs as uid " << ::geteuid();
    }
    ASSERT_EQ(::chmod(tmp_.path().c_str(), 0755), 0);  // the unprivileged process reaches its own and the baked caches
    ownDir_ = tmp_.sub("own");
    ASSERT_EQ(::mkdir(ownDir_.c_str(), 0700), 0);
    ASSERT_EQ(::chown(ownDir_.c_str(), kUnprivilegedUid, kUnprivilegedGid), 0);
    // Note [Cache key file]: the serving user's key, outside every cache.
    keyFile_ = tmp_.sub("serving.key");
    test::writeFile(keyFile_, kKeyBytes);
    ASSERT_EQ(::chown(keyFile_.c_str(), kUnprivilegedUid, kUnprivilegedGid), 0);
    ASSERT_EQ(::chmod(keyFile_.c_str(), 0400), 0);
  }

  EntryTrust keyTrust() const { return EntryTrust::withKey(EntryKey::fromBytes(kKeyBytes)); }

  // A closed cache, root's, holding kBakedVariant signed with the key and
  // kUnsignedVariant without a signature, made world-readable as an image build leaves it.
  std::string bake(const std::string& name) {
    const std::string dir = tmp_.sub(name);
    { CacheStore::open(dir, EntryTrust::none())->put(kernelEntry(kSoftmax, kUnsignedVariant)); }
    { CacheStore::open(dir, keyTrust())->put(kernelEntry(kSoftmax, kBakedVariant)); }
    EXPECT_FALSE(std::filesystem::exists(CacheStore::databasePathFor(dir) + "-wal")) << "the writer merged its log";
    test::makeWorldReadable(dir);
    return dir;
  }

  // The probe as kUnprivilegedUid with `cachePath` as HOTKERNEL_CACHE_PATH.
  test::UnprivilegedRun serve(const std::string& cachePath) {
    return test::runUnprivileged(HOTKERNEL_CACHE_TIER_PROBE, {kTunedVariant},
                                 {{"HOTKERNEL_CACHE_DIR", ownDir_},
                                  {"HOTKERNEL_CACHE_PATH", cachePath},
                                  {"HOTKERNEL_CACHE_KEY_FILE", keyFile_},
                                  {"HOTKERNEL_LOG_LEVEL", "info"}});
  }

  // The own cache took the put, as the unprivileged user's files.
  void expectOwnCacheWritten(const test::UnprivilegedRun& run) {
    EXPECT_TRUE(hasLine(run.out, "v1 own ok")) << run.out << run.err;
    EXPECT_TRUE(hasLine(run.out, "v1 put ok")) << run.out << run.err;
    EXPECT_TRUE(hasLine(run.out, entryLine("after", kTunedVariant))) << run.out;
    struct stat st;
    ASSERT_EQ(::stat(CacheStore::databasePathFor(ownDir_).c_str(), &st), 0);
    EXPECT_EQ(st.st_uid, kUnprivilegedUid);
    EXPECT_EQ(st.st_mode & 07777, 0600u);
  }

  // A refused tier: no tier opened, none of its entries listed, one warning naming the directory and `why`.
  void expectTierRefused(const test::UnprivilegedRun& run, const std::string& dir, const std::string& why) {
    ASSERT_EQ(run.exitCode, 0) << run.err;
    EXPECT_TRUE(hasLine(run.out, "v1 uid " + std::to_string(kUnprivilegedUid))) << run.out;
    EXPECT_TRUE(hasLine(run.out, "v1 tiers 0")) << run.out << run.err;
    EXPECT_TRUE(linesStartingWith(run.out, "v1 entry before").empty()) << run.out;
    const std::string warning = "read-only cache " + dir + " refused (";
    const size_t at = run.err.find(warning);
    ASSERT_NE(at, std::string::npos) << run.err;
    const std::string line = run.err.substr(at, run.err.find('\n', at) - at);
    EXPECT_NE(line.find(why), std::string::npos) << line;
    EXPECT_NE(line.find("); skipped"), std::string::npos) << line;
    expectOwnCacheWritten(run);
  }

  TempDir tmp_;
  std::string ownDir_;
  std::string keyFile_;
};

TEST_F(CacheTiersUnprivilegedTest, GivenARootBakedCacheWhenAnUnprivilegedProcessServesThenItReadsItWritesItsOwnAndChangesNothingThere) {
  const std::string baked = bake("image-cache");
  const DirectorySnapshot before = DirectorySnapshot::of(baked);
  const test::UnprivilegedRun run = serve(baked);
  ASSERT_EQ(run.exitCode, 0) << run.err;
  EXPECT_TRUE(hasLine(run.out, "v1 uid " + std::to_string(kUnprivilegedUid))) << run.out;
  EXPECT_TRUE(hasLine(run.out, "v1 tiers 1")) << run.out << run.err;
  // (a) the signed baked entry loads; the unsigned one does not (the tier is read under the serving key).
  EXPECT_EQ(linesStartingWith(run.out, "v1 entry before"), std::vector<std::string>{entryLine("before", kBakedVariant)})
      << run.out << run.err;
  EXPECT_TRUE(hasLine(run.out, entryLine("after", kBakedVariant))) << run.out;
  EXPECT_EQ(run.err.find("refused ("), std::string::npos) << run.err;
  // (b) the tuned entry went to the own cache.
  expectOwnCacheWritten(run);
  // (c) not one file of the baked cache created, removed or changed: no -wal, no -shm, same bytes.
  const DirectorySnapshot after = DirectorySnapshot::of(baked);
  EXPECT_EQ(after.names(), before.names());
  EXPECT_TRUE(after == before);
  EXPECT_FALSE(std::filesystem::exists(CacheStore::databasePathFor(baked) + "-wal"));
  EXPECT_FALSE(std::filesystem::exists(CacheStore::databasePathFor(baked) + "-shm"));
  auto reread = CacheStore::openBaked(baked, keyTrust());
  ASSERT_NE(reread, nullptr);
  const std::vector<Entry> entries = reread->listForFingerprint(testFingerprint().key());
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_EQ(entries[0].variant, kBakedVariant);
}

TEST_F(CacheTiersUnprivilegedTest, GivenABakedCacheItsGroupMayWriteWhenAnUnprivilegedProcessServesThenRefusedWithOneWarning) {
  const std::string baked = bake("group-writable");
  ASSERT_EQ(::chmod(baked.c_str(), 0775), 0);
  const DirectorySnapshot before = DirectorySnapshot::of(baked);
  expectTierRefused(serve(baked), baked, "it is writable by group or others (mode 0775)");
  EXPECT_TRUE(DirectorySnapshot::of(baked) == before);
}

TEST_F(CacheTiersUnprivilegedTest, GivenABakedCacheOfAnotherUserWhenAnUnprivilegedProcessServesThenRefusedWithOneWarning) {
  const std::string baked = bake("other-user");
  ASSERT_EQ(::chown(baked.c_str(), 4242, 4242), 0);
  const DirectorySnapshot before = DirectorySnapshot::of(baked);
  expectTierRefused(serve(baked), baked,
                    "owned by uid 4242, not by the current user (uid " + std::to_string(kUnprivilegedUid) + ") or root");
  EXPECT_TRUE(DirectorySnapshot::of(baked) == before);
}

TEST_F(CacheTiersUnprivilegedTest, GivenABakedCacheWithAnUnmergedLogWhenAnUnprivilegedProcessServesThenRefusedNamingTheLog) {
  // An image taken while the writer still had the cache open: its commit only in the -wal.
  const std::string live = tmp_.sub("live"), baked = tmp_.sub("unmerged");
  auto writer = CacheStore::open(live, keyTrust());
  writer->put(kernelEntry(kSoftmax, kBakedVariant));
  test::copyStoreFiles(live, baked);
  writer.reset();
  ASSERT_GT(std::filesystem::file_size(CacheStore::databasePathFor(baked) + "-wal"), 0u);
  test::makeWorldReadable(baked);
  const DirectorySnapshot before = DirectorySnapshot::of(baked);
  expectTierRefused(serve(baked), baked, "has a write-ahead log not merged into it");
  EXPECT_TRUE(DirectorySnapshot::of(baked) == before);
}

TEST_F(CacheTiersUnprivilegedTest, GivenABakedCacheLeftPrivateToRootWhenAnUnprivilegedProcessServesThenRefusedSayingSo) {
  const std::string baked = bake("root-private");
  ASSERT_EQ(::chmod(baked.c_str(), 0700), 0);  // as its writer made it: the serving user cannot enter it
  const DirectorySnapshot before = DirectorySnapshot::of(baked);
  expectTierRefused(serve(baked), baked, "Permission denied (a read-only cache must be readable by the serving user: chmod -R a+rX");
  EXPECT_TRUE(DirectorySnapshot::of(baked) == before);
}

TEST_F(CacheTiersUnprivilegedTest, GivenARefusedTierBeforeAGoodOneWhenAnUnprivilegedProcessServesThenTheGoodOneStillLoads) {
  const std::string bad = bake("bad"), good = bake("good");
  ASSERT_EQ(::chmod(bad.c_str(), 0777), 0);
  const test::UnprivilegedRun run = serve(bad + ":" + good);
  ASSERT_EQ(run.exitCode, 0) << run.err;
  EXPECT_TRUE(hasLine(run.out, "v1 tiers 1")) << run.out << run.err;
  EXPECT_EQ(linesStartingWith(run.out, "v1 entry before"), std::vector<std::string>{entryLine("before", kBakedVariant)})
      << run.out;
  EXPECT_NE(run.err.find("read-only cache " + bad + " refused ("), std::string::npos) << run.err;
  expectOwnCacheWritten(run);
}

}  // namespace
}  // namespace hotkernel::cache
