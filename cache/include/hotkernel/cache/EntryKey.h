#pragma once
// The key that authenticates cache entries, and what a store requires of them.
//
//   auto store = CacheStore::open(dir);    // EntryTrust::fromConfig: HOTKERNEL_CACHE_KEY_FILE, if set
//   auto store = CacheStore::open(dir, EntryTrust::withKey(EntryKey::fromFile(path, dir)));  // explicit
//
// Note [Cache key file]
// HOTKERNEL_CACHE_KEY_FILE names a file whose raw bytes are the HMAC-SHA256 key
// (Note [Entry signature, v1] in cache/src/EntryRecord.h): all of its bytes,
// a trailing newline included, between kMinBytes and kMaxBytes. Make one with
//   head -c 32 /dev/urandom > key && chmod 0400 key
// The file is refused (EntryKey::fromFile throws one line naming it and why)
// unless it is a regular file reached without following a symlink in its last
// component (opened with O_NOFOLLOW, then checked with fstat on the open
// descriptor, so the checks and the read see the same file), owned by the
// effective user or root, of mode exactly 0600 or 0400, outside the cache
// directory (a key beside the entries it signs protects nothing: whoever can
// rewrite an entry could read or replace the key), and 32 to 4096 bytes long.
// A configured key that is refused is not a reason to fall back to unsigned
// entries: the operator asked for signed entries only, so the store then loads
// no entry at all and stores none (EntryTrust::keyRefused).

#include <cstddef>
#include <memory>
#include <string>
#include <utility>

namespace hotkernel::cache {

class EntryKey {
 public:
  static constexpr size_t kMinBytes = 32;
  static constexpr size_t kMaxBytes = 4096;

  // Reads and checks the key file (Note [Cache key file]); `cacheDir` is the
  // cache directory the key must lie outside of. Throws hotkernel::Error with
  // a one-line reason when the file is refused.
  static EntryKey fromFile(const std::string& path, const std::string& cacheDir);
  // A key from its bytes (tests, tools); throws unless kMinBytes <= size <= kMaxBytes.
  static EntryKey fromBytes(std::string bytes);

  EntryKey(const EntryKey&) = default;
  EntryKey& operator=(const EntryKey&) = default;
  EntryKey(EntryKey&&) = default;
  EntryKey& operator=(EntryKey&&) = default;
  ~EntryKey();  // wipes the bytes (OPENSSL_cleanse)

  // Lowercase hex HMAC-SHA256 of `message` under this key.
  std::string hmacSha256Hex(const std::string& message) const;
  // A public name of the key for messages: the first 8 hex digits of the HMAC of a fixed label.
  std::string id() const;

 private:
  explicit EntryKey(std::string bytes) : bytes_(std::move(bytes)) {}
  std::string bytes_;
};

// What a CacheStore requires of the entries it reads and writes. Three states:
// no key (entries load after their digest checks, as without signing), a key
// (writes sign, reads return only entries whose signature verifies), and a
// refused key (a key was configured but refused: reads return nothing, writes throw).
struct EntryTrust {
  std::shared_ptr<const EntryKey> key;  // set: signed mode
  std::string keyRefused;               // not empty: why the configured key was refused

  bool signedMode() const { return key != nullptr || !keyRefused.empty(); }

  static EntryTrust none() { return EntryTrust{}; }
  static EntryTrust withKey(EntryKey key);
  // From a key file: an empty path is no key; a refused file gives keyRefused,
  // logged once per path at Error. Never throws.
  static EntryTrust fromKeyFile(const std::string& path, const std::string& cacheDir);
  // fromKeyFile(config().cacheKeyFile, cacheDir): HOTKERNEL_CACHE_KEY_FILE.
  static EntryTrust fromConfig(const std::string& cacheDir);
};

}  // namespace hotkernel::cache
