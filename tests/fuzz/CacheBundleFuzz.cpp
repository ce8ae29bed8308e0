// fuzz_cache_bundle: what `hotkernel cache import` does with any file before
// it writes anything (cache/src/Bundle.cpp decodeBundle: Note [Cache bundle
// format, version 1]), as a store without a key reads it and as a signed
// store under a fixed key (32 bytes of 'k') does.
//
// Beyond Note [What a fuzz target asserts]: a bundle accepted under the key is
// accepted without one, with the same entries; every entry accepted is
// storable (checkPuttable) and verifies (verifyStored); and what is accepted,
// written again with encodeBundle, reads back to the same header and entries.
#include "EntryRecord.h"
#include "FuzzSupport.h"
#include "hotkernel/cache/Bundle.h"
#include "hotkernel/cache/EntryKey.h"

using namespace hotkernel;

namespace {

bool sameEntries(const std::vector<cache::Entry>& a, const std::vector<cache::Entry>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    const cache::Entry &x = a[i], &y = b[i];
    if (x.fingerprint != y.fingerprint || x.op != y.op || x.variant != y.variant ||
        x.fingerprintJson != y.fingerprintJson || x.decision != y.decision || x.family != y.family ||
        x.params != y.params || x.kernelName != y.kernelName || x.cubin != y.cubin ||
        x.cubinSha256 != y.cubinSha256 || x.metrics != y.metrics || x.createdUnix != y.createdUnix) {
      return false;
    }
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) { return fuzz::quiet(); }

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string in = fuzz::text(data, size);
  static const cache::EntryKey kKey = cache::EntryKey::fromBytes(std::string(32, 'k'));
  static const cache::EntryTrust kSigned = cache::EntryTrust::withKey(kKey);

  cache::Bundle plain;
  const bool accepted = fuzz::accepts([&] { plain = cache::decodeBundle(in, cache::EntryTrust::none()); });
  cache::Bundle keyed;
  const bool acceptedSigned = fuzz::accepts([&] { keyed = cache::decodeBundle(in, kSigned); });
  if (acceptedSigned) {
    HK_FUZZ_ASSERT(accepted);
    HK_FUZZ_ASSERT(keyed.isSigned && keyed.signatureChecked);
    HK_FUZZ_ASSERT(sameEntries(keyed.entries, plain.entries));
  }
  if (!accepted) return 0;
  HK_FUZZ_ASSERT(!plain.signatureChecked);
  for (const cache::Entry& e : plain.entries) {
    HK_FUZZ_ASSERT(fuzz::accepts([&] { cache::detail::checkPuttable(e); }));
    const cache::VerifyReport r =
        cache::detail::verifyStored(e, cache::detail::recordDigest(e), "", cache::EntryTrust::none());
    HK_FUZZ_ASSERT(r.status == cache::VerifyStatus::Ok);
  }
  // Written again (signed under the key), it reads back to the same value.
  const std::string again = cache::encodeBundle(plain.header, plain.entries, &kKey);
  const cache::Bundle reread = cache::decodeBundle(again, kSigned);
  HK_FUZZ_ASSERT(reread.header.hotkernelVersion == plain.header.hotkernelVersion);
  HK_FUZZ_ASSERT(reread.header.createdUnix == plain.header.createdUnix);
  HK_FUZZ_ASSERT(reread.header.fingerprints == plain.header.fingerprints);
  HK_FUZZ_ASSERT(sameEntries(reread.entries, plain.entries));
  return 0;
}
