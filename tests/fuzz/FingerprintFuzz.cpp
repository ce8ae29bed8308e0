// fuzz_fingerprint: Fingerprint::fromCanonicalJson (runtime/src/Fingerprint.cpp),
// the environment fingerprint stored as JSON in every cache row.
#include "FuzzSupport.h"
#include "hotkernel/runtime/Fingerprint.h"

using namespace hotkernel;

extern "C" int LLVMFuzzerInitialize(int*, char***) { return fuzz::quiet(); }

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string json = fuzz::text(data, size);
  Fingerprint f;
  if (!fuzz::accepts([&] { f = Fingerprint::fromCanonicalJson(json); })) return 0;
  const Fingerprint back = Fingerprint::fromCanonicalJson(f.canonicalJson());
  HK_FUZZ_ASSERT(back.canonicalJson() == f.canonicalJson());
  HK_FUZZ_ASSERT(back.key() == f.key());
  return 0;
}
