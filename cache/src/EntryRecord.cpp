#include "EntryRecord.h"

#include <openssl/crypto.h>

#include <nlohmann/json.hpp>

#include "hotkernel/runtime/Check.h"
#include "hotkernel/runtime/Fingerprint.h"
#include "hotkernel/runtime/Hash.h"

namespace hotkernel::cache::detail {
namespace {

void appendField(std::string& out, const std::string& field) {
  out += std::to_string(field.size());
  out += ':';
  out += field;
  out += '\n';
}

bool isLowerHex(const std::string& s, size_t length) {
  if (s.size() != length) return false;
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

// The fields both encodings share, in their documented order.
void appendRecordFields(std::string& out, const Entry& e) {
  for (const std::string* field : {&e.fingerprint, &e.op, &e.variant, &e.fingerprintJson, &e.decision, &e.family,
                                   &e.params, &e.kernelName, &e.cubinSha256, &e.metrics}) {
    appendField(out, *field);
  }
  appendField(out, std::to_string(e.createdUnix));
}

constexpr const char* kSignaturePrefix = "hmac-sha256-v1:";

// Status and detail of a signature check in signed mode; Ok when it verifies.
void checkSignature(VerifyReport& r, const Entry& e, const std::string& record, const std::string& stored,
                    const EntryTrust& trust) {
  if (!trust.keyRefused.empty()) {
    r.status = VerifyStatus::BadSignature;
    r.detail = "cannot check its signature: " + trust.keyRefused;
  } else if (stored.empty()) {
    r.status = VerifyStatus::Unsigned;
    r.detail = "no signature (written without a key), and a key is configured";
  } else {
    const std::string expected = entrySignature(*trust.key, e, record);
    if (stored.size() != expected.size() || CRYPTO_memcmp(stored.data(), expected.data(), stored.size()) != 0) {
      r.status = VerifyStatus::BadSignature;
      r.detail = "signature does not verify under key " + trust.key->id() +
                 " (signed with another key, or the entry was forged or altered)";
    }
  }
}

}  // namespace

std::string recordDigest(const Entry& e) {
  std::string encoded = "hotkernel-cache-record-v1\n";
  appendRecordFields(encoded, e);
  return sha256Hex(encoded);
}

std::string signatureMessage(const Entry& e, const std::string& recordSha256) {
  std::string message = "hotkernel-cache-signature-v1\n";
  appendRecordFields(message, e);
  appendField(message, recordSha256);
  return message;
}

std::string entrySignature(const EntryKey& key, const Entry& e, const std::string& recordSha256) {
  return kSignaturePrefix + key.hmacSha256Hex(signatureMessage(e, recordSha256));
}

std::string invariantViolation(const Entry& e, int64_t cubinBytes) {
  if (e.fingerprint.empty() || e.op.empty() || e.variant.empty()) return "empty fingerprint, op or variant";
  if (!isLowerHex(e.cubinSha256, 64)) return "cubin_sha256 is not 64 lowercase hex digits";
  if (e.decision == kDecisionKernel) {
    if (cubinBytes == 0) return "decision 'kernel' without cubin";
    if (e.kernelName.empty()) return "decision 'kernel' without kernel name";
    if (e.family.empty()) return "decision 'kernel' without kernel family";
  } else if (e.decision == kDecisionKeepAten) {
    if (cubinBytes != 0) return "decision 'keep_aten' with a cubin";
  } else if (e.decision == kDecisionAtenBackend) {
    if (cubinBytes != 0) return "decision 'aten_backend' with a cubin";
    if (!e.kernelName.empty()) return "decision 'aten_backend' with a kernel name";
    if (e.family.empty()) return "decision 'aten_backend' without family";
  } else {
    return "unknown decision '" + e.decision + "' (expected 'kernel', 'keep_aten' or 'aten_backend')";
  }
  return "";
}

void checkPuttable(const Entry& e) {
  const std::string where = " (entry op=" + e.op + " variant=" + e.variant + ")";
  std::string violation = invariantViolation(e, static_cast<int64_t>(e.cubin.size()));
  if (!violation.empty()) {
    HOTKERNEL_THROW("cannot store cache entry: ", violation, where);
  }
  std::string derived;
  try {
    derived = Fingerprint::fromCanonicalJson(e.fingerprintJson).key();
  } catch (const Error& err) {
    HOTKERNEL_THROW("cannot store cache entry: bad fingerprintJson: ", err.what(), where);
  }
  if (derived != e.fingerprint) {
    HOTKERNEL_THROW("cannot store cache entry: fingerprint ", e.fingerprint, " is not the key of fingerprintJson (",
                    derived, ")", where);
  }
  if (!nlohmann::json::accept(e.params)) {
    HOTKERNEL_THROW("cannot store cache entry: params is not JSON", where);
  }
  if (!nlohmann::json::accept(e.metrics)) {
    HOTKERNEL_THROW("cannot store cache entry: metrics is not JSON", where);
  }
}

VerifyReport verifyStored(const Entry& e, const std::string& storedRecordDigest, const std::string& storedSignature,
                          const EntryTrust& trust) {
  VerifyReport r;
  r.fingerprint = e.fingerprint;
  r.op = e.op;
  r.variant = e.variant;
  std::string violation = invariantViolation(e, static_cast<int64_t>(e.cubin.size()));
  if (!violation.empty()) {
    r.status = VerifyStatus::Malformed;
    r.detail = violation;
    return r;
  }
  std::string actual = sha256Hex(e.cubin);
  if (actual != e.cubinSha256) {
    r.status = VerifyStatus::HashMismatch;
    r.detail = "cubin SHA-256 is " + actual + ", recorded " + e.cubinSha256 + " (cubin bytes altered)";
    return r;
  }
  if (recordDigest(e) != storedRecordDigest) {
    r.status = VerifyStatus::HashMismatch;
    r.detail = "record digest mismatch (metadata altered: params, decision, metrics, ...)";
    return r;
  }
  r.status = VerifyStatus::Ok;
  if (trust.signedMode()) checkSignature(r, e, storedRecordDigest, storedSignature, trust);
  return r;
}

}  // namespace hotkernel::cache::detail
