#include "CacheStatsCommands.h"

#include <CLI/CLI.hpp>
#include <ctime>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "CacheCommon.h"
#include "CacheStats.h"
#include "Format.h"
#include "RangeCheck.h"
#include "StaleSelection.h"
#include "TextTable.h"
#include "hotkernel/Config.h"
#include "hotkernel/cache/CacheStore.h"

namespace hotkernel::cli {
namespace {

using cache::CacheStore;
using cache::EntryTrust;
using json = nlohmann::ordered_json;

// stats --json: {"format":"hotkernel-cache-stats","version":1,"database":..,"found":..,"entries":N,
//   "cubin_bytes":B,"by_op":{op:{"entries","kernel"}},"by_decision":{decision:N},"by_fingerprint":[{
//   "fingerprint","gpu","torch","hotkernel","entries","newest_unix","matches_machine"}],"machine":{"known",
//   "fingerprints":[..],"unknown":null|why},"matching_entries":N|null}; keys in this order.
constexpr const char* kStatsFormat = "hotkernel-cache-stats";
// prune --stale --json: {"format":"hotkernel-cache-prune","version":1,"database":..,"found":..,"dry_run":..,
//   "max_age_days":N,"hotkernel_version":..,"stale":[{"fingerprint","hotkernel","entries","newest_unix",
//   "reason"}],"kept_for_this_machine":[..],"machine_known":..,"removed":N}; "removed" counts what a dry
//   run would remove.
constexpr const char* kPruneFormat = "hotkernel-cache-prune";
constexpr int kStatsVersion = 1;
constexpr int kPruneVersion = 1;
constexpr int64_t kMaxStaleDays = 36500;

struct StatsOptions {
  std::string dir;
  bool json = false;
  bool stale = false;
  bool dryRun = false;
  int64_t days = kDefaultStaleDays;
};

json orNull(const std::string& text) { return text.empty() ? json(nullptr) : json(text); }

std::string orUnknown(const std::string& text) { return text.empty() ? "?" : text; }

std::string plural(size_t n, const char* one, const char* many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

json statsJson(const std::string& database, bool found, const CacheStats& s, const MachineFingerprints& machine) {
  json byOp = json::object();
  for (const auto& [op, o] : s.byOp) byOp[op] = {{"entries", o.entries}, {"kernel", o.kernels}};
  json byDecision = json::object();
  for (const auto& [decision, n] : s.byDecision) byDecision[decision] = n;
  json byFingerprint = json::array();
  for (const FingerprintStats& f : s.byFingerprint) {
    byFingerprint.push_back({{"fingerprint", f.fingerprint},
                             {"gpu", orNull(f.gpu)},
                             {"torch", orNull(f.torchVersion)},
                             {"hotkernel", orNull(f.hotkernelVersion)},
                             {"entries", f.entries},
                             {"newest_unix", f.newestUnix},
                             {"matches_machine", f.matchesMachine}});
  }
  return {{"format", kStatsFormat},
          {"version", kStatsVersion},
          {"database", database},
          {"found", found},
          {"entries", s.entries},
          {"cubin_bytes", s.cubinBytes},
          {"by_op", byOp},
          {"by_decision", byDecision},
          {"by_fingerprint", byFingerprint},
          {"machine", {{"known", machine.known()}, {"fingerprints", machine.keys}, {"unknown", orNull(machine.unknown)}}},
          {"matching_entries", machine.known() ? json(s.matchingEntries) : json(nullptr)}};
}

void printStats(const std::string& database, const CacheStats& s, const MachineFingerprints& machine) {
  std::cout << plural(s.entries, "entry", "entries") << ", " << formatBytes(s.cubinBytes) << " of cubins, in "
            << database << "\n";
  if (s.entries > 0) {
    TextTable ops({"OP", "ENTRIES", "KERNEL"});
    for (const auto& [op, o] : s.byOp) ops.addRow({op, std::to_string(o.entries), std::to_string(o.kernels)});
    std::cout << "\n" << ops.render();
    TextTable decisions({"DECISION", "ENTRIES"});
    for (const auto& [decision, n] : s.byDecision) decisions.addRow({decision, std::to_string(n)});
    std::cout << "\n" << decisions.render();
    TextTable fps({"FINGERPRINT", "GPU", "TORCH", "HOTKERNEL", "ENTRIES", "NEWEST (UTC)", "THIS MACHINE"});
    for (const FingerprintStats& f : s.byFingerprint) {
      fps.addRow({f.fingerprint, orUnknown(f.gpu), orUnknown(f.torchVersion), orUnknown(f.hotkernelVersion),
                  std::to_string(f.entries), formatUtc(f.newestUnix),
                  machine.known() ? (f.matchesMachine ? "yes" : "no") : "?"});
    }
    std::cout << "\n" << fps.render() << "\n";
  }
  if (machine.known()) {
    std::cout << s.matchingEntries << " of " << plural(s.entries, "entry", "entries")
              << " match this machine (fingerprint" << (machine.keys.size() == 1 ? " " : "s ");
    for (size_t i = 0; i < machine.keys.size(); ++i) std::cout << (i ? ", " : "") << machine.keys[i];
    std::cout << ")\n";
  } else {
    std::cout << "none can be matched to this machine: its fingerprint is unknown (" << machine.unknown << ")\n";
  }
}

void runStats(const StatsOptions& o) {
  const std::string dir = resolveCacheDir(o.dir);
  // Metadata only: nothing is verified, so no key is needed.
  std::unique_ptr<CacheStore> store = CacheStore::openReadOnly(dir, EntryTrust::none());
  const std::string database = store ? store->databasePath() : CacheStore::databasePathFor(dir);
  const MachineFingerprints machine = thisMachineFingerprints();
  const CacheStats stats = computeCacheStats(store ? store->listMetadata() : std::vector<cache::Entry>{}, machine);
  if (o.json) {
    std::cout << statsJson(database, store != nullptr, stats, machine).dump(2, ' ', false, json::error_handler_t::replace)
              << "\n";
    return;
  }
  if (!store) {
    printNoCache(dir);
    return;
  }
  printStats(database, stats, machine);
}

json pruneJson(const std::string& database, bool found, const StatsOptions& o, const StaleSelection& sel,
               const MachineFingerprints& machine, size_t removed) {
  json stale = json::array();
  for (const StaleFingerprint& f : sel.stale) {
    stale.push_back({{"fingerprint", f.fingerprint},
                     {"hotkernel", orNull(f.hotkernelVersion)},
                     {"entries", f.entries},
                     {"newest_unix", f.newestUnix},
                     {"reason", f.reason}});
  }
  return {{"format", kPruneFormat},
          {"version", kPruneVersion},
          {"database", database},
          {"found", found},
          {"dry_run", o.dryRun},
          {"max_age_days", o.days},
          {"hotkernel_version", HOTKERNEL_VERSION},
          {"stale", stale},
          {"kept_for_this_machine", sel.keptForMachine},
          {"machine_known", machine.known()},
          {"removed", removed}};
}

void runPruneStale(const StatsOptions& o) {
  const std::string dir = resolveCacheDir(o.dir);
  // Like rm: metadata only and no key, so a refused or missing key never stops a cleanup.
  std::unique_ptr<CacheStore> reader = CacheStore::openReadOnly(dir, EntryTrust::none());
  const bool found = reader != nullptr;
  const std::string database = found ? reader->databasePath() : CacheStore::databasePathFor(dir);
  const std::vector<cache::Entry> entries = found ? reader->listMetadata() : std::vector<cache::Entry>{};
  reader.reset();
  const MachineFingerprints machine = entries.empty() ? MachineFingerprints{} : thisMachineFingerprints();
  StalePolicy policy;
  policy.nowUnix = static_cast<int64_t>(std::time(nullptr));
  policy.maxAgeDays = o.days;
  policy.hotkernelVersion = HOTKERNEL_VERSION;
  const StaleSelection sel = selectStale(entries, policy, machine);
  size_t removed = 0;
  if (o.dryRun) {
    removed = sel.staleEntries();
  } else if (!sel.stale.empty()) {
    std::unique_ptr<CacheStore> store = CacheStore::open(dir, EntryTrust::none());
    for (const StaleFingerprint& f : sel.stale) {
      cache::EntryFilter filter;
      filter.fingerprint = f.fingerprint;
      removed += store->remove(filter);
    }
  }
  if (o.json) {
    std::cout << pruneJson(database, found, o, sel, machine, removed).dump(2, ' ', false, json::error_handler_t::replace)
              << "\n";
    return;
  }
  if (!found) printNoCache(dir);
  for (const StaleFingerprint& f : sel.stale) {
    std::cout << (o.dryRun ? "would remove " : "removing ") << plural(f.entries, "entry", "entries")
              << " of fingerprint " << f.fingerprint << " (newest " << formatUtc(f.newestUnix)
              << " UTC): " << f.reason << "\n";
  }
  for (const std::string& fp : sel.keptForMachine) {
    std::cout << "keeping fingerprint " << fp << ": it is this machine's\n";
  }
  if (!entries.empty() && !machine.known()) {
    std::cout << "this machine's fingerprint is unknown (" << machine.unknown << "): no fingerprint is kept for it\n";
  }
  std::cout << (o.dryRun ? "would remove " : "removed ") << plural(removed, "entry", "entries") << " of "
            << plural(sel.stale.size(), "stale fingerprint", "stale fingerprints") << " (older than "
            << plural(static_cast<size_t>(o.days), "day", "days") << ", or not hotkernel " << HOTKERNEL_VERSION
            << ") from " << database << (o.dryRun ? " (dry run)" : "") << "\n";
}

}  // namespace

void addCacheStatsCommands(CLI::App& cache) {
  auto o = std::make_shared<StatsOptions>();
  CLI::App* stats = cache.add_subcommand(
      "stats", "count entries by op, decision and fingerprint, and which match this machine (metadata only)");
  addCacheDirOption(stats, o->dir);
  stats->add_flag("--json", o->json, "print one JSON object (format hotkernel-cache-stats, version 1)");
  stats->callback([o] { runStats(*o); });

  CLI::App* prune = cache.add_subcommand(
      "prune", "remove the entries of stale fingerprints: other hotkernel versions, or nothing new for --days");
  prune->add_flag("--stale", o->stale,
                  "remove every entry of a fingerprint of another hotkernel version, or whose newest entry is "
                  "older than --days; never this machine's fingerprints")
      ->required();
  prune->add_option("--days", o->days, "age limit in days of a fingerprint's newest entry (default " +
                                           std::to_string(kDefaultStaleDays) + ")")
      ->check(integerInRange(0, kMaxStaleDays));
  prune->add_flag("--dry-run", o->dryRun, "say what would be removed, remove nothing");
  addCacheDirOption(prune, o->dir);
  prune->add_flag("--json", o->json, "print one JSON object (format hotkernel-cache-prune, version 1)");
  prune->callback([o] { runPruneStale(*o); });
}

}  // namespace hotkernel::cli
