#include "EntryRecord.h"

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

}  // namespace

std::string recordDigest(const Entry& e) {
  std::string encoded = "hotkernel-cache-record-v1\n";
  for (const std::string* field : {&e.fingerprint, &e.op, &e.variant, &e.fingerprintJson, &e.decision, &e.family,
                                   &e.params, &e.kernelName, &e.cubinSha256, &e.metrics}) {
    appendField(encoded, *field);
  }
  appendField(encoded, std::to_string(e.createdUnix));
  return sha256Hex(encoded);
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
  } else {
    return "unknown decision '" + e.decision + "' (expected 'kernel' or 'keep_aten')";
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

VerifyReport verifyStored(const Entry& e, const std::string& storedRecordDigest) {
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
  return r;
}

}  // namespace hotkernel::cache::detail
