#include "WarmupArgs.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <iostream>

#include "ErrorText.h"
#include "ExitStatus.h"

namespace hotkernel::cli {
namespace {

// What a non-regular file is, for the refusal.
const char* fileKind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  return "not a regular file";
}

// Closes a descriptor on every path out.
class FdCloser {
 public:
  explicit FdCloser(int fd) : fd_(fd) {}
  ~FdCloser() {
    if (fd_ >= 0) ::close(fd_);
  }
  FdCloser(const FdCloser&) = delete;
  FdCloser& operator=(const FdCloser&) = delete;

 private:
  int fd_;
};

}  // namespace

double parseWarmupDuration(const std::string& text) {
  if (text.empty()) return -1;
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || !std::isfinite(v) || !(v > 0)) return -1;
  const std::string unit(end);
  double seconds = -1;
  if (unit.empty() || unit == "s") {
    seconds = v;
  } else if (unit == "m") {
    seconds = v * 60;
  } else if (unit == "h") {
    seconds = v * 3600;
  }
  return seconds > 0 && seconds <= kMaxWarmupBudgetSeconds ? seconds : -1;
}

std::string parseWarmupArgs(const std::vector<std::string>& args, WarmupArgs* out) {
  *out = WarmupArgs{};
  bool profileGiven = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "-h" || a == "--help") {
      out->help = true;
      return "";
    }
    const bool takesValue =
        a == "--profile" || a == "--budget" || a == "--cache-dir" || a == "--device" || a == "--json";
    if (!takesValue) return "unknown argument '" + a + "'";
    if (i + 1 >= args.size()) return a + " needs a value";
    const std::string& value = args[++i];
    if (a == "--profile") {
      if (value.empty()) return "--profile needs a file";
      out->profilePaths.push_back(value);
      profileGiven = true;
    } else if (a == "--budget") {
      out->budgetSeconds = parseWarmupDuration(value);
      if (out->budgetSeconds <= 0) return "bad --budget '" + value + "'";
    } else if (a == "--cache-dir") {
      out->cacheDir = value;
    } else if (a == "--device") {
      char* end = nullptr;
      errno = 0;
      const long n = std::strtol(value.c_str(), &end, 10);
      if (value.empty() || end == value.c_str() || *end != '\0' || errno == ERANGE || n < 0 || n > INT_MAX) {
        return "bad --device '" + value + "' (a CUDA device index: 0, 1, ...)";
      }
      out->device = static_cast<int>(n);
    } else {
      out->jsonOut = value;
    }
  }
  if (!profileGiven) return "--profile is required";
  return "";
}

std::string readProfileFile(const std::string& path, nlohmann::json* profile) {
  // Note [Reading a profile safely]: look before opening, so a FIFO or a device is never opened.
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return "cannot read " + path + " (" + std::strerror(errno) + ")";
  if (!S_ISREG(st.st_mode)) return "cannot read " + path + ": it is " + fileKind(st.st_mode) + ", not a profile file";
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) return "cannot read " + path + " (" + std::strerror(errno) + ")";
  FdCloser closer(fd);
  if (::fstat(fd, &st) != 0) return "cannot read " + path + " (" + std::strerror(errno) + ")";
  if (!S_ISREG(st.st_mode)) return "cannot read " + path + ": it is " + fileKind(st.st_mode) + ", not a profile file";
  if (static_cast<unsigned long long>(st.st_size) > kMaxProfileBytes) {
    return "cannot read " + path + ": it is larger than " + std::to_string(kMaxProfileBytes >> 20) +
           " MiB, not a profile";
  }
  std::string text;
  char buf[1 << 16];
  while (true) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return "cannot read " + path + " (" + std::strerror(errno) + ")";
    if (n == 0) break;
    text.append(buf, static_cast<size_t>(n));
    if (text.size() > kMaxProfileBytes) {
      return "cannot read " + path + ": it is larger than " + std::to_string(kMaxProfileBytes >> 20) +
             " MiB, not a profile";
    }
  }
  if (text.find_first_not_of(" \t\r\n") == std::string::npos) return path + " is empty, not a hotkernel profile";
  nlohmann::json parsed = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) return path + " is not valid JSON, not a hotkernel profile";
  *profile = std::move(parsed);
  return "";
}

std::string loadWarmupTargets(const std::vector<std::string>& paths, int device, ProfileTargets* targets) {
  ProfileTargets merged;
  for (const std::string& path : paths) {
    try {
      nlohmann::json profile;
      if (std::string problem = readProfileFile(path, &profile); !problem.empty()) return problem;
      mergeTargets(merged, targetsFromProfile(profile, device));
    } catch (const std::exception& e) {  // Error from targetsFromProfile, or anything a strange document provokes
      return path + " " + userMessage(e);
    }
  }
  *targets = std::move(merged);
  return "";
}

std::string warmupUsageText() {
  return "usage: hotkernel warmup --profile FILE [--profile FILE]... [--budget DURATION] [--cache-dir DIR] [--device N]"
         " [--json OUT]\n"
         "  FILE: a profile recorded with HOTKERNEL_PROFILE (a regular JSON file); several are merged\n"
         "  DURATION: seconds, or a number with s, m or h (e.g. 90s, 10m, 1h), at most a year\n";
}

int warmupUsageError(const std::string& problem) {
  std::cerr << "hotkernel warmup: " << problem << "\n" << warmupUsageText();
  return kExitUsage;
}

}  // namespace hotkernel::cli
