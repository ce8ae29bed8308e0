#include "hotkernel/optimizer/ExperimentLog.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <ctime>
#include <sstream>

#include "hotkernel/runtime/Check.h"
#include "hotkernel/runtime/JsonFields.h"
#include "hotkernel/runtime/Logging.h"

namespace hotkernel {
namespace {

using nlohmann::json;

json numberOrNull(const std::optional<double>& v) { return v && std::isfinite(*v) ? json(*v) : json(nullptr); }
json integerOrNull(const std::optional<int64_t>& v) { return v ? json(*v) : json(nullptr); }

// An optional number (Note [Strict JSON fields]); a value that is not finite reads as absent.
std::optional<double> readNumber(const json& j, const char* key, const std::string& where) {
  const std::optional<double> v = jsonfield::optionalNumber(j, key, where);
  return v && std::isfinite(*v) ? v : std::nullopt;
}

// An optional object; absent or null reads as {}.
json readObject(const json& j, const char* key, const std::string& where) {
  return jsonfield::present(j, key) ? jsonfield::objectField(j, key, where) : json::object();
}

std::string errnoText() { return std::strerror(errno); }

std::string snakeCase(const std::string& key) {
  std::string out;
  out.reserve(key.size() + 4);
  for (size_t i = 0; i < key.size(); ++i) {
    const char c = key[i];
    const bool upper = c >= 'A' && c <= 'Z';
    const char before = i > 0 ? key[i - 1] : '\0';
    if (upper && ((before >= 'a' && before <= 'z') || (before >= '0' && before <= '9'))) out += '_';
    out += upper ? static_cast<char>(c - 'A' + 'a') : c;
  }
  return out;
}

// The spelling of the keys that changed between versions 1 and 2 (Note [Experiment line versions]).
struct LineKeys {
  const char* candidateId;
  const char* parentId;
  const char* compileSeconds;
  const char* atenUs;
  const char* kernelUs;
  const char* speedupCi;
};
constexpr LineKeys kVersion1Keys = {"candidateId", "parentId", "compileSeconds", "atenUs", "kernelUs", "speedupCi"};
constexpr LineKeys kVersion2Keys = {"candidate_id", "parent_id", "compile_seconds", "aten_us", "kernel_us", "speedup_ci"};

// Ownership and mode checks shared with the cache (cache/src/SafePath.h's Note).
void checkPrivate(const struct stat& st, const std::string& path, const char* kind) {
  HOTKERNEL_CHECK(st.st_uid == ::geteuid(), "refusing experiment log ", kind, " ", path, ": owned by uid ", st.st_uid,
                  ", not by the current user");
  HOTKERNEL_CHECK(!(st.st_mode & (S_IWGRP | S_IWOTH)), "refusing experiment log ", kind, " ", path,
                  ": writable by group or others; run: chmod go-w ", path);
}

void ensureDirectory(const std::string& dir) {
  HOTKERNEL_CHECK(!dir.empty(), "empty experiment log directory");
  struct stat st;
  if (::lstat(dir.c_str(), &st) != 0) {
    HOTKERNEL_CHECK(errno == ENOENT, "cannot inspect ", dir, ": ", errnoText());
    for (size_t pos = dir.find('/', 1); pos != std::string::npos; pos = dir.find('/', pos + 1)) {
      std::string prefix = dir.substr(0, pos);
      HOTKERNEL_CHECK(::mkdir(prefix.c_str(), 0700) == 0 || errno == EEXIST, "cannot create ", prefix, ": ",
                      errnoText());
    }
    HOTKERNEL_CHECK(::mkdir(dir.c_str(), 0700) == 0 || errno == EEXIST, "cannot create ", dir, ": ", errnoText());
    HOTKERNEL_CHECK(::lstat(dir.c_str(), &st) == 0, "cannot inspect ", dir, ": ", errnoText());
  }
  HOTKERNEL_CHECK(!S_ISLNK(st.st_mode), "refusing experiment log directory ", dir, ": it is a symlink");
  HOTKERNEL_CHECK(S_ISDIR(st.st_mode), "refusing experiment log directory ", dir, ": not a directory");
  checkPrivate(st, dir, "directory");
}

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

// Opens `path` for appending, creating it 0600; refuses anything but a private regular file.
int openForAppend(const std::string& path, struct stat* st) {
  int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0 && errno == ELOOP) HOTKERNEL_THROW("refusing experiment log ", path, ": it is a symlink");
  HOTKERNEL_CHECK(fd >= 0, "cannot open ", path, ": ", errnoText());
  if (::fstat(fd, st) != 0 || !S_ISREG(st->st_mode) || st->st_uid != ::geteuid() ||
      (st->st_mode & (S_IWGRP | S_IWOTH))) {
    ::close(fd);
    HOTKERNEL_THROW("refusing experiment log ", path,
                    ": not a regular file owned by the current user and writable only by them");
  }
  return fd;
}

void appendLine(const std::string& path, const std::string& line, int64_t maxBytes) {
  // At most two opens: the second after a rotation (Note [Experiment log rotation]).
  for (int attempt = 0; attempt < 2; ++attempt) {
    struct stat st;
    Fd fd(openForAppend(path, &st));
    const bool full = st.st_size > 0 && st.st_size + static_cast<int64_t>(line.size()) > maxBytes;
    if (full && attempt == 0) {
      HOTKERNEL_CHECK(::flock(fd.get(), LOCK_EX) == 0, "cannot lock ", path, ": ", errnoText());
      struct stat now;
      struct stat current;
      // Rotate only if the path still names this file and it is still full (another writer may have rotated).
      if (::fstat(fd.get(), &now) == 0 && ::lstat(path.c_str(), &current) == 0 && current.st_ino == now.st_ino &&
          current.st_dev == now.st_dev && now.st_size + static_cast<int64_t>(line.size()) > maxBytes) {
        const std::string rotated = path + ExperimentLog::kRotatedSuffix;
        if (::rename(path.c_str(), rotated.c_str()) != 0) {
          const std::string why = errnoText();
          ::flock(fd.get(), LOCK_UN);
          HOTKERNEL_THROW("cannot rotate ", path, " to ", rotated, ": ", why);
        }
      }
      ::flock(fd.get(), LOCK_UN);
      continue;
    }
    // One write per line (Note [Appending from many processes]); never retried, a retry could split the line.
    ssize_t n = ::write(fd.get(), line.data(), line.size());
    HOTKERNEL_CHECK(n == static_cast<ssize_t>(line.size()), "cannot append to ", path, ": ",
                    n < 0 ? errnoText() : "short write");
    return;
  }
}

// Opens an existing log for reading; returns false when it does not exist.
bool openForRead(const std::string& path, std::string* text) {
  int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT || errno == ENOTDIR) return false;
    if (errno == ELOOP) HOTKERNEL_THROW("refusing experiment log ", path, ": it is a symlink");
    HOTKERNEL_THROW("cannot read experiment log ", path, ": ", errnoText());
  }
  Fd owner(fd);
  struct stat st;
  HOTKERNEL_CHECK(::fstat(fd, &st) == 0 && S_ISREG(st.st_mode), "experiment log ", path, " is not a regular file");
  text->clear();
  char buf[1 << 16];
  while (true) {
    ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    HOTKERNEL_CHECK(n >= 0, "cannot read experiment log ", path, ": ", errnoText());
    if (n == 0) break;
    text->append(buf, static_cast<size_t>(n));
  }
  return true;
}

}  // namespace

const char* toString(ExperimentDecision decision) {
  switch (decision) {
    case ExperimentDecision::Accepted:
      return "accepted";
    case ExperimentDecision::Rejected:
      return "rejected";
    case ExperimentDecision::KeptAten:
      return "kept_aten";
  }
  return "unknown";
}

std::optional<ExperimentDecision> parseExperimentDecision(const std::string& text) {
  if (text == "accepted") return ExperimentDecision::Accepted;
  if (text == "rejected") return ExperimentDecision::Rejected;
  if (text == "kept_aten") return ExperimentDecision::KeptAten;
  return std::nullopt;
}

json Experiment::toJson() const {
  json stagesJson = json::object();
  for (const auto& [stage, outcome] : stages) stagesJson[stage] = outcome;
  json ci = timings.speedupCi && std::isfinite(timings.speedupCi->first) && std::isfinite(timings.speedupCi->second)
                ? json::array({timings.speedupCi->first, timings.speedupCi->second})
                : json(nullptr);
  return {{"format", kExperimentFormat},
          {"version", kExperimentVersion},
          {"time", time},
          {"fingerprint", fingerprint},
          {"op", op},
          {"variant", variant},
          {kVersion2Keys.candidateId, integerOrNull(candidateId)},
          {kVersion2Keys.parentId, integerOrNull(parentId)},
          {"params", params.is_object() ? params : json::object()},
          {kVersion2Keys.compileSeconds, numberOrNull(compileSeconds)},
          {"stages", std::move(stagesJson)},
          {"timings",
           {{kVersion2Keys.atenUs, numberOrNull(timings.atenUs)},
            {kVersion2Keys.kernelUs, numberOrNull(timings.kernelUs)},
            {"speedup", numberOrNull(timings.speedup)},
            {kVersion2Keys.speedupCi, std::move(ci)}}},
          {"decision", toString(decision)},
          {"reason", reason},
          {"extra", extra.is_object() ? extra : json::object()}};
}

Experiment Experiment::fromJson(const json& j) {
  const std::string where = "experiment line";
  HOTKERNEL_REQUIRE(jsonfield::string(j, "format", where) == kExperimentFormat, "not a ", kExperimentFormat, " line");
  const int64_t version = jsonfield::integer(j, "version", where);
  HOTKERNEL_REQUIRE(version >= kExperimentOldestVersion && version <= kExperimentVersion, "version ", version,
                    " (this reader knows ", kExperimentOldestVersion, " to ", kExperimentVersion, ")");
  const LineKeys& k = version == 1 ? kVersion1Keys : kVersion2Keys;
  Experiment e;
  const std::optional<double> time = readNumber(j, "time", where);
  HOTKERNEL_REQUIRE(time.has_value(), where, " misses a finite \"time\"");
  e.time = *time;
  e.fingerprint = jsonfield::optionalString(j, "fingerprint", where).value_or("");
  e.op = jsonfield::string(j, "op", where);
  e.variant = jsonfield::string(j, "variant", where);
  e.candidateId = jsonfield::optionalInteger(j, k.candidateId, where);
  e.parentId = jsonfield::optionalInteger(j, k.parentId, where);
  e.params = readObject(j, "params", where);
  e.compileSeconds = readNumber(j, k.compileSeconds, where);
  const json stages = readObject(j, "stages", where);  // named: items() of a temporary would dangle
  for (const auto& [stage, outcome] : stages.items()) {
    HOTKERNEL_REQUIRE(outcome.is_string(), where, ".stages.", stage, " must be a string, got ",
                      jsonfield::describe(outcome));
    e.stages[stage] = outcome.get<std::string>();
  }
  const std::string timingsWhere = where + ".timings";
  const json t = readObject(j, "timings", where);
  e.timings.atenUs = readNumber(t, k.atenUs, timingsWhere);
  e.timings.kernelUs = readNumber(t, k.kernelUs, timingsWhere);
  e.timings.speedup = readNumber(t, "speedup", timingsWhere);
  if (jsonfield::present(t, k.speedupCi)) {
    const json& ci = t.at(k.speedupCi);
    HOTKERNEL_REQUIRE(ci.is_array() && ci.size() == 2 && ci[0].is_number() && ci[1].is_number(), timingsWhere, ".",
                      k.speedupCi, " must be [low, high], got ", ci.dump());
    e.timings.speedupCi = std::make_pair(ci[0].get<double>(), ci[1].get<double>());
  }
  const std::string decision = jsonfield::string(j, "decision", where);
  std::optional<ExperimentDecision> d = parseExperimentDecision(decision);
  HOTKERNEL_REQUIRE(d.has_value(), where, ".decision is unknown: \"", decision, "\"");
  e.decision = *d;
  e.reason = jsonfield::optionalString(j, "reason", where).value_or("");
  e.extra = readObject(j, "extra", where);
  if (version == 1) e.extra = snakeCaseKeys(e.extra);  // Note [Experiment line versions]
  return e;
}

json snakeCaseKeys(const json& j) {
  if (j.is_array()) {
    json out = json::array();
    for (const json& element : j) out.push_back(snakeCaseKeys(element));
    return out;
  }
  if (!j.is_object()) return j;
  json out = json::object();
  for (const auto& [key, value] : j.items()) out[snakeCase(key)] = snakeCaseKeys(value);
  return out;
}

double experimentTimeNow() {
  struct timespec ts;
  ::clock_gettime(CLOCK_REALTIME, &ts);
  const int64_t ms = static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
  return static_cast<double>(ms) / 1000.0;
}

ExperimentLog::ExperimentLog(std::string dir, int64_t maxBytes)
    : dir_(std::move(dir)), path_(pathFor(dir_)), maxBytes_(maxBytes) {}

std::string ExperimentLog::pathFor(const std::string& dir) {
  std::string d = dir;
  while (d.size() > 1 && d.back() == '/') d.pop_back();  // a trailing slash would follow a symlinked dir
  return d + "/" + kFileName;
}

bool ExperimentLog::append(const Experiment& experiment) const noexcept {
  try {
    Experiment stamped = experiment;
    if (stamped.time == 0) stamped.time = experimentTimeNow();
    // Invalid UTF-8 in a reason or a variant is replaced, never thrown (Note [The
    // experiment log never breaks the serving process]).
    std::string line = stamped.toJson().dump(-1, ' ', false, json::error_handler_t::replace);
    line += '\n';
    HOTKERNEL_CHECK(line.size() <= kMaxLineBytes, "experiment line of ", line.size(), " bytes exceeds ", kMaxLineBytes);
    std::string dir = dir_;
    while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
    ensureDirectory(dir);
    appendLine(path_, line, maxBytes_);
    return true;
  } catch (const std::exception& e) {
    HOTKERNEL_LOG_ONCE(Warn, "experiment-log:" + path_)
        << "not writing the experiment log " << path_ << ": " << e.what() << " (further failures are not logged)";
  } catch (...) {
    HOTKERNEL_LOG_ONCE(Warn, "experiment-log:" + path_) << "not writing the experiment log " << path_;
  }
  return false;
}

bool ExperimentFilter::matches(const Experiment& e) const {
  return (op.empty() || e.op == op) && (variant.empty() || e.variant == variant) &&
         (fingerprint.empty() || e.fingerprint == fingerprint);
}

ExperimentReadResult readExperiments(const std::string& dir, const ExperimentFilter& filter) {
  ExperimentReadResult out;
  const std::string current = ExperimentLog::pathFor(dir);
  for (const std::string& path : {current + ExperimentLog::kRotatedSuffix, current}) {
    std::string text;
    if (!openForRead(path, &text)) continue;
    out.files.push_back(path);
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line)) {
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      ++out.lines;
      json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
      try {
        Experiment e = Experiment::fromJson(j);
        if (filter.matches(e)) out.experiments.push_back(std::move(e));
      } catch (const Error&) {
        ++out.skipped;
        // A well-formed line of a newer version is counted apart: the reader is old, the log is fine.
        auto version = j.is_object() ? j.find("version") : j.end();
        if (version != j.end() && version->is_number_integer() && version->get<int64_t>() > kExperimentVersion &&
            j.value("format", json()) == kExperimentFormat) {
          ++out.newerVersion;
        }
      }
    }
  }
  std::stable_sort(out.experiments.begin(), out.experiments.end(),
                   [](const Experiment& a, const Experiment& b) { return a.time < b.time; });
  return out;
}

}  // namespace hotkernel
