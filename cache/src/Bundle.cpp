// The cache bundle's writer and reader: Note [Cache bundle format, version 1]
// in hotkernel/cache/Bundle.h.

#include "hotkernel/cache/Bundle.h"

#include <openssl/crypto.h>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <tuple>
#include <utility>

#include "EntryRecord.h"
#include "hotkernel/runtime/Check.h"
#include "hotkernel/runtime/Hash.h"
#include "hotkernel/runtime/JsonFields.h"

namespace hotkernel::cache {
namespace {

constexpr size_t kMagicBytes = 8;
constexpr size_t kPreambleBytes = kMagicBytes + 4 + 8;  // magic, version, body length
constexpr size_t kDigestBytes = 32;
constexpr size_t kBlobsPerEntry = 13;
constexpr const char* kSignaturePrefix = "hmac-sha256-bundle-v1:";
constexpr const char* kSignatureTag = "hotkernel-cache-bundle-signature-v1\n";

void appendU32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out += static_cast<char>((v >> (8 * i)) & 0xff);
}

void appendU64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out += static_cast<char>((v >> (8 * i)) & 0xff);
}

void appendBlob(std::string& out, const std::string& bytes) {
  appendU64(out, bytes.size());
  out += bytes;
}

uint64_t readLittleEndian(const std::string& bytes, size_t at, int width) {
  uint64_t v = 0;
  for (int i = 0; i < width; ++i) v |= static_cast<uint64_t>(static_cast<unsigned char>(bytes[at + i])) << (8 * i);
  return v;
}

// The 32 raw bytes of a 64-digit lowercase hex SHA-256.
std::string rawDigest(const std::string& hex) {
  std::string raw(kDigestBytes, '\0');
  auto nibble = [](char c) { return c <= '9' ? c - '0' : c - 'a' + 10; };
  for (size_t i = 0; i < kDigestBytes; ++i) {
    raw[i] = static_cast<char>((nibble(hex[2 * i]) << 4) | nibble(hex[2 * i + 1]));
  }
  return raw;
}

std::string signatureOf(const EntryKey& key, const std::string& digestHex) {
  return kSignaturePrefix + key.hmacSha256Hex(kSignatureTag + digestHex);
}

std::tuple<const std::string&, const std::string&, const std::string&> keyOf(const Entry& e) {
  return std::tie(e.fingerprint, e.op, e.variant);
}

std::string describeKey(size_t index, const Entry& e) {
  return "entry " + std::to_string(index) + " (op=" + e.op + " variant=" + e.variant + " fingerprint=" +
         e.fingerprint + ")";
}

// Blobs read one after another from the body; every length is checked against what is left.
class BlobReader {
 public:
  BlobReader(const std::string& bytes, size_t begin, size_t end) : bytes_(bytes), at_(begin), end_(end) {}

  std::string next(const char* what) {
    HOTKERNEL_REQUIRE(end_ - at_ >= 8, "malformed: the body ends inside the length of ", what);
    const uint64_t length = readLittleEndian(bytes_, at_, 8);
    at_ += 8;
    HOTKERNEL_REQUIRE(length <= end_ - at_, "malformed: ", what, " claims ", length, " bytes, the body has ",
                      end_ - at_, " left");
    std::string blob = bytes_.substr(at_, static_cast<size_t>(length));
    at_ += static_cast<size_t>(length);
    return blob;
  }
  size_t left() const { return end_ - at_; }

 private:
  const std::string& bytes_;
  size_t at_;
  const size_t end_;
};

int64_t parseCreatedUnix(const std::string& text, size_t index) {
  int64_t v = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, v);
  // The record digest covers the decimal text std::to_string writes: nothing else reads back the same.
  HOTKERNEL_REQUIRE(ec == std::errc() && ptr == end && std::to_string(v) == text, "malformed: entry ", index,
                    " has created_unix '", text, "', not a decimal integer");
  return v;
}

BundleHeader readHeader(const std::string& text, size_t* entryCount) {
  const std::string where = "bundle header";
  nlohmann::json j;
  try {
    j = jsonfield::object(jsonfield::parse(text, where, jsonfield::kMaxDepth), where);
  } catch (const Error& e) {
    HOTKERNEL_THROW("malformed: ", e.what());
  }
  BundleHeader h;
  try {
    HOTKERNEL_REQUIRE(jsonfield::string(j, "format", where) == kBundleHeaderFormat, where, ".format must be \"",
                      kBundleHeaderFormat, "\"");
    HOTKERNEL_REQUIRE(jsonfield::integer(j, "version", where) == static_cast<int64_t>(kBundleFormatVersion), where,
                      ".version must be the file's format version, ", kBundleFormatVersion);
    h.hotkernelVersion = jsonfield::string(j, "hotkernel_version", where);
    h.createdUnix = jsonfield::integer(j, "created_unix", where);
    h.fingerprints = jsonfield::strings(j, "fingerprints", where);
    *entryCount = static_cast<size_t>(
        jsonfield::integer(j, "entries", where, 0, std::numeric_limits<int64_t>::max()));
  } catch (const Error& e) {
    HOTKERNEL_THROW("malformed: ", e.what());
  }
  return h;
}

Entry readEntry(BlobReader& body, size_t index) {
  Entry e;
  const std::pair<std::string*, const char*> fields[] = {
      {&e.fingerprint, "fingerprint"}, {&e.op, "op"},         {&e.variant, "variant"},
      {&e.fingerprintJson, "fingerprint_json"}, {&e.decision, "decision"}, {&e.family, "family"},
      {&e.params, "params"},           {&e.kernelName, "kernel_name"}, {&e.cubinSha256, "cubin_sha256"},
      {&e.metrics, "metrics"}};
  for (const auto& [field, what] : fields) *field = body.next(what);
  e.createdUnix = parseCreatedUnix(body.next("created_unix"), index);
  const std::string recordSha256 = body.next("record_sha256");
  e.cubin = body.next("cubin");
  e.cubinBytes = static_cast<int64_t>(e.cubin.size());
  const VerifyReport report = detail::verifyStored(e, recordSha256, "", EntryTrust::none());
  HOTKERNEL_REQUIRE(report.status == VerifyStatus::Ok, "malformed: ", describeKey(index, e), " fails its check: ",
                    toString(report.status), ": ", report.detail);
  try {
    detail::checkPuttable(e);
  } catch (const Error& err) {
    HOTKERNEL_THROW("malformed: ", describeKey(index, e), ": ", err.what());
  }
  return e;
}

// The body, once the digest and the signature hold: the header, then every entry.
void readBody(const std::string& bytes, size_t begin, size_t end, Bundle& bundle) {
  BlobReader body(bytes, begin, end);
  size_t count = 0;
  bundle.header = readHeader(body.next("the header"), &count);
  // Each entry takes at least its 13 lengths: a count beyond that is a lie, refused before anything is reserved.
  HOTKERNEL_REQUIRE(count <= body.left() / (8 * kBlobsPerEntry), "malformed: the header announces ", count,
                    " entries, the body holds at most ", body.left() / (8 * kBlobsPerEntry));
  std::set<std::string> fingerprints;
  bundle.entries.reserve(count);
  for (size_t i = 0; i < count; ++i) {
    Entry e = readEntry(body, i);
    HOTKERNEL_REQUIRE(bundle.entries.empty() || keyOf(bundle.entries.back()) < keyOf(e), "malformed: ",
                      describeKey(i, e), " is out of order or repeats a key");
    fingerprints.insert(e.fingerprint);
    bundle.entries.push_back(std::move(e));
  }
  HOTKERNEL_REQUIRE(body.left() == 0, "malformed: ", body.left(), " bytes after the last entry of the body");
  const std::vector<std::string> listed(fingerprints.begin(), fingerprints.end());
  HOTKERNEL_REQUIRE(bundle.header.fingerprints == listed,
                    "malformed: the header's fingerprints are not the entries' fingerprints, sorted, each once");
}

}  // namespace

std::string encodeBundle(const BundleHeader& header, std::vector<Entry> entries, const EntryKey* key) {
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) { return keyOf(a) < keyOf(b); });
  std::set<std::string> fingerprints;
  std::string entryBlobs;
  for (size_t i = 0; i < entries.size(); ++i) {
    const Entry& e = entries[i];
    HOTKERNEL_REQUIRE(i == 0 || keyOf(entries[i - 1]) < keyOf(e), "cannot bundle two entries with one key: ",
                      describeKey(i, e));
    HOTKERNEL_REQUIRE(sha256Hex(e.cubin) == e.cubinSha256, "cannot bundle ", describeKey(i, e),
                      ": its cubin does not hash to its cubin_sha256");
    detail::checkPuttable(e);
    fingerprints.insert(e.fingerprint);
    for (const std::string* field : {&e.fingerprint, &e.op, &e.variant, &e.fingerprintJson, &e.decision, &e.family,
                                     &e.params, &e.kernelName, &e.cubinSha256, &e.metrics}) {
      appendBlob(entryBlobs, *field);
    }
    appendBlob(entryBlobs, std::to_string(e.createdUnix));
    appendBlob(entryBlobs, detail::recordDigest(e));
    appendBlob(entryBlobs, e.cubin);
  }
  nlohmann::ordered_json h = {{"format", kBundleHeaderFormat},
                              {"version", kBundleFormatVersion},
                              {"hotkernel_version", header.hotkernelVersion},
                              {"created_unix", header.createdUnix},
                              {"fingerprints", std::vector<std::string>(fingerprints.begin(), fingerprints.end())},
                              {"entries", entries.size()}};
  std::string body;
  appendBlob(body, h.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace));
  body += entryBlobs;

  std::string out(kBundleMagic, kMagicBytes);
  appendU32(out, kBundleFormatVersion);
  appendU64(out, body.size());
  out += body;
  const std::string digestHex = sha256Hex(out);
  out += rawDigest(digestHex);
  appendBlob(out, key != nullptr ? signatureOf(*key, digestHex) : std::string());
  return out;
}

Bundle decodeBundle(const std::string& bytes, const EntryTrust& trust) {
  const size_t size = bytes.size();
  const size_t magicSeen = std::min(size, kMagicBytes);
  HOTKERNEL_REQUIRE(size > 0, "not a hotkernel cache bundle: the file is empty");
  HOTKERNEL_REQUIRE(bytes.compare(0, magicSeen, kBundleMagic, magicSeen) == 0,
                    "not a hotkernel cache bundle: it does not start with \"", kBundleMagic, "\"");
  HOTKERNEL_REQUIRE(size >= kPreambleBytes, "truncated: ", size, " bytes, shorter than the ", kPreambleBytes,
                    "-byte preamble");
  const uint64_t version = readLittleEndian(bytes, kMagicBytes, 4);
  HOTKERNEL_REQUIRE(version == kBundleFormatVersion, "unsupported bundle format version ", version,
                    ": this hotkernel reads version ", kBundleFormatVersion);
  const uint64_t bodyBytes = readLittleEndian(bytes, kMagicBytes + 4, 8);
  // The shortest file the preamble allows: the body, the digest and an empty signature's length.
  const size_t fixed = kPreambleBytes + kDigestBytes + 8;
  HOTKERNEL_REQUIRE(bodyBytes <= size - kPreambleBytes && size - bodyBytes >= fixed, "truncated: ", size,
                    " bytes, the preamble announces a body of ", bodyBytes, " bytes");
  const size_t bodyEnd = kPreambleBytes + static_cast<size_t>(bodyBytes);
  const uint64_t signatureBytes = readLittleEndian(bytes, bodyEnd + kDigestBytes, 8);
  const size_t signatureAt = bodyEnd + kDigestBytes + 8;
  HOTKERNEL_REQUIRE(signatureBytes <= size - signatureAt, "truncated: ", size, " bytes, the signature announces ",
                    signatureBytes, " bytes after byte ", signatureAt);
  HOTKERNEL_REQUIRE(signatureBytes == size - signatureAt, "trailing bytes: ", size - signatureAt - signatureBytes,
                    " bytes after the signature");
  const std::string digestHex = sha256Hex(bytes.data(), bodyEnd);
  HOTKERNEL_REQUIRE(bytes.compare(bodyEnd, kDigestBytes, rawDigest(digestHex)) == 0,
                    "damaged: the SHA-256 of its contents does not match the one it carries");
  const std::string signature = bytes.substr(signatureAt);

  Bundle bundle;
  bundle.isSigned = !signature.empty();
  if (trust.signedMode()) {
    HOTKERNEL_REQUIRE(trust.keyRefused.empty(), "bad signature: cannot check it: ", trust.keyRefused);
    HOTKERNEL_REQUIRE(bundle.isSigned, "unsigned: the bundle carries no signature, and a key is configured");
    const std::string expected = signatureOf(*trust.key, digestHex);
    HOTKERNEL_REQUIRE(signature.size() == expected.size() &&
                          CRYPTO_memcmp(signature.data(), expected.data(), expected.size()) == 0,
                      "bad signature: it does not verify under key ", trust.key->id(),
                      " (signed with another key, or altered)");
    bundle.signatureChecked = true;
  }
  readBody(bytes, kPreambleBytes, bodyEnd, bundle);
  return bundle;
}

}  // namespace hotkernel::cache
