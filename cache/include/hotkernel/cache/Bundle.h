#pragma once
// A cache bundle: verified entries of chosen fingerprints in one file, to ship
// a warmed cache to other machines or bake it into an image
// (`hotkernel cache export` / `hotkernel cache import`).
//
//   std::string bytes = encodeBundle(header, store->listForFingerprint(fp), key.get());
//   Bundle b = decodeBundle(bytes, trust);   // throws hotkernel::Error, one line, on any refusal
//
// Note [Cache bundle format, version 1]
// Integers are unsigned little-endian. A blob is a u64 byte length, then that
// many bytes.
//
//   offset 0    8 bytes   magic "HKBUNDLE"
//   offset 8    u32       format version, 1 (kBundleFormatVersion)
//   offset 12   u64       body length B
//   offset 20   B bytes   body:
//                           blob  header, a JSON object: {"format": "hotkernel-cache-bundle", "version": 1,
//                                 "hotkernel_version": "<the writer's HOTKERNEL_VERSION>", "created_unix": <int>,
//                                 "fingerprints": [<the entries' fingerprint keys, sorted, each once>],
//                                 "entries": <N>}
//                           N entries, each 13 blobs: fingerprint, op, variant, fingerprint_json, decision,
//                                 family, params, kernel_name, cubin_sha256, metrics, created_unix (decimal
//                                 text), record_sha256 (Note [Record digest, format v1]), cubin;
//                                 ordered by (fingerprint, op, variant), each key once
//   20 + B      32 bytes  SHA-256 of bytes [0, 20 + B): preamble and body
//   52 + B      blob      signature: empty (an unsigned bundle), or "hmac-sha256-bundle-v1:" + lowercase hex
//                         HMAC-SHA256(key, "hotkernel-cache-bundle-signature-v1\n" + lowercase hex of that
//                         SHA-256), with the cache key (Note [Cache key file] in EntryKey.h)
//   end of file: nothing follows the signature.
//
// The magic and the version field keep their place in every future version, so
// any reader can say what a file is; another layout takes a new version number.
// decodeBundle checks, in this order, before it returns anything: the magic,
// the version, the length (a shorter file is "truncated", a longer one has
// "trailing bytes"), the digest ("damaged"), the signature (in signed mode a
// missing one is refused as "unsigned" and a wrong one as "bad signature";
// without a key it is not checked), then the body's structure and every
// entry: its invariants, cubin SHA-256 and record digest (verifyStored), the
// put-time checks (its fingerprint is the key of its fingerprint JSON), its
// fingerprint listed in the header. The digest detects damage; only the
// signature detects tampering.

#include <cstdint>
#include <string>
#include <vector>

#include "hotkernel/cache/Entry.h"
#include "hotkernel/cache/EntryKey.h"

namespace hotkernel::cache {

inline constexpr char kBundleMagic[] = "HKBUNDLE";  // 8 bytes in the file, no terminator
inline constexpr uint32_t kBundleFormatVersion = 1;
inline constexpr const char* kBundleHeaderFormat = "hotkernel-cache-bundle";

struct BundleHeader {
  std::string hotkernelVersion;           // of the writer
  int64_t createdUnix = 0;                // when it was written
  std::vector<std::string> fingerprints;  // the entries' fingerprint keys, sorted, each once
};

struct Bundle {
  BundleHeader header;
  std::vector<Entry> entries;  // each verified; cubinBytes filled
  bool isSigned = false;       // the file carries a signature
  bool signatureChecked = false;  // it was checked under the key (decoded in signed mode)
};

// The bundle of `entries` (cubins loaded) in the format above, signed with
// `key` when it is not null. header.fingerprints is filled from the entries.
// Throws Error when an entry is not puttable (checkPuttable) or its cubin does
// not hash to its cubinSha256 (set it from the cubin or read it from a store),
// or when two entries share a key.
std::string encodeBundle(const BundleHeader& header, std::vector<Entry> entries, const EntryKey* key);

// Reads and checks a bundle (the order above). In signed mode
// (trust.signedMode()) the signature must verify under trust.key; a refused
// key refuses every bundle. Throws Error with one line that starts with the
// refusal's kind ("not a hotkernel cache bundle", "unsupported bundle format
// version", "truncated", "trailing bytes", "damaged", "unsigned",
// "bad signature", "malformed"). Never returns an entry that failed a check.
Bundle decodeBundle(const std::string& bytes, const EntryTrust& trust);

}  // namespace hotkernel::cache
