// The entry key: reading and checking the key file (Note [Cache key file] in
// hotkernel/cache/EntryKey.h), HMAC-SHA256 through OpenSSL.

#include "hotkernel/cache/EntryKey.h"

#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <utility>

#include "SafePath.h"
#include "hotkernel/runtime/Check.h"
#include "hotkernel/runtime/Config.h"
#include "hotkernel/runtime/Logging.h"

namespace hotkernel::cache {
namespace {

constexpr const char* kVariable = "HOTKERNEL_CACHE_KEY_FILE";

std::string octalMode(mode_t mode) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "%04o", static_cast<unsigned>(mode & 07777));
  return buf;
}

// `path` with every symlink resolved, or "" when it cannot be resolved (it does not exist).
std::string resolved(const std::string& path) {
  char buf[PATH_MAX];
  return ::realpath(path.c_str(), buf) != nullptr ? std::string(buf) : std::string();
}

// Closes the descriptor on every path out of fromFile.
struct Fd {
  int fd;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

EntryKey::~EntryKey() {
  if (!bytes_.empty()) OPENSSL_cleanse(bytes_.data(), bytes_.size());
}

EntryKey EntryKey::fromBytes(std::string bytes) {
  if (bytes.size() < kMinBytes || bytes.size() > kMaxBytes) {
    const size_t size = bytes.size();
    OPENSSL_cleanse(bytes.data(), bytes.size());
    HOTKERNEL_THROW("cache key of ", size, " bytes refused: it must hold ", kMinBytes, " to ", kMaxBytes, " bytes");
  }
  return EntryKey(std::move(bytes));
}

EntryKey EntryKey::fromFile(const std::string& path, const std::string& cacheDir) {
  const std::string what = std::string("cache key file ") + path + " refused: ";
  if (path.empty()) HOTKERNEL_THROW("cache key file refused: the path is empty");
  Fd f{::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)};
  if (f.fd < 0) {
    const int err = errno;
    if (err == ELOOP) HOTKERNEL_THROW(what, "it is a symlink (name the file itself)");
    HOTKERNEL_THROW(what, "cannot open it: ", std::strerror(err));
  }
  struct stat st;
  if (::fstat(f.fd, &st) != 0) HOTKERNEL_THROW(what, "cannot inspect it: ", std::strerror(errno));
  if (!S_ISREG(st.st_mode)) HOTKERNEL_THROW(what, "it is not a regular file");
  if (st.st_uid != ::geteuid() && st.st_uid != 0) {
    HOTKERNEL_THROW(what, "it is owned by uid ", st.st_uid, ", not by this user (uid ", ::geteuid(), ") or root");
  }
  const mode_t mode = st.st_mode & 07777;
  if (mode != 0600 && mode != 0400) {
    HOTKERNEL_THROW(what, "its mode is ", octalMode(mode), "; it must be 0600 or 0400 (chmod 0400 ", path, ")");
  }
  const std::string real = resolved(path);
  std::string dir = resolved(cacheDir);
  if (dir.empty()) dir = detail::absolutePath(cacheDir);
  if (!dir.empty() && real.compare(0, dir.size() + 1, dir + "/") == 0) {
    HOTKERNEL_THROW(what, "it lies inside the cache directory ", dir, "; keep it outside");
  }
  if (st.st_size < static_cast<off_t>(kMinBytes) || st.st_size > static_cast<off_t>(kMaxBytes)) {
    HOTKERNEL_THROW(what, "it holds ", st.st_size, " bytes; a key is ", kMinBytes, " to ", kMaxBytes,
                    " raw bytes (head -c 32 /dev/urandom)");
  }
  std::string bytes(static_cast<size_t>(st.st_size), '\0');
  size_t got = 0;
  while (got < bytes.size()) {
    ssize_t n = ::read(f.fd, bytes.data() + got, bytes.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      OPENSSL_cleanse(bytes.data(), bytes.size());
      HOTKERNEL_THROW(what, "reading it failed after ", got, " bytes");
    }
    got += static_cast<size_t>(n);
  }
  return EntryKey(std::move(bytes));
}

std::string EntryKey::hmacSha256Hex(const std::string& message) const {
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  if (HMAC(EVP_sha256(), bytes_.data(), static_cast<int>(bytes_.size()),
           reinterpret_cast<const unsigned char*>(message.data()), message.size(), mac, &length) == nullptr) {
    HOTKERNEL_THROW("HMAC-SHA256 failed (OpenSSL)");
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(2 * length);
  for (unsigned int i = 0; i < length; ++i) {
    hex += kHex[mac[i] >> 4];
    hex += kHex[mac[i] & 0xf];
  }
  return hex;
}

std::string EntryKey::id() const { return hmacSha256Hex("hotkernel-cache-key-id-v1").substr(0, 8); }

EntryTrust EntryTrust::withKey(EntryKey key) {
  EntryTrust t;
  t.key = std::make_shared<const EntryKey>(std::move(key));
  return t;
}

EntryTrust EntryTrust::fromKeyFile(const std::string& path, const std::string& cacheDir) {
  if (path.empty()) return none();
  try {
    return withKey(EntryKey::fromFile(path, cacheDir));
  } catch (const Error& e) {
    EntryTrust t;
    t.keyRefused = std::string(kVariable) + ": " + e.what();
    HOTKERNEL_LOG_ONCE(Error, "cache-key-refused:" + path)
        << t.keyRefused << "; no cache entry is loaded or stored until it is fixed";
    return t;
  }
}

EntryTrust EntryTrust::fromConfig(const std::string& cacheDir) {
  return fromKeyFile(hotkernel::config().cacheKeyFile, cacheDir);
}

}  // namespace hotkernel::cache
