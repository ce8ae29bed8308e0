#pragma once
// What `hotkernel doctor` finds on this machine: everything a serving process
// needs from it (the preload shim and the library it loads, the CUDA driver
// and a device, NVRTC, a usable cache directory, hotkernel switched on), the
// torch the library was built against, the device fingerprints and the
// HOTKERNEL_* variables in effect. Gathered without torch and without
// touching a GPU beyond the driver's device queries; nothing is created or
// written (the cache is opened read-only).

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "BuildInfo.h"
#include "CudaProbe.h"
#include "EnvironmentVariables.h"

namespace hotkernel::cli {

struct DoctorDevice {
  CudaDeviceInfo info;
  std::string fingerprint;      // the key, "" when unknown
  std::string environmentJson;  // the fingerprint's canonical JSON, "" when unknown
  std::string fingerprintNote;  // why it is unknown
  std::optional<size_t> cachedEntries;  // entries under this fingerprint, when the cache could be read
};

// Where the cache stands, as CacheStore::openReadOnly judges it.
enum class CacheVerdict {
  Ok,       // the directory and database pass every check
  Absent,   // no cache yet: created at first use
  Refused,  // unsafe or unreadable: serving runs without a cache
};
const char* toString(CacheVerdict verdict);  // "ok", "absent", "refused"

// A read-only cache of HOTKERNEL_CACHE_PATH, judged as a serving process opens it (Note [Cache tiers]): a
// refused or absent tier is skipped there, so it is shown here but is not a problem.
struct CacheTierReport {
  std::string directory;  // as listed
  CacheVerdict verdict = CacheVerdict::Absent;
  std::string detail;  // the refusal, or what was found
  std::optional<size_t> entries;
};

struct DoctorReport {
  BuildInfo build;
  std::string preloadPath;  // the shim, "" when the binary's location is unknown
  bool preloadFound = false;
  std::string libraryPath;  // what the shim loads
  bool libraryFound = false;
  CudaProbe cuda;
  std::vector<DoctorDevice> devices;
  bool nvrtcFound = false;
  int nvrtcVersion = 0;
  std::string nvrtcLibrary;
  std::string nvrtcError;
  std::string cacheDirectory;  // absolute
  CacheVerdict cacheVerdict = CacheVerdict::Absent;
  std::string cacheDetail;  // the refusal, or what was found
  std::optional<size_t> cacheEntries;
  std::vector<CacheTierReport> cacheTiers;  // HOTKERNEL_CACHE_PATH, in order
  bool enabled = true;   // HOTKERNEL
  bool optimize = true;  // HOTKERNEL_OPTIMIZE
  std::vector<VariableReport> variables;
  // What keeps a serving process from being served, one line each; empty: ready.
  std::vector<std::string> problems;

  bool ready() const { return problems.empty(); }
};

// Looks at this machine and this environment. Never throws.
DoctorReport diagnose();

// "13.0" from 13000 (CUDA_VERSION's encoding).
std::string cudaVersionText(int version);

}  // namespace hotkernel::cli
