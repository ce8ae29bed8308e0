#include "WarmupArgs.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <iostream>

#include <CLI/CLI.hpp>

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

namespace {

// The options of `hotkernel warmup` and hotkernel-warmup on `app`, writing into *out. Each value check
// returns "" or the one-line problem the usage error shows.
void addWarmupOptions(CLI::App& app, WarmupArgs* out) {
  app.add_option("--profile", out->profilePaths,
                 "a profile recorded with HOTKERNEL_PROFILE (a regular JSON file); repeat to merge several")
      ->required()
      ->type_name("FILE")
      ->check(CLI::Validator(
          [](const std::string& v) { return v.empty() ? std::string("--profile needs a file") : std::string(); },
          ""));
  app.add_option_function<std::string>(
         "--budget", [out](const std::string& v) { out->budgetSeconds = parseWarmupDuration(v); },
         "time for the whole warm-up: seconds, or a number with s, m or h (90s, 10m, 1h), at most a year")
      ->type_name("DURATION")
      ->default_str("1h")
      ->check(CLI::Validator(
          [](const std::string& v) { return parseWarmupDuration(v) > 0 ? std::string() : "bad --budget '" + v + "'"; },
          ""));
  app.add_option("--dir,--cache-dir", out->cacheDir,
                 "the cache to fill (default: HOTKERNEL_CACHE_DIR, else ~/.cache/hotkernel)")
      ->type_name("DIR");
  app.add_option_function<std::string>(
         "--device", [out](const std::string& v) { out->device = static_cast<int>(std::strtol(v.c_str(), nullptr, 10)); },
         "the CUDA device to warm up for (its index; it must exist)")
      ->type_name("N")
      ->default_str("0")
      ->check(CLI::Validator(
          [](const std::string& v) {
            char* end = nullptr;
            errno = 0;
            const long n = std::strtol(v.c_str(), &end, 10);
            const bool ok = !v.empty() && end != v.c_str() && *end == '\0' && errno != ERANGE && n >= 0 && n <= INT_MAX;
            return ok ? std::string() : "bad --device '" + v + "' (a CUDA device index: 0, 1, ...)";
          },
          ""));
  app.add_option("--json", out->jsonOut, "also write the summary as JSON to this file")->type_name("OUT");
}

// CLI11's message for `e` as the one line this command has always printed.
std::string problemOf(const CLI::ParseError& e, const std::vector<std::string>& extras) {
  const std::string what = e.what();
  if (dynamic_cast<const CLI::ExtrasError*>(&e) != nullptr && !extras.empty()) {
    return "unknown argument '" + extras.front() + "'";
  }
  if (dynamic_cast<const CLI::ArgumentMismatch*>(&e) != nullptr) {
    const size_t colon = what.find(':');
    return (colon == std::string::npos ? what : what.substr(0, colon)) + " needs a value";
  }
  if (dynamic_cast<const CLI::ValidationError*>(&e) != nullptr) {
    const size_t colon = what.find(": ");  // "--budget: bad --budget 'soon'"
    return colon == std::string::npos ? what : what.substr(colon + 2);
  }
  return what;
}

}  // namespace

std::string parseWarmupArgs(const std::vector<std::string>& args, WarmupArgs* out) {
  *out = WarmupArgs{};
  CLI::App app{"hotkernel warmup", "hotkernel warmup"};
  addWarmupOptions(app, out);
  app.allow_extras(false);
  if (std::find(args.begin(), args.end(), "-h") != args.end() ||
      std::find(args.begin(), args.end(), "--help") != args.end()) {
    out->help = true;
    return "";
  }
  std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 parses a reversed vector
  try {
    app.parse(reversed);
  } catch (const CLI::ParseError& e) {
    std::vector<std::string> extras;
    for (const std::string& a : args) {
      if (!a.empty() && a[0] == '-' && app.get_option_no_throw(a) == nullptr) {
        extras.push_back(a);
        break;
      }
    }
    *out = WarmupArgs{};
    return problemOf(e, extras);
  }
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
  WarmupArgs unused;
  CLI::App app{"", "hotkernel warmup"};
  addWarmupOptions(app, &unused);
  // CLI11's option list under this command's usage line.
  std::string options = app.help();
  const size_t list = options.find("Options:");
  options = list == std::string::npos ? options : options.substr(list);
  return "usage: hotkernel warmup --profile FILE [--profile FILE]... [--budget DURATION] [--dir DIR] [--device N]"
         " [--json OUT]\n" +
         options + "Exit: 0 done (or the budget reached), 2 bad input (arguments or a profile), 3 no such CUDA device.\n";
}

int warmupUsageError(const std::string& problem) {
  std::cerr << "hotkernel warmup: " << problem << "\n" << warmupUsageText();
  return kExitUsage;
}

}  // namespace hotkernel::cli
