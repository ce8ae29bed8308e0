#include "hotkernel/runtime/Nvrtc.h"

#include <dlfcn.h>
#include <nvrtc.h>  // types only: every function is resolved with dlsym

#include <chrono>
#include <cstdlib>
#include <mutex>

#include "hotkernel/runtime/Check.h"
#include "hotkernel/runtime/Config.h"  // lazyVariable
#include "hotkernel/runtime/Logging.h"

namespace hotkernel {
namespace {

// The entry points hotkernel uses, resolved once from the loaded library.
// Invariant: when `handle` is non-null, every pointer below is non-null.
struct NvrtcApi {
  void* handle = nullptr;
  std::string path;           // what dlopen was given for `handle`
  std::string failureReason;  // why no candidate loaded; empty when handle != nullptr
  int version = 0;            // major*1000 + minor*10

  const char* (*getErrorString)(nvrtcResult) = nullptr;
  nvrtcResult (*getVersion)(int*, int*) = nullptr;
  nvrtcResult (*createProgram)(nvrtcProgram*, const char*, const char*, int, const char* const*,
                               const char* const*) = nullptr;
  nvrtcResult (*destroyProgram)(nvrtcProgram*) = nullptr;
  nvrtcResult (*compileProgram)(nvrtcProgram, int, const char* const*) = nullptr;
  nvrtcResult (*getProgramLogSize)(nvrtcProgram, size_t*) = nullptr;
  nvrtcResult (*getProgramLog)(nvrtcProgram, char*) = nullptr;
  nvrtcResult (*getCubinSize)(nvrtcProgram, size_t*) = nullptr;
  nvrtcResult (*getCubin)(nvrtcProgram, char*) = nullptr;
};

template <typename Fn>
bool resolve(void* handle, const char* name, Fn& fn, std::string& missing) {
  fn = reinterpret_cast<Fn>(::dlsym(handle, name));
  if (fn == nullptr) missing += std::string(missing.empty() ? "" : ", ") + name;
  return fn != nullptr;
}

// Tries one candidate; fills `api` and returns true when it loads completely.
bool tryLoad(const std::string& candidate, NvrtcApi& api, std::string& reasons) {
  void* handle = ::dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* err = ::dlerror();
    reasons += "\n  " + candidate + ": " + (err ? err : "dlopen failed");
    return false;
  }
  NvrtcApi a;
  std::string missing;
  resolve(handle, "nvrtcGetErrorString", a.getErrorString, missing);
  resolve(handle, "nvrtcVersion", a.getVersion, missing);
  resolve(handle, "nvrtcCreateProgram", a.createProgram, missing);
  resolve(handle, "nvrtcDestroyProgram", a.destroyProgram, missing);
  resolve(handle, "nvrtcCompileProgram", a.compileProgram, missing);
  resolve(handle, "nvrtcGetProgramLogSize", a.getProgramLogSize, missing);
  resolve(handle, "nvrtcGetProgramLog", a.getProgramLog, missing);
  resolve(handle, "nvrtcGetCUBINSize", a.getCubinSize, missing);
  resolve(handle, "nvrtcGetCUBIN", a.getCubin, missing);
  int major = 0, minor = 0;
  if (missing.empty() && a.getVersion(&major, &minor) != NVRTC_SUCCESS) missing = "(nvrtcVersion failed)";
  if (!missing.empty()) {
    // Never dlclose (Note [NVRTC is dlopen'ed]); a half-usable copy stays mapped but unused.
    reasons += "\n  " + candidate + ": missing " + missing;
    return false;
  }
  a.handle = handle;
  a.path = candidate;
  a.version = major * 1000 + minor * 10;
  api = a;
  return true;
}

const NvrtcApi& api() {
  static NvrtcApi instance;
  static std::once_flag once;
  std::call_once(once, [] {
    std::vector<std::string> candidates;
    const std::string overridePath = lazyVariable(LazyVariable::NvrtcPath);
    if (!overridePath.empty()) {
      candidates.push_back(overridePath);
    } else {
      candidates = {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so", "/usr/local/cuda/lib64/libnvrtc.so.13"};
    }
    std::string reasons;
    for (const std::string& c : candidates) {
      if (tryLoad(c, instance, reasons)) {
        HOTKERNEL_LOG(Info) << "NVRTC " << instance.version / 1000 << "." << (instance.version % 1000) / 10
                            << " loaded from " << c;
        return;
      }
    }
    instance.failureReason = "NVRTC could not be loaded (set HOTKERNEL_NVRTC_PATH to libnvrtc.so):" + reasons;
    HOTKERNEL_LOG(Info) << instance.failureReason;
  });
  return instance;
}

const NvrtcApi& loadedApi() {
  const NvrtcApi& a = api();
  HOTKERNEL_CHECK(a.handle != nullptr, a.failureReason);
  return a;
}

// Destroys the program on every path out of compileToCubin.
class ProgramGuard {
 public:
  ProgramGuard(const NvrtcApi& api, nvrtcProgram program) : api_(api), program_(program) {}
  ~ProgramGuard() { api_.destroyProgram(&program_); }
  ProgramGuard(const ProgramGuard&) = delete;
  ProgramGuard& operator=(const ProgramGuard&) = delete;

 private:
  const NvrtcApi& api_;
  nvrtcProgram program_;
};

std::string programLog(const NvrtcApi& a, nvrtcProgram program) {
  size_t size = 0;
  if (a.getProgramLogSize(program, &size) != NVRTC_SUCCESS || size == 0) return "";
  std::string log(size, '\0');
  if (a.getProgramLog(program, log.data()) != NVRTC_SUCCESS) return "";
  while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
  return log;
}

std::string joined(const std::vector<std::string>& options) {
  std::string s;
  for (const std::string& o : options) s += (s.empty() ? "" : " ") + o;
  return s;
}

}  // namespace

bool nvrtcAvailable() {
  try {
    return api().handle != nullptr;
  } catch (...) {
    return false;
  }
}

std::string nvrtcUnavailableReason() {
  try {
    return api().failureReason;
  } catch (...) {
    return "NVRTC could not be loaded";
  }
}

std::string nvrtcLibraryPath() { return loadedApi().path; }

int nvrtcVersion() { return loadedApi().version; }

NvrtcOutput compileToCubin(const std::string& source, const std::string& programName, const std::string& arch,
                           const std::vector<std::string>& extraOptions) {
  const NvrtcApi& a = loadedApi();
  // A virtual architecture (compute_90) yields PTX only, and nvrtcGetCUBIN would fail later.
  HOTKERNEL_CHECK(arch.rfind("sm_", 0) == 0, "NVRTC needs a real architecture like sm_90a, got '", arch, "'");

  std::vector<std::string> options = {"--gpu-architecture=" + arch, "-std=c++17", "-default-device"};
  options.insert(options.end(), extraOptions.begin(), extraOptions.end());
  std::vector<const char*> argv;
  argv.reserve(options.size());
  for (const std::string& o : options) argv.push_back(o.c_str());

  nvrtcProgram program = nullptr;
  nvrtcResult rc = a.createProgram(&program, source.c_str(), programName.c_str(), 0, nullptr, nullptr);
  HOTKERNEL_CHECK(rc == NVRTC_SUCCESS, "nvrtcCreateProgram(", programName, ") failed: ", a.getErrorString(rc));
  ProgramGuard guard(a, program);

  NvrtcOutput out;
  const auto start = std::chrono::steady_clock::now();
  rc = a.compileProgram(program, static_cast<int>(argv.size()), argv.data());
  out.compileSeconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  out.log = programLog(a, program);
  if (rc != NVRTC_SUCCESS) {
    HOTKERNEL_THROW("NVRTC failed to compile ", programName, " for ", arch, " (", a.getErrorString(rc),
                    ") with options [", joined(options), "]:\n", out.log);
  }

  size_t size = 0;
  rc = a.getCubinSize(program, &size);
  HOTKERNEL_CHECK(rc == NVRTC_SUCCESS && size > 0, "nvrtcGetCUBINSize(", programName, ") failed: ",
                  a.getErrorString(rc));
  out.cubin.resize(size);
  rc = a.getCubin(program, out.cubin.data());
  HOTKERNEL_CHECK(rc == NVRTC_SUCCESS, "nvrtcGetCUBIN(", programName, ") failed: ", a.getErrorString(rc));
  return out;
}

}  // namespace hotkernel
