#include "hotkernel/runtime/Hash.h"

#include <openssl/evp.h>

#include "hotkernel/runtime/Check.h"

namespace hotkernel {

std::string sha256Hex(const void* data, size_t size) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HOTKERNEL_CHECK(EVP_Digest(data, size, digest, &len, EVP_sha256(), nullptr) == 1, "SHA-256 failed");
  static const char kHex[] = "0123456789abcdef";
  std::string out(2 * len, '0');
  for (unsigned int i = 0; i < len; ++i) {
    out[2 * i] = kHex[digest[i] >> 4];
    out[2 * i + 1] = kHex[digest[i] & 15];
  }
  return out;
}

}  // namespace hotkernel
