// fuzz_cache_row: what a read does with one row of the cache database
// (cache/src/EntryRecord.cpp: invariants, cubin hash, record digest, the checks
// before a put) and how the runtime decodes an entry it loads (the variant
// string, the params JSON of its family: interpose/engine/Engine.cpp publishEntry).
//
// Input: the row's text columns, one a line, in the column order of
// CacheStore.cpp's readRow (fingerprint, op, variant, fingerprint_json,
// decision, family, params, kernel_name, cubin_sha256, metrics, created_unix,
// record_sha256, signature), then the cubin bytes (the rest of the input). The
// row is read as a store without a key reads it and as a signed store under a
// fixed key does (Note [Entry signature, v1]).
#include <nlohmann/json.hpp>

#include "EntryRecord.h"
#include "hotkernel/cache/EntryKey.h"
#include "FuzzSupport.h"
#include "hotkernel/kernels/CrossEntropyFamily.h"
#include "hotkernel/kernels/NormCommon.h"
#include "hotkernel/kernels/ReduceFamily.h"
#include "hotkernel/kernels/SoftmaxFamily.h"
#include "hotkernel/kernels/VariantOptions.h"
#include "hotkernel/runtime/Fingerprint.h"

using namespace hotkernel;

namespace {

// The next line of `in` from `at` (without its newline); the rest when there is none.
std::string nextLine(const std::string& in, size_t& at) {
  const size_t nl = in.find('\n', at);
  const size_t end = nl == std::string::npos ? in.size() : nl;
  std::string line = in.substr(at, end - at);
  at = nl == std::string::npos ? in.size() : nl + 1;
  return line;
}

// The family's parameter point, as makePlan reads it before it loads the cubin.
void decodeParams(const std::string& family, const nlohmann::json& params) {
  if (family == kernels::SoftmaxFamily::kName || family == kernels::softmaxFamilyName(kernels::SoftmaxOp::LogSoftmax)) {
    kernels::SoftmaxParams::fromJson(params).describe();
  } else if (family == "rms_norm" || family == "layer_norm") {
    kernels::NormParams::fromJson(params).describe();
  } else if (family == kernels::CrossEntropyFamily::kName) {
    kernels::CrossEntropyParams::fromJson(params).describe();
  } else if (kernels::reduceOpOfFamily(family)) {
    kernels::ReduceParams::fromJson(params).describe();
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) { return fuzz::quiet(); }

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string in = fuzz::text(data, size);
  size_t at = 0;
  cache::Entry e;
  for (std::string* column : {&e.fingerprint, &e.op, &e.variant, &e.fingerprintJson, &e.decision, &e.family,
                              &e.params, &e.kernelName, &e.cubinSha256, &e.metrics}) {
    *column = nextLine(in, at);
  }
  const std::string created = nextLine(in, at);
  e.createdUnix = static_cast<int64_t>(std::strtoull(created.c_str(), nullptr, 10));
  const std::string recordSha256 = nextLine(in, at);
  const std::string signature = nextLine(in, at);
  e.cubin = in.substr(at);
  e.cubinBytes = static_cast<int64_t>(e.cubin.size());

  // The read: a row is served only when every check passes.
  const cache::VerifyReport report = cache::detail::verifyStored(e, recordSha256, signature, cache::EntryTrust::none());
  // Signed mode: a row passes only with the key's own signature of it, and only if it passes without a key.
  static const cache::EntryTrust kSigned = cache::EntryTrust::withKey(cache::EntryKey::fromBytes(std::string(32, 'k')));
  const cache::VerifyReport signedReport = cache::detail::verifyStored(e, recordSha256, signature, kSigned);
  if (signedReport.status == cache::VerifyStatus::Ok) {
    HK_FUZZ_ASSERT(report.status == cache::VerifyStatus::Ok);
    HK_FUZZ_ASSERT(signature == cache::detail::entrySignature(*kSigned.key, e, recordSha256));
  }
  const bool puttable = fuzz::accepts([&] { cache::detail::checkPuttable(e); });
  if (report.status == cache::VerifyStatus::Ok) {
    HK_FUZZ_ASSERT(cache::detail::invariantViolation(e, e.cubinBytes).empty());
    HK_FUZZ_ASSERT(cache::detail::recordDigest(e) == recordSha256);
  }
  if (puttable) {
    HK_FUZZ_ASSERT(Fingerprint::fromCanonicalJson(e.fingerprintJson).key() == e.fingerprint);
  }

  // The runtime's decode of a kernel entry (Engine::publishEntry, up to the cubin load).
  if (const std::optional<VariantKey> key = kernels::parseVariantString(e.variant, 0)) {
    HK_FUZZ_ASSERT(key->rows >= 1 && key->cols >= 1);
  }
  const nlohmann::json params = nlohmann::json::parse(e.params, nullptr, /*allow_exceptions=*/false);
  fuzz::accepts([&] { decodeParams(e.family, params); });
  return 0;
}
