#pragma once
// The experiment log: one JSON line per candidate evaluation, appended to
// <cacheDir>/experiments.jsonl by the optimizer (any number of processes at
// once) and read back by `hotkernel log` and `hotkernel report`. No torch.
//
// Note [Experiment line format]
// UTF-8 JSON Lines: one object per line, terminated by "\n". Version 2:
//   {"format":"hotkernel-experiment",   required, exactly this string
//    "version":2,                        required; readers skip lines of a newer version
//    "time":1735689600.123,              required, Unix seconds (UTC), millisecond precision
//    "fingerprint":"9f2c…",              environment fingerprint key ("" when unknown)
//    "op":"aten::_softmax",              required
//    "variant":"dtype=bfloat16;rows=4096;cols=32000",  required, the cache's variant string
//    "candidate_id":12,                  lineage id within one search, or null (e.g. a kept_aten record)
//    "parent_id":7,                      lineage parent, or null (first population)
//    "params":{"threads":256,"vec":8},   the candidate's parameter point (an object, {} when none): a map
//                                        of data, the family's parameter names as the cache stores them
//    "compile_seconds":0.41,             NVRTC wall time, or null
//    "stages":{"smoke":"pass","sweep":"fail"},  harness stage -> "pass" | "fail" | "skip" (a map of data)
//    "timings":{"aten_us":310.2,"kernel_us":250.1,"speedup":1.24,"speedup_ci":[1.21,1.27]},
//                                        each null when not measured
//    "decision":"accepted",              required: "accepted" | "rejected" | "kept_aten"
//    "reason":"speed-up CI [1.21, 1.27] clears 1.02",  free text ("" when none)
//    "extra":{"seed":123,"budget_level":2}}  free-form object ({} when none)
// Writers emit every key; readers accept a missing optional key as null and
// ignore unknown keys, so fields can be added within a version. A change to
// the meaning of an existing key bumps the version.
//
// Note [Experiment line versions]
// Version 2 is version 1 with every key in snake_case, the key case of every
// JSON document hotkernel writes for its users (docs/design/json-style.md);
// "extra"'s keys are hotkernel's field names (no map of data), snake_case
// too. Version 1 spells "candidateId", "parentId", "compileSeconds",
// "atenUs", "kernelUs", "speedupCi" and extra's keys ("budgetLevel",
// "kernelName", ...) in camelCase. Readers take both: a version 1 line reads
// as the version 2 line it would be (extra's keys through snakeCaseKeys), so
// `hotkernel log --json` shows every line as version 2.
//
// Note [Appending from many processes]
// Each line is written with one write() on a descriptor opened with
// O_APPEND, so lines of concurrent writers (threads or processes) never
// interleave: on a local file system the kernel appends the whole buffer
// atomically with respect to other O_APPEND writers. Lines are capped at
// kMaxLineBytes. A write that comes back short (disk full) leaves a
// truncated line, which readers skip and count.
//
// Note [Experiment log rotation]
// When a line would take the file past maxBytes, the writer renames it to
// experiments.jsonl.1 (replacing an older .1) and starts a new file: the log
// holds at most about 2 x maxBytes. Rotation runs under flock() on the full
// file and only when the path still names that file, so two writers never
// rotate twice. A writer that opened the file just before another rotated it
// appends its line to the .1 file, intact; readers read .1, then the current
// file, and order lines by time.
//
// Note [The experiment log never breaks the serving process]
// append() runs on the optimizer thread of a serving process: it never
// throws, returns false on any failure (unsafe path, I/O error, oversized
// line) and logs the first failure per file once. The file is created with
// mode 0600; the writer refuses a symlink (O_NOFOLLOW), a file or directory
// not owned by the user, or one writable by group or others, as the cache does.

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace hotkernel {

inline constexpr const char* kExperimentFormat = "hotkernel-experiment";
inline constexpr int kExperimentVersion = 2;
inline constexpr int kExperimentOldestVersion = 1;

enum class ExperimentDecision { Accepted, Rejected, KeptAten };
const char* toString(ExperimentDecision decision);  // "accepted", "rejected", "kept_aten"
std::optional<ExperimentDecision> parseExperimentDecision(const std::string& text);

struct ExperimentTimings {
  std::optional<double> atenUs;                        // median time of the ATen kernel, microseconds
  std::optional<double> kernelUs;                      // median time of the candidate, microseconds
  std::optional<double> speedup;                       // median of paired ATen / candidate ratios
  std::optional<std::pair<double, double>> speedupCi;  // 95% CI of the speed-up: low, high
};

// One candidate evaluation (Note [Experiment line format]).
struct Experiment {
  double time = 0;  // Unix seconds; 0: ExperimentLog::append stamps the current time
  std::string fingerprint;
  std::string op;
  std::string variant;
  std::optional<int64_t> candidateId;
  std::optional<int64_t> parentId;
  nlohmann::json params = nlohmann::json::object();
  std::optional<double> compileSeconds;
  std::map<std::string, std::string> stages;  // harness stage -> "pass" | "fail" | "skip"
  ExperimentTimings timings;
  ExperimentDecision decision = ExperimentDecision::Rejected;
  std::string reason;
  nlohmann::json extra = nlohmann::json::object();

  // The line's object, version 2 (every key, absent values as null).
  nlohmann::json toJson() const;
  // Throws Error unless `j` is a version 1 or 2 experiment object with the
  // required keys of the right types (Notes [Experiment line format] and
  // [Experiment line versions]).
  static Experiment fromJson(const nlohmann::json& j);
};

// A copy of `j` whose object keys are snake_case: an uppercase letter after a
// lowercase one or a digit starts a new word ("speedupCi" -> "speedup_ci",
// "copyGBs" -> "copy_gbs"), and every letter is lowercased. For documents
// whose keys are field names only, never data (Note [Experiment line versions]).
nlohmann::json snakeCaseKeys(const nlohmann::json& j);

// Current time as Unix seconds, rounded to milliseconds.
double experimentTimeNow();

class ExperimentLog {
 public:
  static constexpr const char* kFileName = "experiments.jsonl";
  static constexpr const char* kRotatedSuffix = ".1";
  static constexpr int64_t kDefaultMaxBytes = int64_t{64} << 20;
  static constexpr size_t kMaxLineBytes = size_t{1} << 20;

  // Appends to pathFor(dir). The directory is created (mode 0700) on the
  // first append if missing. Constructing touches nothing.
  explicit ExperimentLog(std::string dir, int64_t maxBytes = kDefaultMaxBytes);

  // Appends one line (Notes [Appending from many processes] and [The
  // experiment log never breaks the serving process]). Thread-safe.
  bool append(const Experiment& experiment) const noexcept;

  const std::string& path() const { return path_; }
  static std::string pathFor(const std::string& dir);

 private:
  std::string dir_;
  std::string path_;
  int64_t maxBytes_;
};

// Every field left empty matches anything.
struct ExperimentFilter {
  std::string op;
  std::string variant;
  std::string fingerprint;
  bool matches(const Experiment& e) const;
};

struct ExperimentReadResult {
  std::vector<Experiment> experiments;  // matching ones, in time order (file order for equal times)
  std::vector<std::string> files;       // files read, oldest first
  size_t lines = 0;                     // non-empty lines read (matching or not)
  size_t skipped = 0;                   // lines skipped: corrupt, truncated, another format, or...
  size_t newerVersion = 0;              // ...of a version newer than this reader (counted in skipped too)
};

// Reads experiments.jsonl.1 and experiments.jsonl of `dir`, skipping (and
// counting) lines that do not parse. A missing directory or file reads as
// empty. Throws Error when a file exists but cannot be read, or is a symlink.
ExperimentReadResult readExperiments(const std::string& dir, const ExperimentFilter& filter = {});

}  // namespace hotkernel
