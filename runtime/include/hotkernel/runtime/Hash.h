#pragma once
// Content hashes (SHA-256 through OpenSSL), as lowercase hex.

#include <cstddef>
#include <string>

namespace hotkernel {

std::string sha256Hex(const void* data, size_t size);
inline std::string sha256Hex(const std::string& bytes) { return sha256Hex(bytes.data(), bytes.size()); }

}  // namespace hotkernel
