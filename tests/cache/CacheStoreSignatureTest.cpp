// CacheStore in signed mode (Note [Entry signature, v1]): forged, foreign-key
// and unsigned rows are never returned for loading, verify names them, and a
// refused key loads nothing; without a key, signatures change nothing.

#include <gtest/gtest.h>

#include <string>

#include "CacheTestUtil.h"
#include "EntryRecord.h"
#include "hotkernel/cache/CacheStore.h"
#include "hotkernel/cache/EntryKey.h"
#include "hotkernel/runtime/Check.h"
#include "hotkernel/runtime/Hash.h"
#include "hotkernel/runtime/Logging.h"

namespace hotkernel::cache {
namespace {

using test::kernelEntry;
using test::keepAtenEntry;
using test::RawDb;
using test::TempDir;

const std::string kOp = "aten::_softmax";

EntryTrust trustWith(char fill) { return EntryTrust::withKey(EntryKey::fromBytes(std::string(32, fill))); }

std::string fp() { return test::testFingerprint().key(); }

// What a same-user attacker can do without the key: replace the cubin of
// (kOp, variant) and rewrite both digests so that the unkeyed checks pass.
void forgeCubin(const std::string& dir, const std::string& variant) {
  RawDb raw(dir);
  Entry e = kernelEntry(kOp, variant);
  e.cubin = std::string(256, '\x42');  // the attacker's code
  e.cubinSha256 = sha256Hex(e.cubin);
  e.createdUnix = raw.queryInt("SELECT created_unix FROM entries WHERE variant = '" + variant + "'");
  sqlite3_stmt* st = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(raw.handle(),
                               "UPDATE entries SET cubin = ?1, cubin_sha256 = ?2, record_sha256 = ?3 WHERE variant = ?4",
                               -1, &st, nullptr),
            SQLITE_OK);
  sqlite3_bind_blob(st, 1, e.cubin.data(), static_cast<int>(e.cubin.size()), SQLITE_TRANSIENT);
  sqlite3_bind_text(st, 2, e.cubinSha256.c_str(), -1, SQLITE_TRANSIENT);
  const std::string record = detail::recordDigest(e);
  sqlite3_bind_text(st, 3, record.c_str(), -1, SQLITE_TRANSIENT);
  sqlite3_bind_text(st, 4, variant.c_str(), -1, SQLITE_TRANSIENT);
  ASSERT_EQ(sqlite3_step(st), SQLITE_DONE);
  sqlite3_finalize(st);
}

VerifyStatus statusOf(const std::vector<VerifyReport>& reports, const std::string& variant) {
  for (const VerifyReport& r : reports) {
    if (r.variant == variant) return r.status;
  }
  ADD_FAILURE() << "no report for " << variant;
  return VerifyStatus::Ok;
}

TEST(CacheStoreSignatureTest, GivenKeyWhenEntriesPutThenSignedAndLoadedAndVerifiedOk) {
  TempDir tmp;
  auto store = CacheStore::open(tmp.path(), trustWith('a'));
  store->put(kernelEntry(kOp, "v=1"));
  store->put(keepAtenEntry(kOp, "v=2"));
  EXPECT_EQ(RawDb(tmp.path()).queryInt("SELECT count(*) FROM entries WHERE signature LIKE 'hmac-sha256-v1:%'"), 2);
  EXPECT_TRUE(store->get(fp(), kOp, "v=1").has_value());
  EXPECT_EQ(store->listForFingerprint(fp()).size(), 2u);
  for (const auto& r : store->verifyAll()) EXPECT_EQ(r.status, VerifyStatus::Ok) << r.detail;
  EXPECT_EQ(store->signatureRefusals(), 0u);
}

TEST(CacheStoreSignatureTest, GivenForgedCubinWithBothDigestsRewrittenWhenReadWithKeyThenRefusedAndReported) {
  TempDir tmp;
  CacheStore::open(tmp.path(), trustWith('a'))->put(kernelEntry(kOp, "v=1"));
  CacheStore::open(tmp.path(), trustWith('a'))->put(kernelEntry(kOp, "v=2"));
  forgeCubin(tmp.path(), "v=1");

  // Without a key the forgery passes: the digests detect damage, not tampering.
  EXPECT_EQ(CacheStore::openReadOnly(tmp.path(), EntryTrust::none())->get(fp(), kOp, "v=1")->cubin,
            std::string(256, '\x42'));

  auto store = CacheStore::openReadOnly(tmp.path(), trustWith('a'));
  EXPECT_FALSE(store->get(fp(), kOp, "v=1").has_value());
  auto loaded = store->listForFingerprint(fp());
  ASSERT_EQ(loaded.size(), 1u);
  EXPECT_EQ(loaded[0].variant, "v=2");
  EXPECT_EQ(store->signatureRefusals(), 2u);  // once per read that refused it
  auto reports = store->verifyAll();
  EXPECT_EQ(statusOf(reports, "v=1"), VerifyStatus::BadSignature);
  EXPECT_EQ(statusOf(reports, "v=2"), VerifyStatus::Ok);
}

TEST(CacheStoreSignatureTest, GivenSignatureCopiedFromAnotherRowWhenReadWithKeyThenRefused) {
  TempDir tmp;
  auto writer = CacheStore::open(tmp.path(), trustWith('a'));
  writer->put(kernelEntry(kOp, "v=1"));
  writer->put(kernelEntry(kOp, "v=2"));
  forgeCubin(tmp.path(), "v=1");
  RawDb(tmp.path()).exec(
      "UPDATE entries SET signature = (SELECT signature FROM entries WHERE variant = 'v=2') WHERE variant = 'v=1'");
  EXPECT_FALSE(CacheStore::openReadOnly(tmp.path(), trustWith('a'))->get(fp(), kOp, "v=1").has_value());
}

TEST(CacheStoreSignatureTest, GivenRowSignedWithAnotherKeyWhenReadThenRefusedAsBadSignature) {
  TempDir tmp;
  CacheStore::open(tmp.path(), trustWith('a'))->put(kernelEntry(kOp, "v=1"));
  auto store = CacheStore::openReadOnly(tmp.path(), trustWith('b'));
  EXPECT_FALSE(store->get(fp(), kOp, "v=1").has_value());
  EXPECT_TRUE(store->listForFingerprint(fp()).empty());
  auto reports = store->verifyAll();
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_EQ(reports[0].status, VerifyStatus::BadSignature);
  EXPECT_NE(reports[0].detail.find("another key"), std::string::npos) << reports[0].detail;
}

TEST(CacheStoreSignatureTest, GivenRowWrittenWithoutKeyWhenKeyLaterConfiguredThenRefusedAsUnsigned) {
  TempDir tmp;
  CacheStore::open(tmp.path(), EntryTrust::none())->put(kernelEntry(kOp, "v=1"));
  auto store = CacheStore::open(tmp.path(), trustWith('a'));
  setLogLevel(LogLevel::Warn);
  ::testing::internal::CaptureStderr();
  EXPECT_FALSE(store->get(fp(), kOp, "v=1").has_value());
  EXPECT_TRUE(store->listForFingerprint(fp()).empty());
  std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(store->signatureRefusals(), 2u);
  EXPECT_NE(log.find("refusing cache entry op=aten::_softmax variant=v=1"), std::string::npos) << log;
  EXPECT_NE(log.find("unsigned"), std::string::npos) << log;
  EXPECT_EQ(log.find("refusing"), log.rfind("refusing")) << "logged more than once: " << log;
  auto reports = store->verifyAll();
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_EQ(reports[0].status, VerifyStatus::Unsigned);
  EXPECT_STREQ(toString(reports[0].status), "unsigned");
  // Re-tuning the variant with the key replaces it with a signed row.
  store->put(kernelEntry(kOp, "v=1"));
  EXPECT_TRUE(store->get(fp(), kOp, "v=1").has_value());
}

TEST(CacheStoreSignatureTest, GivenRefusedKeyWhenStoreOpenedThenNothingLoadsAndNothingIsStored) {
  TempDir tmp;
  CacheStore::open(tmp.path(), trustWith('a'))->put(kernelEntry(kOp, "v=1"));
  CacheStore::open(tmp.path(), EntryTrust::none())->put(kernelEntry(kOp, "v=2"));
  EntryTrust refused;
  refused.keyRefused = "HOTKERNEL_CACHE_KEY_FILE: cache key file /k refused: its mode is 0644";
  auto store = CacheStore::open(tmp.path(), refused);
  EXPECT_FALSE(store->get(fp(), kOp, "v=1").has_value());
  EXPECT_TRUE(store->listForFingerprint(fp()).empty());
  EXPECT_THROW(store->put(kernelEntry(kOp, "v=3")), Error);
  for (const auto& r : store->verifyAll()) EXPECT_EQ(r.status, VerifyStatus::BadSignature) << r.variant;
  EXPECT_EQ(RawDb(tmp.path()).queryInt("SELECT count(*) FROM entries"), 2);
}

TEST(CacheStoreSignatureTest, GivenNoKeyWhenSignedAndUnsignedRowsReadThenBothLoadAfterDigestChecks) {
  TempDir tmp;
  CacheStore::open(tmp.path(), trustWith('a'))->put(kernelEntry(kOp, "v=1"));
  auto store = CacheStore::open(tmp.path(), EntryTrust::none());
  store->put(kernelEntry(kOp, "v=2"));
  EXPECT_EQ(RawDb(tmp.path()).queryText("SELECT signature FROM entries WHERE variant = 'v=2'"), "");
  EXPECT_EQ(store->listForFingerprint(fp()).size(), 2u);
  for (const auto& r : store->verifyAll()) EXPECT_EQ(r.status, VerifyStatus::Ok) << r.detail;
  // The digest checks still hold without a key.
  RawDb(tmp.path()).flipCubinByte(kOp, "v=2");
  EXPECT_FALSE(store->get(fp(), kOp, "v=2").has_value());
  EXPECT_EQ(store->signatureRefusals(), 0u);
}

TEST(CacheStoreSignatureTest, GivenEntryWhenSignatureMessageBuiltThenItFollowsTheDocumentedLayout) {
  Entry e = keepAtenEntry("op", "var");
  e.cubinSha256 = sha256Hex(e.cubin);
  e.createdUnix = 17;
  std::string expected = "hotkernel-cache-signature-v1\n";
  for (const std::string& f : {e.fingerprint, e.op, e.variant, e.fingerprintJson, e.decision, e.family, e.params,
                               e.kernelName, e.cubinSha256, e.metrics, std::string("17"), std::string("rec")}) {
    expected += std::to_string(f.size()) + ":" + f + "\n";
  }
  EXPECT_EQ(detail::signatureMessage(e, "rec"), expected);
  EntryKey key = EntryKey::fromBytes(std::string(32, 'a'));
  EXPECT_EQ(detail::entrySignature(key, e, "rec"), "hmac-sha256-v1:" + key.hmacSha256Hex(expected));
}

}  // namespace
}  // namespace hotkernel::cache
