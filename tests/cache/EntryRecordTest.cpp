// EntryRecord: the record digest (a stored byte format) and entry invariants.

#include <gtest/gtest.h>

#include <functional>

#include "CacheTestUtil.h"
#include "EntryRecord.h"
#include "hotkernel/runtime/Check.h"
#include "hotkernel/runtime/Hash.h"

namespace hotkernel::cache::detail {
namespace {

Entry fixedEntry() {
  Entry e;
  e.fingerprint = "0123456789abcdef";
  e.op = "aten::_softmax";
  e.variant = "dtype=bf16;rows=1;cols=8;dev=0";
  e.fingerprintJson = "{}";
  e.decision = "kernel";
  e.family = "softmax_lastdim";
  e.params = "{}";
  e.kernelName = "k";
  e.cubin = "CUBIN";
  e.cubinSha256 = sha256Hex(e.cubin);
  e.metrics = "{}";
  e.createdUnix = 1700000000;
  return e;
}

TEST(EntryRecordTest, GivenFixedEntryWhenDigestedThenMatchesDocumentedEncoding) {
  // Spelled out from Note [Record digest, format v1]: if this fails, the
  // stored format changed and every existing cache would be refused.
  Entry e = fixedEntry();
  std::string encoded =
      "hotkernel-cache-record-v1\n"
      "16:0123456789abcdef\n"
      "14:aten::_softmax\n"
      "30:dtype=bf16;rows=1;cols=8;dev=0\n"
      "2:{}\n"
      "6:kernel\n"
      "15:softmax_lastdim\n"
      "2:{}\n"
      "1:k\n"
      "64:" +
      sha256Hex(std::string("CUBIN")) +
      "\n"
      "2:{}\n"
      "10:1700000000\n";
  EXPECT_EQ(recordDigest(e), sha256Hex(encoded));
}

TEST(EntryRecordTest, GivenAnyFieldChangedWhenDigestedThenDigestChanges) {
  const std::string base = recordDigest(fixedEntry());
  std::vector<std::function<void(Entry&)>> edits = {
      [](Entry& e) { e.fingerprint[0] = '1'; },
      [](Entry& e) { e.op += "x"; },
      [](Entry& e) { e.variant += "x"; },
      [](Entry& e) { e.fingerprintJson = "{ }"; },
      [](Entry& e) { e.decision = "keep_aten"; },
      [](Entry& e) { e.family += "x"; },
      [](Entry& e) { e.params = "{\"a\":1}"; },
      [](Entry& e) { e.kernelName += "x"; },
      [](Entry& e) { e.cubinSha256[0] = 'f'; },
      [](Entry& e) { e.metrics = "[]"; },
      [](Entry& e) { e.createdUnix += 1; },
      // Moving bytes between neighbouring fields must change the digest too.
      [](Entry& e) {
        e.op = "aten::_softma";
        e.variant = "xdtype=bf16;rows=1;cols=8;dev=0";
      },
  };
  for (size_t i = 0; i < edits.size(); ++i) {
    Entry e = fixedEntry();
    edits[i](e);
    EXPECT_NE(recordDigest(e), base) << "edit " << i;
  }
}

TEST(EntryRecordTest, GivenStoredEntryWhenVerifiedThenEachFailureClassified) {
  Entry e = fixedEntry();
  const std::string digest = recordDigest(e);
  EXPECT_EQ(verifyStored(e, digest, "", EntryTrust::none()).status, VerifyStatus::Ok);
  EXPECT_EQ(verifyStored(e, digest, "", EntryTrust::none()).op, e.op);

  Entry bitRot = e;
  bitRot.cubin[0] = 'X';
  EXPECT_EQ(verifyStored(bitRot, digest, "", EntryTrust::none()).status, VerifyStatus::HashMismatch);
  EXPECT_NE(verifyStored(bitRot, digest, "", EntryTrust::none()).detail.find("cubin"), std::string::npos);

  EXPECT_EQ(verifyStored(e, std::string(64, '0'), "", EntryTrust::none()).status, VerifyStatus::HashMismatch);

  Entry badHash = e;
  badHash.cubinSha256 = "XYZ";
  EXPECT_EQ(verifyStored(badHash, digest, "", EntryTrust::none()).status, VerifyStatus::Malformed);

  Entry emptyKernel = e;
  emptyKernel.cubin.clear();
  EXPECT_EQ(verifyStored(emptyKernel, digest, "", EntryTrust::none()).status, VerifyStatus::Malformed);
}

TEST(EntryRecordTest, GivenValidEntryFromFingerprintWhenCheckedForPutThenAccepted) {
  Entry e = cache::test::kernelEntry("aten::_softmax", "v=1");
  e.cubinSha256 = sha256Hex(e.cubin);
  EXPECT_NO_THROW(checkPuttable(e));
  e.fingerprint = "0123456789abcdef";
  EXPECT_THROW(checkPuttable(e), Error);
}

}  // namespace
}  // namespace hotkernel::cache::detail
