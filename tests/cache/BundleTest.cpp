// The cache bundle's format (Note [Cache bundle format, version 1]): a round
// trip keeps every field, the documented layout, and every damaged, truncated,
// extended, re-versioned, unsigned or foreign-key bundle refused with its kind.

#include "hotkernel/cache/Bundle.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "CacheTestUtil.h"
#include "hotkernel/runtime/Check.h"
#include "hotkernel/runtime/Hash.h"

namespace hotkernel::cache {
namespace {

using test::keepAtenEntry;
using test::kernelEntry;
using test::testFingerprint;

EntryKey keyOf(char fill) { return EntryKey::fromBytes(std::string(32, fill)); }
// A key that lives as long as the test: encodeBundle takes a pointer.
const EntryKey* keyPtr(char fill) {
  static const EntryKey a = keyOf('a'), k = keyOf('k');
  return fill == 'a' ? &a : &k;
}
EntryTrust trustOf(char fill) { return EntryTrust::withKey(keyOf(fill)); }

// Entries as a store returns them: cubin SHA-256 set, created_unix fixed.
Entry stored(Entry e, int64_t createdUnix) {
  e.cubinSha256 = sha256Hex(e.cubin);
  e.createdUnix = createdUnix;
  return e;
}

std::vector<Entry> sampleEntries() {
  return {stored(kernelEntry("aten::_softmax", "dtype=bf16;rows=8;cols=64", testFingerprint(), 48), 1700000000),
          stored(keepAtenEntry("aten::_log_softmax", "dtype=fp32;rows=8;cols=64"), 1700000100),
          stored(kernelEntry("aten::_softmax", "dtype=bf16;rows=8;cols=64", testFingerprint("NVIDIA A100"), 40),
                 1700000200)};
}

BundleHeader header() {
  BundleHeader h;
  h.hotkernelVersion = "9.8.7";
  h.createdUnix = 1700000300;
  return h;
}

// The refusal decodeBundle throws for `bytes`, "" when it accepts them.
std::string refusal(const std::string& bytes, const EntryTrust& trust = EntryTrust::none()) {
  try {
    decodeBundle(bytes, trust);
    return "";
  } catch (const Error& e) {
    return e.what();
  }
}

bool startsWith(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

uint64_t u64At(const std::string& bytes, size_t at) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(static_cast<unsigned char>(bytes[at + i])) << (8 * i);
  return v;
}

// Rewrites the digest over the (edited) preamble and body and drops the
// signature: what a writer with no key can always produce.
std::string resealed(std::string bytes) {
  const size_t bodyEnd = 20 + u64At(bytes, 12);
  const std::string hex = sha256Hex(bytes.data(), bodyEnd);
  std::string raw;
  for (size_t i = 0; i < 64; i += 2) raw += static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16));
  return bytes.substr(0, bodyEnd) + raw + std::string(8, '\0');
}

TEST(BundleTest, GivenEntriesWhenEncodedAndDecodedThenEveryFieldRoundTrips) {
  const std::vector<Entry> entries = sampleEntries();
  Bundle b = decodeBundle(encodeBundle(header(), entries, nullptr), EntryTrust::none());
  EXPECT_EQ(b.header.hotkernelVersion, "9.8.7");
  EXPECT_EQ(b.header.createdUnix, 1700000300);
  std::vector<std::string> fps = {testFingerprint().key(), testFingerprint("NVIDIA A100").key()};
  std::sort(fps.begin(), fps.end());
  EXPECT_EQ(b.header.fingerprints, fps);
  EXPECT_FALSE(b.isSigned);
  EXPECT_FALSE(b.signatureChecked);
  ASSERT_EQ(b.entries.size(), entries.size());
  for (const Entry& want : entries) {
    bool found = false;
    for (const Entry& got : b.entries) {
      if (got.fingerprint != want.fingerprint || got.op != want.op || got.variant != want.variant) continue;
      found = true;
      EXPECT_EQ(got.fingerprintJson, want.fingerprintJson);
      EXPECT_EQ(got.decision, want.decision);
      EXPECT_EQ(got.family, want.family);
      EXPECT_EQ(got.params, want.params);
      EXPECT_EQ(got.kernelName, want.kernelName);
      EXPECT_EQ(got.cubin, want.cubin);
      EXPECT_EQ(got.cubinSha256, want.cubinSha256);
      EXPECT_EQ(got.metrics, want.metrics);
      EXPECT_EQ(got.createdUnix, want.createdUnix);
      EXPECT_EQ(got.cubinBytes, static_cast<int64_t>(want.cubin.size()));
    }
    EXPECT_TRUE(found) << want.op << " " << want.fingerprint;
  }
}

TEST(BundleTest, GivenEntriesInAnyOrderWhenEncodedThenTheSameBytes) {
  std::vector<Entry> entries = sampleEntries();
  const std::string a = encodeBundle(header(), entries, nullptr);
  std::reverse(entries.begin(), entries.end());
  EXPECT_EQ(encodeBundle(header(), entries, nullptr), a);
}

TEST(BundleTest, GivenABundleWhenItsBytesAreReadThenTheLayoutIsTheDocumentedOne) {
  const std::string bytes = encodeBundle(header(), sampleEntries(), nullptr);
  EXPECT_EQ(bytes.substr(0, 8), "HKBUNDLE");
  EXPECT_EQ(bytes.substr(8, 4), std::string("\x01\x00\x00\x00", 4));
  const uint64_t body = u64At(bytes, 12);
  ASSERT_EQ(bytes.size(), 20 + body + 32 + 8);  // unsigned: an empty signature blob
  EXPECT_EQ(u64At(bytes, 20 + body + 32), 0u);
  const std::string hex = sha256Hex(bytes.data(), 20 + body);
  EXPECT_EQ(static_cast<unsigned char>(bytes[20 + body]), std::stoi(hex.substr(0, 2), nullptr, 16));
  const uint64_t headerBytes = u64At(bytes, 20);
  nlohmann::json h = nlohmann::json::parse(bytes.substr(28, headerBytes));
  EXPECT_EQ(h["format"], "hotkernel-cache-bundle");
  EXPECT_EQ(h["version"], 1);
  EXPECT_EQ(h["hotkernel_version"], "9.8.7");
  EXPECT_EQ(h["entries"], 3);
  EXPECT_EQ(h["fingerprints"].size(), 2u);
  // The first entry's first blob is its fingerprint, the smallest of the keys.
  const size_t first = 28 + headerBytes;
  EXPECT_EQ(bytes.substr(first + 8, u64At(bytes, first)), h["fingerprints"][0].get<std::string>());
}

TEST(BundleTest, GivenAKeyWhenEncodedThenSignedAndVerifiedUnderThatKey) {
  const std::string bytes = encodeBundle(header(), sampleEntries(), keyPtr('k'));
  Bundle b = decodeBundle(bytes, trustOf('k'));
  EXPECT_TRUE(b.isSigned);
  EXPECT_TRUE(b.signatureChecked);
  EXPECT_EQ(b.entries.size(), 3u);
  // Without a key the signature is carried but not checked.
  Bundle unchecked = decodeBundle(bytes, EntryTrust::none());
  EXPECT_TRUE(unchecked.isSigned);
  EXPECT_FALSE(unchecked.signatureChecked);
}

TEST(BundleTest, GivenEveryStrictPrefixWhenDecodedThenRefusedAsTruncated) {
  const std::string bytes = encodeBundle(header(), sampleEntries(), keyPtr('k'));
  EXPECT_TRUE(startsWith(refusal(""), "not a hotkernel cache bundle")) << refusal("");
  for (size_t length = 1; length < bytes.size(); ++length) {
    const std::string why = refusal(bytes.substr(0, length), trustOf('k'));
    ASSERT_TRUE(startsWith(why, "truncated: ")) << "length " << length << ": " << why;
    ASSERT_EQ(why, refusal(bytes.substr(0, length))) << "length " << length;
  }
}

TEST(BundleTest, GivenBytesAfterTheSignatureWhenDecodedThenRefused) {
  const std::string why = refusal(encodeBundle(header(), sampleEntries(), nullptr) + "x");
  EXPECT_TRUE(startsWith(why, "trailing bytes: 1 bytes")) << why;
}

TEST(BundleTest, GivenAnyByteFlippedWhenDecodedThenRefused) {
  for (const bool withKey : {false, true}) {
    const EntryKey key = keyOf('k');
    const std::string bytes = encodeBundle(header(), sampleEntries(), withKey ? &key : nullptr);
    const EntryTrust trust = withKey ? trustOf('k') : EntryTrust::none();
    const size_t bodyEnd = 20 + u64At(bytes, 12);
    for (size_t at = 0; at < bytes.size(); ++at) {
      std::string flipped = bytes;
      flipped[at] = static_cast<char>(flipped[at] ^ 0x01);
      const std::string why = refusal(flipped, trust);
      ASSERT_FALSE(why.empty()) << "byte " << at << (withKey ? " (signed)" : "") << " flipped, yet accepted";
      if (at < 8) EXPECT_TRUE(startsWith(why, "not a hotkernel cache bundle")) << at << ": " << why;
      if (at >= 8 && at < 12) EXPECT_TRUE(startsWith(why, "unsupported bundle format version")) << at << ": " << why;
      if (at >= 20 && at < bodyEnd + 32) EXPECT_TRUE(startsWith(why, "damaged: ")) << at << ": " << why;
      if (withKey && at >= bodyEnd + 40) EXPECT_TRUE(startsWith(why, "bad signature: ")) << at << ": " << why;
    }
  }
}

TEST(BundleTest, GivenAnotherFormatVersionWhenDecodedThenRefusedNamingBoth) {
  std::string bytes = encodeBundle(header(), sampleEntries(), nullptr);
  bytes[8] = 2;
  EXPECT_TRUE(startsWith(refusal(bytes), "unsupported bundle format version 2: this hotkernel reads version 1"))
      << refusal(bytes);
  bytes[8] = 0;
  EXPECT_TRUE(startsWith(refusal(bytes), "unsupported bundle format version 0")) << refusal(bytes);
}

TEST(BundleTest, GivenAnotherKeysBundleWhenDecodedThenBadSignature) {
  const std::string bytes = encodeBundle(header(), sampleEntries(), keyPtr('a'));
  const std::string why = refusal(bytes, trustOf('b'));
  EXPECT_TRUE(startsWith(why, "bad signature: it does not verify under key " + keyOf('b').id())) << why;
}

TEST(BundleTest, GivenAnUnsignedBundleAndAKeyWhenDecodedThenRefusedAsUnsigned) {
  const std::string bytes = encodeBundle(header(), sampleEntries(), nullptr);
  EXPECT_TRUE(startsWith(refusal(bytes, trustOf('k')), "unsigned: ")) << refusal(bytes, trustOf('k'));
  // A signed bundle stripped of its signature (and resealed) is just as unsigned.
  const std::string stripped = resealed(encodeBundle(header(), sampleEntries(), keyPtr('k')));
  EXPECT_TRUE(startsWith(refusal(stripped, trustOf('k')), "unsigned: ")) << refusal(stripped, trustOf('k'));
  EXPECT_EQ(refusal(stripped), "");
}

TEST(BundleTest, GivenARefusedKeyWhenDecodedThenEveryBundleRefused) {
  EntryTrust refused;
  refused.keyRefused = "HOTKERNEL_CACHE_KEY_FILE: cache key file /k refused: its mode is 0644";
  const std::string why = refusal(encodeBundle(header(), sampleEntries(), keyPtr('k')), refused);
  EXPECT_TRUE(startsWith(why, "bad signature: cannot check it: HOTKERNEL_CACHE_KEY_FILE")) << why;
}

TEST(BundleTest, GivenAnEditedCubinWithTheDigestRewrittenWhenDecodedThenTheEntryCheckRefusesIt) {
  std::string bytes = encodeBundle(header(), {sampleEntries()[0]}, nullptr);
  // The last blob of the body is the one entry's cubin.
  const size_t bodyEnd = 20 + u64At(bytes, 12);
  bytes[bodyEnd - 1] = static_cast<char>(bytes[bodyEnd - 1] ^ 0x40);
  const std::string why = refusal(resealed(bytes));
  EXPECT_TRUE(startsWith(why, "malformed: entry 0 (op=aten::_softmax")) << why;
  EXPECT_NE(why.find("hash-mismatch"), std::string::npos) << why;
}

TEST(BundleTest, GivenAHeaderAnnouncingMoreEntriesWhenDecodedThenMalformed) {
  std::string bytes = encodeBundle(header(), sampleEntries(), nullptr);
  const size_t at = bytes.find("\"entries\":3");
  ASSERT_NE(at, std::string::npos);
  bytes[at + 10] = '9';
  const std::string why = refusal(resealed(bytes));
  EXPECT_TRUE(startsWith(why, "malformed: ")) << why;
}

TEST(BundleTest, GivenNoEntriesWhenEncodedThenAnEmptyBundleRoundTrips) {
  Bundle b = decodeBundle(encodeBundle(header(), {}, nullptr), EntryTrust::none());
  EXPECT_TRUE(b.entries.empty());
  EXPECT_TRUE(b.header.fingerprints.empty());
}

// The fuzz seeds are written by tests/fuzz/make_seeds.py from the Note alone, without this code.
TEST(BundleTest, GivenBundlesWrittenFromTheDocumentedFormatWhenDecodedThenAccepted) {
  const std::string dir = HOTKERNEL_TEST_SOURCE_DIR "/tests/fuzz/corpus/fuzz_cache_bundle/";
  const std::string signedBytes = test::readFile(dir + "signed.bin");
  ASSERT_FALSE(signedBytes.empty());
  Bundle b = decodeBundle(signedBytes, trustOf('k'));
  EXPECT_TRUE(b.signatureChecked);
  EXPECT_EQ(b.header.hotkernelVersion, "0.1.0");
  ASSERT_EQ(b.entries.size(), 2u);
  EXPECT_EQ(b.entries[0].op, "aten::_softmax");
  EXPECT_EQ(b.entries[0].decision, "kernel");
  EXPECT_EQ(b.entries[1].decision, "keep_aten");
  EXPECT_TRUE(startsWith(refusal(signedBytes, trustOf('a')), "bad signature: ")) << refusal(signedBytes, trustOf('a'));
  // What this code writes for the same entries and header is the same file, byte for byte.
  EXPECT_EQ(encodeBundle(b.header, b.entries, keyPtr('k')), signedBytes);
  const std::string unsignedBytes = test::readFile(dir + "unsigned-keep-aten.bin");
  EXPECT_EQ(decodeBundle(unsignedBytes, EntryTrust::none()).entries.size(), 1u);
  EXPECT_TRUE(startsWith(refusal(unsignedBytes, trustOf('k')), "unsigned: "));
  EXPECT_TRUE(decodeBundle(test::readFile(dir + "empty.bin"), EntryTrust::none()).entries.empty());
}

TEST(BundleTest, GivenEntriesThatCannotBeStoredWhenEncodedThenRefused) {
  std::vector<Entry> twice = {sampleEntries()[0], sampleEntries()[0]};
  EXPECT_THROW(encodeBundle(header(), twice, nullptr), Error);
  Entry wrongHash = sampleEntries()[0];
  wrongHash.cubin[0] = static_cast<char>(wrongHash.cubin[0] ^ 1);
  EXPECT_THROW(encodeBundle(header(), {wrongHash}, nullptr), Error);
  Entry foreign = sampleEntries()[0];
  foreign.fingerprint = "0123456789abcdef";
  EXPECT_THROW(encodeBundle(header(), {foreign}, nullptr), Error);
}

}  // namespace
}  // namespace hotkernel::cache
