#include "hotkernel/optimizer/SandboxCompile.h"

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <nlohmann/json.hpp>
#include <thread>

#include "hotkernel/optimizer/Subprocess.h"
#include "hotkernel/runtime/Check.h"
#include "hotkernel/runtime/Config.h"  // lazyVariable
#include "hotkernel/runtime/JsonFields.h"
#include "hotkernel/runtime/Logging.h"
#include "hotkernel/runtime/Nvrtc.h"

namespace hotkernel {
namespace {

using nlohmann::json;

constexpr char kFrameMagic[4] = {'H', 'K', 'S', 'C'};
constexpr size_t kFrameHeaderBytes = 24;
// The most the helper reads from its stdin: a source of 1 MiB escaped as JSON fits many times over.
constexpr size_t kMaxRequestBytes = size_t{16} << 20;
// Room for the message and log besides the cubin on the helper's stdout.
constexpr size_t kFrameTextAllowance = size_t{4} << 20;

void putU32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out += static_cast<char>((v >> (8 * i)) & 0xff);
}
void putU64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out += static_cast<char>((v >> (8 * i)) & 0xff);
}
uint64_t getLE(const std::string& in, size_t offset, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= static_cast<uint64_t>(static_cast<unsigned char>(in[offset + i])) << (8 * i);
  return v;
}

std::string oneLine(std::string text, size_t maxBytes = 400) {
  if (text.size() > maxBytes) text = text.substr(0, maxBytes) + "...";
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  for (char& c : text) {
    if (c == '\n' || c == '\r') c = '|';
  }
  return text;
}

std::string stderrTail(const std::string& err) {
  if (err.empty()) return "";
  return "; stderr: " + oneLine(err.size() > 400 ? err.substr(err.size() - 400) : err);
}

const char* statusName(SandboxStatus s) {
  switch (s) {
    case SandboxStatus::Compiled:
      return "compiled";
    case SandboxStatus::CompileError:
      return "compile error";
    case SandboxStatus::BadRequest:
      return "bad request";
    case SandboxStatus::NvrtcUnavailable:
      return "NVRTC unavailable";
    case SandboxStatus::InternalError:
      return "internal error";
  }
  return "unknown status";
}

bool isExecutableFile(const std::string& path) { return !path.empty() && ::access(path.c_str(), X_OK) == 0; }

std::string dirOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

std::string realPath(const std::string& path) {
  char buf[PATH_MAX];
  return ::realpath(path.c_str(), buf) != nullptr ? std::string(buf) : std::string();
}

// ---- the helper's side ------------------------------------------------------

bool writeAll(int fd, const std::string& bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

int emit(SandboxStatus status, const std::string& message, const std::string& log = "", const std::string& cubin = "",
         uint64_t micros = 0) {
  SandboxFrame f;
  f.status = status;
  f.message = message;
  f.log = log;
  f.cubin = cubin;
  f.compileMicros = micros;
  writeAll(STDOUT_FILENO, encodeSandboxFrame(f));
  return status == SandboxStatus::BadRequest ? 2 : 0;
}

bool hookSet(LazyVariable hook) { return lazyVariable(hook) == "1"; }

bool parseSize(const char* text, unsigned long long& out) {
  if (text == nullptr || *text < '0' || *text > '9') return false;
  char* end = nullptr;
  errno = 0;
  out = std::strtoull(text, &end, 10);
  return errno == 0 && end != nullptr && *end == '\0';
}

}  // namespace

// ---- request ----------------------------------------------------------------

std::string SandboxCompileRequest::toJsonText() const {
  const json j = {{"format", kSandboxRequestFormat},
                  {"version", kSandboxRequestVersion},
                  {"source", source},
                  {"programName", programName},
                  {"arch", arch},
                  {"options", options}};
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

SandboxCompileRequest SandboxCompileRequest::fromJsonText(const std::string& text) {
  const std::string where = "sandbox compile request";
  const json j = jsonfield::object(jsonfield::parse(text, where, jsonfield::kMaxDepth), where);
  HOTKERNEL_REQUIRE(jsonfield::string(j, "format", where) == kSandboxRequestFormat, where, ".format must be \"",
                    kSandboxRequestFormat, "\"");
  HOTKERNEL_REQUIRE(jsonfield::integer(j, "version", where) == kSandboxRequestVersion, where, ".version must be ",
                    kSandboxRequestVersion);
  SandboxCompileRequest r;
  r.source = jsonfield::string(j, "source", where);
  r.programName = jsonfield::string(j, "programName", where);
  r.arch = jsonfield::string(j, "arch", where);
  r.options = jsonfield::strings(j, "options", where);
  return r;
}

// ---- frame ------------------------------------------------------------------

std::string encodeSandboxFrame(const SandboxFrame& frame) {
  std::string out(kFrameMagic, sizeof(kFrameMagic));
  putU32(out, kSandboxFrameVersion);
  putU32(out, static_cast<uint32_t>(frame.status));
  putU32(out, 0);
  putU64(out, frame.compileMicros);
  for (const std::string* blob : {&frame.message, &frame.log, &frame.cubin}) {
    putU64(out, blob->size());
    out += *blob;
  }
  return out;
}

SandboxFrame decodeSandboxFrame(const std::string& bytes) {
  HOTKERNEL_REQUIRE(bytes.size() >= kFrameHeaderBytes, "sandbox frame: ", bytes.size(),
                    " bytes, shorter than a header");
  HOTKERNEL_REQUIRE(std::memcmp(bytes.data(), kFrameMagic, sizeof(kFrameMagic)) == 0, "sandbox frame: bad magic");
  const uint64_t version = getLE(bytes, 4, 4);
  HOTKERNEL_REQUIRE(version == kSandboxFrameVersion, "sandbox frame: version ", version, ", expected ",
                    kSandboxFrameVersion);
  const uint64_t status = getLE(bytes, 8, 4);
  HOTKERNEL_REQUIRE(status <= static_cast<uint32_t>(SandboxStatus::InternalError), "sandbox frame: unknown status ",
                    status);
  HOTKERNEL_REQUIRE(getLE(bytes, 12, 4) == 0, "sandbox frame: reserved word is ", getLE(bytes, 12, 4), ", expected 0");
  SandboxFrame f;
  f.status = static_cast<SandboxStatus>(status);
  f.compileMicros = getLE(bytes, 16, 8);
  size_t at = kFrameHeaderBytes;
  for (std::string* blob : {&f.message, &f.log, &f.cubin}) {
    HOTKERNEL_REQUIRE(bytes.size() - at >= 8, "sandbox frame: truncated before a length");
    const uint64_t n = getLE(bytes, at, 8);
    at += 8;
    HOTKERNEL_REQUIRE(n <= bytes.size() - at, "sandbox frame: a length of ", n, " runs past the end");
    blob->assign(bytes, at, static_cast<size_t>(n));
    at += static_cast<size_t>(n);
  }
  HOTKERNEL_REQUIRE(at == bytes.size(), "sandbox frame: ", bytes.size() - at, " trailing bytes");
  return f;
}

// ---- the parent's side ---------------------------------------------------------

const char* sandboxFailureName(SandboxFailure failure) {
  switch (failure) {
    case SandboxFailure::None:
      return "none";
    case SandboxFailure::CompileError:
      return "compile-error";
    case SandboxFailure::TimedOut:
      return "timed-out";
    case SandboxFailure::Crashed:
      return "crashed";
    case SandboxFailure::HelperFailed:
      return "helper-failed";
  }
  HOTKERNEL_INTERNAL_ASSERT(false, "unknown SandboxFailure ", static_cast<int>(failure));
}

std::string findHelperExecutable(const std::string& name, LazyVariable variable, std::string* whyNotFound) {
  if (const std::string env = lazyVariable(variable); !env.empty()) {
    if (isExecutableFile(env)) return env;
    if (whyNotFound != nullptr) {
      *whyNotFound = std::string(lazyVariableName(variable)) + "=" + env + " is not an executable file";
    }
    return "";
  }
  std::vector<std::string> dirs;
  Dl_info info;
  std::memset(&info, 0, sizeof(info));
  if (::dladdr(reinterpret_cast<void*>(&findHelperExecutable), &info) != 0 && info.dli_fname != nullptr &&
      std::strchr(info.dli_fname, '/') != nullptr) {
    const std::string self = realPath(info.dli_fname);
    if (!self.empty()) dirs.push_back(dirOf(self));
  }
  const std::string exe = realPath("/proc/self/exe");
  if (!exe.empty()) dirs.push_back(dirOf(exe));
  std::string tried;
  for (const std::string& dir : dirs) {
    for (const std::string& candidate : {dir + "/" + name, dir + "/../bin/" + name}) {
      if (isExecutableFile(candidate)) return candidate;
      tried += (tried.empty() ? "" : ", ") + candidate;
    }
  }
  if (whyNotFound != nullptr) {
    *whyNotFound = name + " not found (tried " + tried + "); set " + std::string(lazyVariableName(variable)) + " to its path";
  }
  return "";
}

std::string sandboxCompileHelperPath(std::string* whyNotFound) {
  return findHelperExecutable(kSandboxHelperName, LazyVariable::SandboxCompile, whyNotFound);
}

SandboxCompileResult sandboxCompile(const SandboxCompileRequest& request, const SandboxCompileOptions& options) {
  HOTKERNEL_REQUIRE(options.timeoutSeconds > 0 && std::isfinite(options.timeoutSeconds),
                    "sandboxCompile: timeoutSeconds must be > 0, got ", options.timeoutSeconds);
  SandboxCompileResult result;
  std::string why;
  const std::string helper = options.helperPath.empty() ? sandboxCompileHelperPath(&why) : options.helperPath;
  if (helper.empty()) {
    result.failure = SandboxFailure::HelperFailed;
    result.error = why;
    HOTKERNEL_LOG_ONCE(Warn, "sandbox-compile:helper-missing") << why;
    return result;
  }

  SubprocessOptions run;
  // The helper's own limits: CPU time and alarm() a little past the parent's
  // timeout, so that the parent's SIGKILL normally comes first.
  const long limitSeconds = static_cast<long>(std::ceil(options.timeoutSeconds)) + 5;
  run.argv = {helper, "--time-limit-seconds", std::to_string(limitSeconds)};
  if (options.memoryLimitBytes > 0) {
    run.argv.push_back("--memory-limit-bytes");
    run.argv.push_back(std::to_string(options.memoryLimitBytes));
  }
  run.stdinData = request.toJsonText();
  run.timeoutSeconds = options.timeoutSeconds;
  run.maxStdoutBytes = options.maxCubinBytes + kFrameTextAllowance;
  run.workingDirectory = "/";
  run.env = {{"HOTKERNEL", "0"}};
  run.env.insert(run.env.end(), options.env.begin(), options.env.end());
  const SubprocessResult r = runSubprocess(run);
  result.wallSeconds = r.wallSeconds;

  const std::string who = std::string(kSandboxHelperName) + " ";
  if (!r.started) {
    result.failure = SandboxFailure::HelperFailed;
    result.error = who + r.describe();
  } else if (r.timedOut) {
    result.failure = SandboxFailure::TimedOut;
    result.error = "compile " + r.describe();
  } else if (r.stdoutLimitExceeded) {
    result.failure = SandboxFailure::HelperFailed;
    result.error = who + "reply " + r.describe();
  } else if (!r.exited) {
    result.failure = SandboxFailure::Crashed;
    result.error = "compiler crashed: " + who + r.describe() + stderrTail(r.err);
  } else {
    try {
      SandboxFrame f = decodeSandboxFrame(r.out);
      result.compileSeconds = static_cast<double>(f.compileMicros) * 1e-6;
      result.log = std::move(f.log);
      if (f.status == SandboxStatus::Compiled) {
        HOTKERNEL_REQUIRE(f.cubin.size() >= 4 && f.cubin.compare(0, 4,
                                                                 "\x7f"
                                                                 "ELF") == 0,
                          "sandbox frame: the cubin is not an ELF image");
        HOTKERNEL_REQUIRE(f.cubin.size() <= options.maxCubinBytes, "sandbox frame: cubin of ", f.cubin.size(),
                          " bytes, more than ", options.maxCubinBytes);
        result.failure = SandboxFailure::None;
        result.cubin = std::move(f.cubin);
      } else if (f.status == SandboxStatus::CompileError) {
        result.failure = SandboxFailure::CompileError;
        result.error = oneLine(f.message);
      } else {
        result.failure = SandboxFailure::HelperFailed;
        result.error = who + statusName(f.status) + ": " + oneLine(f.message);
      }
    } catch (const Error& e) {
      result.failure = SandboxFailure::HelperFailed;
      result.error = who + r.describe() + " without a valid reply (" + oneLine(e.what()) + ")" + stderrTail(r.err);
    }
  }
  if (!result.compiled()) {
    HOTKERNEL_LOG(Debug) << "sandbox compile of " << request.programName << " failed: " << result.error;
  }
  return result;
}

int sandboxCompileHelperMain(int argc, char** argv) {
  unsigned long long memoryLimit = 0, timeLimit = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const bool hasValue = i + 1 < argc;
    if (arg == "--memory-limit-bytes" && hasValue && parseSize(argv[i + 1], memoryLimit)) {
      ++i;
    } else if (arg == "--time-limit-seconds" && hasValue && parseSize(argv[i + 1], timeLimit)) {
      ++i;
    } else {
      return emit(SandboxStatus::BadRequest, "usage: " + std::string(kSandboxHelperName) +
                                                 " [--memory-limit-bytes N] [--time-limit-seconds N] < request.json"
                                                 " (bad argument '" +
                                                 arg + "')");
    }
  }
  // Limits first (Note [The sandbox compile helper]).
  const struct rlimit noCore = {0, 0};
  ::setrlimit(RLIMIT_CORE, &noCore);
  if (memoryLimit > 0) {
    const struct rlimit as = {static_cast<rlim_t>(memoryLimit), static_cast<rlim_t>(memoryLimit)};
    ::setrlimit(RLIMIT_AS, &as);
  }
  if (timeLimit > 0) {
    const struct rlimit cpu = {static_cast<rlim_t>(timeLimit), static_cast<rlim_t>(timeLimit + 1)};
    ::setrlimit(RLIMIT_CPU, &cpu);
    ::alarm(static_cast<unsigned>(std::min<unsigned long long>(timeLimit, 1u << 30)));
  }

  try {
    std::string input;
    char buf[1 << 16];
    while (true) {
      const ssize_t n = ::read(STDIN_FILENO, buf, sizeof(buf));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      input.append(buf, static_cast<size_t>(n));
      if (input.size() > kMaxRequestBytes) {
        return emit(SandboxStatus::BadRequest, "request larger than " + std::to_string(kMaxRequestBytes) + " bytes");
      }
    }
    SandboxCompileRequest request;
    try {
      request = SandboxCompileRequest::fromJsonText(input);
    } catch (const Error& e) {
      return emit(SandboxStatus::BadRequest, e.what());
    }

    if (hookSet(LazyVariable::SandboxTestCrash)) std::abort();
    if (hookSet(LazyVariable::SandboxTestHang)) {
      while (true) std::this_thread::sleep_for(std::chrono::hours(1));
    }
    if (hookSet(LazyVariable::SandboxTestGarbage)) {
      writeAll(STDOUT_FILENO, "HKSC this is not a frame");
      return 0;
    }

    if (!nvrtcAvailable()) return emit(SandboxStatus::NvrtcUnavailable, nvrtcUnavailableReason());
    try {
      const NvrtcOutput out = compileToCubin(request.source, request.programName, request.arch, request.options);
      return emit(SandboxStatus::Compiled, "", out.log, out.cubin,
                  static_cast<uint64_t>(std::llround(out.compileSeconds * 1e6)));
    } catch (const Error& e) {
      // compileToCubin's message is one line of context, then NVRTC's log.
      const std::string what = e.what();
      const size_t nl = what.find('\n');
      const bool compileError = what.rfind("NVRTC failed to compile", 0) == 0;
      std::string log = nl == std::string::npos ? "" : what.substr(nl + 1);
      // Drop the " (Nvrtc.cpp:123)" that HOTKERNEL_THROW appends: it is not NVRTC's.
      const size_t at = log.rfind(" (");
      if (at != std::string::npos && log.back() == ')' && log.find(".cpp:", at) != std::string::npos) log.erase(at);
      return emit(compileError ? SandboxStatus::CompileError : SandboxStatus::InternalError, what.substr(0, nl), log);
    }
  } catch (const std::bad_alloc&) {
    return emit(SandboxStatus::InternalError,
                "out of memory (the helper's memory limit is " + std::to_string(memoryLimit) + " bytes)");
  } catch (const std::exception& e) {
    return emit(SandboxStatus::InternalError, e.what());
  }
}

}  // namespace hotkernel
