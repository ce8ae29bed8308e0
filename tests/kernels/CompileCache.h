#pragma once
// compileCached: compileToCubin for the CPU compile tests, with the results
// kept on disk between test runs.
//
// Note [Compile results cached across test runs]
// The compile tests build hundreds of NVRTC programs (every parameter point of
// every family), most of the suite's time on two cores, and a run that changed
// no template compiles the same programs again. A successful compile is a
// function of NVRTC's version, the architecture, the options and the source,
// so its cubin and log are kept under the SHA-256 of exactly those (and of the
// NVRTC library's name, with its size where the name is a path: a patch
// release keeps the version number; entries expire anyway), in
// $HOTKERNEL_TEST_NVRTC_CACHE (default ~/.cache/hotkernel-dev/nvrtc-test-cache;
// 0 or empty: no cache), and read back instead of compiling. Failures are never
// kept (the tests that expect a template to refuse a define compile every
// time). Files are written to a temporary name and renamed, so parallel test
// processes and an interrupted run leave whole entries or none; an entry that
// cannot be read is compiled again. Only the CPU compile tests use it: the GPU
// tests and the optimizer compile as the product does.

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "hotkernel/runtime/Hash.h"
#include "hotkernel/runtime/Nvrtc.h"

namespace hotkernel::testutil {

// The cache folder, "" when caching is off (HOTKERNEL_TEST_NVRTC_CACHE=0 or empty, or no HOME).
inline std::string compileCacheDir() {
  if (const char* dir = std::getenv("HOTKERNEL_TEST_NVRTC_CACHE")) {
    const std::string d = dir;
    return d == "0" ? std::string() : d;
  }
  const char* home = std::getenv("HOME");
  return home && *home ? std::string(home) + "/.cache/hotkernel-dev/nvrtc-test-cache" : std::string();
}

namespace detail {
inline bool readWhole(const std::string& path, std::string& out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::ostringstream ss;
  ss << in.rdbuf();
  out = ss.str();
  return static_cast<bool>(in) || in.eof();
}

inline void writeWhole(const std::string& path, const std::string& bytes) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << bytes;
    if (!out) {
      ::unlink(tmp.c_str());
      return;
    }
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) ::unlink(tmp.c_str());
}

inline void makeDirs(const std::string& dir) {
  for (size_t at = 1; at != std::string::npos; at = dir.find('/', at + 1)) {
    ::mkdir(dir.substr(0, at).c_str(), 0700);
  }
  ::mkdir(dir.c_str(), 0700);
}
}  // namespace detail

// compileToCubin(source, programName, arch, options), its successful results cached on disk
// (Note [Compile results cached across test runs]). Throws what compileToCubin throws.
inline NvrtcOutput compileCached(const std::string& source, const std::string& programName, const std::string& arch,
                                 const std::vector<std::string>& options) {
  const std::string dir = compileCacheDir();
  if (dir.empty()) return compileToCubin(source, programName, arch, options);
  const std::string library = nvrtcLibraryPath();
  struct stat st {};
  const long long librarySize = ::stat(library.c_str(), &st) == 0 ? static_cast<long long>(st.st_size) : -1;
  std::string key = std::to_string(nvrtcVersion()) + '\0' + library + '\0' + std::to_string(librarySize) + '\0' +
                    arch + '\0' + programName;
  for (const std::string& o : options) key += '\0' + o;
  key += '\0';
  key += source;
  const std::string base = dir + "/" + sha256Hex(key);
  NvrtcOutput cached;
  if (detail::readWhole(base + ".log", cached.log) && detail::readWhole(base + ".cubin", cached.cubin) &&
      !cached.cubin.empty()) {
    return cached;
  }
  NvrtcOutput out = compileToCubin(source, programName, arch, options);
  detail::makeDirs(dir);
  detail::writeWhole(base + ".log", out.log);  // the log first: an entry is whole once its cubin is there
  detail::writeWhole(base + ".cubin", out.cubin);
  return out;
}

}  // namespace hotkernel::testutil
