// EntryKey and EntryTrust: the key file's checks (Note [Cache key file]) and
// the HMAC itself.

#include "hotkernel/cache/EntryKey.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>

#include "CacheTestUtil.h"
#include "hotkernel/runtime/Check.h"

namespace hotkernel::cache {
namespace {

using test::TempDir;

const std::string kKeyBytes(32, 'k');

// Writes `bytes` to `path` with `mode` (chmod after the write, so the umask does not matter).
std::string keyFile(const std::string& path, const std::string& bytes, mode_t mode) {
  test::writeFile(path, bytes);
  EXPECT_EQ(::chmod(path.c_str(), mode), 0);
  return path;
}

// The refusal message of fromFile, or "" when it accepts the file.
std::string refusal(const std::string& path, const std::string& cacheDir) {
  try {
    EntryKey::fromFile(path, cacheDir);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(EntryKeyTest, GivenPrivateKeyFileOutsideCacheWhenReadThenAcceptedWithModes0600And0400) {
  TempDir tmp;
  EXPECT_EQ(refusal(keyFile(tmp.sub("k600"), kKeyBytes, 0600), tmp.sub("cache")), "");
  EXPECT_EQ(refusal(keyFile(tmp.sub("k400"), kKeyBytes, 0400), tmp.sub("cache")), "");
}

TEST(EntryKeyTest, GivenGroupReadableKeyFileWhenReadThenRefusedNamingTheMode) {
  TempDir tmp;
  std::string error = refusal(keyFile(tmp.sub("key"), kKeyBytes, 0644), tmp.sub("cache"));
  EXPECT_NE(error.find("mode is 0644"), std::string::npos) << error;
  EXPECT_NE(error.find("0600 or 0400"), std::string::npos) << error;
  EXPECT_EQ(error.find('\n'), std::string::npos) << "one line: " << error;
  EXPECT_NE(refusal(keyFile(tmp.sub("key2"), kKeyBytes, 0640), tmp.sub("cache")), "");
  EXPECT_NE(refusal(keyFile(tmp.sub("key3"), kKeyBytes, 0700), tmp.sub("cache")), "");
}

TEST(EntryKeyTest, GivenShortKeyFileWhenReadThenRefusedNamingTheSize) {
  TempDir tmp;
  std::string error = refusal(keyFile(tmp.sub("key"), std::string(31, 'k'), 0600), tmp.sub("cache"));
  EXPECT_NE(error.find("holds 31 bytes"), std::string::npos) << error;
  EXPECT_NE(refusal(keyFile(tmp.sub("empty"), "", 0600), tmp.sub("cache")), "");
}

TEST(EntryKeyTest, GivenMissingKeyFileWhenReadThenRefused) {
  TempDir tmp;
  std::string error = refusal(tmp.sub("absent"), tmp.sub("cache"));
  EXPECT_NE(error.find("cannot open it"), std::string::npos) << error;
}

TEST(EntryKeyTest, GivenKeyFileInsideCacheDirectoryWhenReadThenRefused) {
  TempDir tmp;
  std::string cache = tmp.sub("cache");
  ASSERT_EQ(::mkdir(cache.c_str(), 0700), 0);
  ASSERT_EQ(::mkdir((cache + "/sub").c_str(), 0700), 0);
  std::string error = refusal(keyFile(cache + "/key", kKeyBytes, 0600), cache);
  EXPECT_NE(error.find("inside the cache directory"), std::string::npos) << error;
  EXPECT_NE(refusal(keyFile(cache + "/sub/key", kKeyBytes, 0600), cache), "");
}

TEST(EntryKeyTest, GivenDirectoryOrSymlinkAsKeyFileWhenReadThenRefused) {
  TempDir tmp;
  std::string dir = tmp.sub("keydir");
  ASSERT_EQ(::mkdir(dir.c_str(), 0700), 0);
  EXPECT_NE(refusal(dir, tmp.sub("cache")).find("not a regular file"), std::string::npos);
  std::string link = tmp.sub("link");
  ASSERT_EQ(::symlink(keyFile(tmp.sub("key"), kKeyBytes, 0600).c_str(), link.c_str()), 0);
  EXPECT_NE(refusal(link, tmp.sub("cache")).find("symlink"), std::string::npos);
}

TEST(EntryKeyTest, GivenRefusedKeyFileWhenTrustBuiltThenSignedModeWithNoKey) {
  TempDir tmp;
  EntryTrust trust = EntryTrust::fromKeyFile(keyFile(tmp.sub("key"), kKeyBytes, 0644), tmp.sub("cache"));
  EXPECT_TRUE(trust.signedMode());
  EXPECT_EQ(trust.key, nullptr);
  EXPECT_NE(trust.keyRefused.find("HOTKERNEL_CACHE_KEY_FILE"), std::string::npos) << trust.keyRefused;
  EXPECT_FALSE(EntryTrust::fromKeyFile("", tmp.sub("cache")).signedMode());
  EntryTrust good = EntryTrust::fromKeyFile(keyFile(tmp.sub("good"), kKeyBytes, 0400), tmp.sub("cache"));
  EXPECT_NE(good.key, nullptr);
  EXPECT_TRUE(good.keyRefused.empty());
}

TEST(EntryKeyTest, GivenKeyWhenMacComputedThenMatchesOpensslCommandLine) {
  // The expected value comes from
  //   printf 'hello' | openssl dgst -sha256 -hmac kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk
  EntryKey key = EntryKey::fromBytes(kKeyBytes);
  EXPECT_EQ(key.hmacSha256Hex("hello"), "b77dedb81d7deb352f617552af07a682c4267366ef53870025bc48b701c8a76d");
  EXPECT_NE(key.hmacSha256Hex("hello"), EntryKey::fromBytes(std::string(32, 'j')).hmacSha256Hex("hello"));
  EXPECT_EQ(key.id().size(), 8u);
  EXPECT_THROW(EntryKey::fromBytes(std::string(31, 'k')), Error);
}

}  // namespace
}  // namespace hotkernel::cache
