#pragma once
// hotkernel-warmup's command line and its profile file, checked without torch
// or a GPU: `hotkernel warmup` checks them before it executes hotkernel-warmup
// (so bad input is refused on any machine, and in torch-free builds), and
// hotkernel-warmup checks them again with the same code (it can be run directly).
//
//   hotkernel warmup --profile FILE [--profile FILE]... [--budget DURATION] [--dir DIR] [--device N] [--json OUT]
//
// Parsed with CLI11 like every other command (--dir as in the cache commands;
// --cache-dir is its older name); --help shows each option's default.
//
// Several profiles (e.g. one per worker process, HOTKERNEL_PROFILE=p-%p.json)
// are merged: one target per (op, variant), its recorded calls summed.
//
// Note [Reading a profile safely]
// Each --profile names a file written by HOTKERNEL_PROFILE. Anything else is a
// usage error (exit kExitUsage, 2) with one line that names the path and what
// is wrong, never an abort or a hang:
//   - the path is stat'ed first and only a regular file is opened: a
//     directory, a FIFO (which would block an open for reading until a writer
//     comes), a socket or a device is refused without opening it;
//   - the file is opened with O_NONBLOCK (a FIFO swapped in after the stat
//     cannot block the open) and fstat'ed again: still a regular file;
//   - a missing or unreadable file (permissions) is refused with strerror's text;
//   - an empty file, one larger than kMaxProfileBytes, one that is not valid
//     JSON, or valid JSON that is not a hotkernel-profile v1 to v3 document
//     (targetsFromProfile, optimizer/ProfileTargets.h) is refused.

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "hotkernel/optimizer/ProfileTargets.h"

namespace hotkernel::cli {

struct WarmupArgs {
  std::vector<std::string> profilePaths;  // at least one; in the order given
  double budgetSeconds = 3600;
  std::string cacheDir;  // "" keeps HOTKERNEL_CACHE_DIR / the default
  int device = 0;
  std::string jsonOut;  // "" writes no summary
  bool help = false;    // -h / --help: nothing else is checked
};

// The largest profile read (a profile holds one small object per variant).
inline constexpr size_t kMaxProfileBytes = size_t{256} << 20;
// The largest --budget (a year).
inline constexpr double kMaxWarmupBudgetSeconds = 365 * 24 * 3600.0;

// "90", "90s", "10m", "1h" -> seconds in (0, kMaxWarmupBudgetSeconds]; -1 when
// malformed, not finite, <= 0 or larger.
double parseWarmupDuration(const std::string& text);

// Parses the arguments after `warmup` (without the program name) into *out.
// Returns "" or the usage problem in one line ("bad --budget 'soon'",
// "--profile is required", "unknown argument '--x'", "--device needs a
// value"). Does not look at files or devices (the warm-up refuses a device
// index this machine lacks, exit 3).
std::string parseWarmupArgs(const std::vector<std::string>& args, WarmupArgs* out);

// Reads `path` as JSON (Note [Reading a profile safely]). Returns "" and sets
// *profile, or the problem in one line that starts with the path.
std::string readProfileFile(const std::string& path, nlohmann::json* profile);

// readProfileFile, then targetsFromProfile on `device`, for each path, merged
// (mergeTargets). Returns "" and sets *targets, or the first problem in one
// line (naming its file). Never throws for anything in the files.
std::string loadWarmupTargets(const std::vector<std::string>& paths, int device, ProfileTargets* targets);

// Writes "hotkernel warmup: <problem>" and the usage text to stderr; returns kExitUsage.
int warmupUsageError(const std::string& problem);
// The usage text (several lines, ending with a newline).
std::string warmupUsageText();

}  // namespace hotkernel::cli
