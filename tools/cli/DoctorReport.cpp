#include "DoctorReport.h"

#include <sys/stat.h>

#include <exception>
#include <memory>

#include "ErrorText.h"
#include "InstallLayout.h"
#include "MachineFingerprint.h"
#include "hotkernel/cache/CacheStore.h"
#include "hotkernel/runtime/Config.h"
#include "hotkernel/runtime/Nvrtc.h"

namespace hotkernel::cli {
namespace {

bool isRegularFile(const std::string& path) {
  struct stat st;
  return !path.empty() && ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

void checkFiles(DoctorReport& r) {
  r.preloadPath = preloadLibraryPath();
  r.preloadFound = isRegularFile(r.preloadPath);
  if (!r.preloadFound) {
    r.problems.push_back("the preload library " + (r.preloadPath.empty() ? std::string(kPreloadLibraryName)
                                                                          : r.preloadPath) + " is missing");
  }
  r.libraryPath = servedLibraryPath();
  r.libraryFound = isRegularFile(r.libraryPath);
  if (!r.libraryFound) {
    r.problems.push_back(r.build.withTorch ? "the library the preload loads, " + r.libraryPath + ", is missing"
                                           : "this build is torch-free: there is no libhotkernel.so to serve with "
                                             "(configure with HOTKERNEL_ENABLE_TORCH=ON)");
  }
}

void checkNvrtc(DoctorReport& r) {
  r.nvrtcFound = nvrtcAvailable();
  if (r.nvrtcFound) {
    r.nvrtcVersion = nvrtcVersion();
    r.nvrtcLibrary = nvrtcLibraryPath();
    return;
  }
  r.nvrtcError = oneLine(nvrtcUnavailableReason());
  if (r.optimize) {
    r.problems.push_back("NVRTC cannot be loaded, so nothing can be optimized (HOTKERNEL_OPTIMIZE=0 serves cached "
                         "kernels only): " + r.nvrtcError);
  }
}

void checkCache(DoctorReport& r) {
  try {
    r.cacheDirectory = cache::CacheStore::absoluteDirectory(config().cacheDir);
    std::unique_ptr<cache::CacheStore> store = cache::CacheStore::openReadOnly(r.cacheDirectory);
    if (!store) {
      r.cacheVerdict = CacheVerdict::Absent;
      r.cacheDetail = "no cache yet: created at first use";
      return;
    }
    r.cacheEntries = store->listMetadata().size();
    for (DoctorDevice& d : r.devices) {
      if (d.fingerprint.empty()) continue;
      cache::EntryFilter filter;
      filter.fingerprint = d.fingerprint;
      d.cachedEntries = store->listMetadata(filter).size();
    }
    r.cacheVerdict = CacheVerdict::Ok;
    r.cacheDetail = std::to_string(*r.cacheEntries) + (*r.cacheEntries == 1 ? " entry" : " entries");
  } catch (const std::exception& e) {
    r.cacheVerdict = CacheVerdict::Refused;
    r.cacheDetail = userMessage(e);
    r.problems.push_back("the cache is refused, so nothing is kept between runs: " + r.cacheDetail);
  }
}

void checkCacheTiers(DoctorReport& r) {
  for (const std::string& dir : config().cachePath) {
    CacheTierReport t;
    t.directory = dir;
    try {
      // As openReadOnlyTiers opens each tier (Note [Cache tiers]).
      std::unique_ptr<cache::CacheStore> store = cache::CacheStore::openReadOnly(dir);
      if (!store) {
        t.verdict = CacheVerdict::Absent;
        t.detail = "holds no cache: skipped";
      } else {
        t.entries = store->listMetadata().size();
        t.verdict = CacheVerdict::Ok;
        t.detail = std::to_string(*t.entries) + (*t.entries == 1 ? " entry" : " entries");
      }
    } catch (const std::exception& e) {
      t.verdict = CacheVerdict::Refused;
      t.detail = "skipped: " + userMessage(e);
    }
    r.cacheTiers.push_back(std::move(t));
  }
}

void checkDevices(DoctorReport& r) {
  r.cuda = probeCuda();
  if (r.cuda.devices.empty()) {
    const bool plain = r.cuda.error == kNoCudaDevice;
    r.problems.push_back(plain ? r.cuda.error : std::string(kNoCudaDevice) + ": " + r.cuda.error);
  } else if (!r.cuda.error.empty()) {
    r.problems.push_back(r.cuda.error);
  }
  for (const CudaDeviceInfo& info : r.cuda.devices) {
    DoctorDevice d;
    d.info = info;
    std::optional<Fingerprint> f =
        machineFingerprint(info, r.cuda.driverVersion, r.nvrtcFound ? r.nvrtcVersion : 0, &d.fingerprintNote);
    if (f) {
      d.fingerprint = f->key();
      d.environmentJson = f->canonicalJson();
    }
    r.devices.push_back(std::move(d));
  }
}

}  // namespace

const char* toString(CacheVerdict verdict) {
  switch (verdict) {
    case CacheVerdict::Ok: return "ok";
    case CacheVerdict::Absent: return "absent";
    case CacheVerdict::Refused: return "refused";
  }
  return "refused";
}

std::string cudaVersionText(int version) {
  return std::to_string(version / 1000) + "." + std::to_string((version % 1000) / 10);
}

DoctorReport diagnose() {
  DoctorReport r;
  r.build = buildInfo();
  const Config& c = config();
  r.enabled = c.enabled;
  r.optimize = c.optimize;
  if (!r.enabled) r.problems.push_back("HOTKERNEL is set to off: hotkernel does nothing");
  checkFiles(r);
  checkNvrtc(r);
  checkDevices(r);
  checkCache(r);
  checkCacheTiers(r);
  r.variables = hotkernelVariables();
  return r;
}

}  // namespace hotkernel::cli
