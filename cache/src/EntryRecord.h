#pragma once
// What makes a stored entry trustworthy: its invariants and its record digest.
//
// Note [Record digest, format v1]
// cubin_sha256 covers the cubin bytes. The record digest covers everything
// else that steers a launch or a decision (a flipped byte in params could
// change the launch geometry; one in decision could turn keep_aten into a
// kernel), so a read accepts an entry only if both match. It is the lowercase
// hex SHA-256 of
//
//   "hotkernel-cache-record-v1\n"
//   then for each field, in this order:  <decimal byte length> ":" <bytes> "\n"
//     fingerprint, op, variant, fingerprint_json, decision, family, params,
//     kernel_name, cubin_sha256, metrics, created_unix (decimal text)
//
// Length prefixes make the encoding unambiguous. Changing it requires a new
// tag ("-v2") and a new cache format version (CacheStore::kFormatVersion).
//
// Note [Entry signature, v1]
// The digests above detect damage, not tampering: whoever can write the
// database can recompute them. With a key (Note [Cache key file] in
// hotkernel/cache/EntryKey.h) put() also stores, in the column `signature`
// (cache format 3),
//
//   "hmac-sha256-v1:" + lowercase hex HMAC-SHA256(key, message)
//
// where message is
//
//   "hotkernel-cache-signature-v1\n"
//   then for each field, in this order:  <decimal byte length> ":" <bytes> "\n"
//     fingerprint, op, variant, fingerprint_json, decision, family, params,
//     kernel_name, cubin_sha256, metrics, created_unix (decimal text),
//     record_sha256
//
// So the signature binds the entry's identity (fingerprint, op, variant),
// what it launches (decision, family, params, kernel name, and the cubin
// through its SHA-256, which every read recomputes from the bytes) and the
// record digest. Rows without a signature store ''. A read in signed mode
// refuses an entry whose signature is missing ("unsigned") or does not verify
// under the key ("bad signature"), comparing in constant time. Another
// scheme or message layout takes a new prefix ("hmac-sha256-v2:"); readers
// treat an unknown prefix as a bad signature.

#include <string>

#include "hotkernel/cache/Entry.h"
#include "hotkernel/cache/EntryKey.h"
#include "hotkernel/cache/VerifyReport.h"

namespace hotkernel::cache::detail {

// SHA-256 of the record encoding above; uses entry.cubinSha256 as stored, not the cubin.
std::string recordDigest(const Entry& entry);

// Throws Error unless `entry` may be stored: the read invariants below, plus
// fingerprint == Fingerprint::fromCanonicalJson(fingerprintJson).key() and
// params/metrics being JSON. Expects cubinSha256 already computed.
void checkPuttable(const Entry& entry);

// The invariants every stored entry keeps (cheap; no JSON parsing). Returns
// what is violated, or an empty string. `cubinBytes` is the stored cubin size.
std::string invariantViolation(const Entry& entry, int64_t cubinBytes);

// The signature message of Note [Entry signature, v1].
std::string signatureMessage(const Entry& entry, const std::string& recordSha256);
// The stored form of a signature: "hmac-sha256-v1:" + hex HMAC of signatureMessage.
std::string entrySignature(const EntryKey& key, const Entry& entry, const std::string& recordSha256);

// Full check of a stored entry whose cubin was loaded: invariants, cubin
// SHA-256, record digest, and in signed mode (trust.signedMode()) the
// signature. Fills key fields and status/detail of the report.
VerifyReport verifyStored(const Entry& entry, const std::string& storedRecordDigest,
                          const std::string& storedSignature, const EntryTrust& trust);

}  // namespace hotkernel::cache::detail
