#pragma once
// A cache bundle on disk (`cache export --out`, `cache import FILE`).
//
// Note [Bundle files]
// Reading: the path is stat'ed first and only a regular file is opened (a
// FIFO or a device is never opened, so never waited on), with O_NONBLOCK, and
// fstat'ed again; a file over kMaxBundleBytes is refused before it is read.
// Writing: the bytes go to "<path>.tmp-<pid>" (created exclusively, without
// following a symlink; mode 0644 less the umask), are flushed with fsync,
// then renamed over <path>, so a reader sees the old file or the whole new
// one, never a part.

#include <cstddef>
#include <string>

namespace hotkernel::cli {

inline constexpr size_t kMaxBundleBytes = size_t{4} << 30;  // 4 GiB

// Reads the bundle file at `path` (Note [Bundle files]). Returns "" and sets
// *bytes, or the problem in one line that names the path.
std::string readBundleFile(const std::string& path, std::string* bytes);

// Writes `bytes` to `path` (Note [Bundle files]). Throws hotkernel::Error with
// one line naming the path; no temporary file is left behind.
void writeBundleFile(const std::string& path, const std::string& bytes);

}  // namespace hotkernel::cli
