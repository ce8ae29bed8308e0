#include "CacheCommands.h"

#include <CLI/CLI.hpp>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <tuple>

#include "CacheBundleCommands.h"
#include "CacheCommon.h"
#include "CacheStatsCommands.h"
#include "Format.h"
#include "MachineFingerprint.h"
#include "TextTable.h"
#include "hotkernel/cache/CacheStore.h"

namespace hotkernel::cli {
namespace {

using cache::CacheStore;
using cache::Entry;
using cache::EntryFilter;
using cache::EntryTrust;
using cache::VerifyReport;
using cache::VerifyStatus;

// Options of all cache commands; owned by the callbacks through a shared_ptr.
struct CacheOptions {
  std::string dir;
  bool json = false;
  bool all = false;
  bool database = false;
  std::string op;
  std::string variant;
  std::string fingerprint;
  std::string keyFile;  // verify --key-file; empty: $HOTKERNEL_CACHE_KEY_FILE
};

void addDirOption(CLI::App* cmd, CacheOptions& o) { addCacheDirOption(cmd, o.dir); }

std::string cacheDir(const CacheOptions& o) { return resolveCacheDir(o.dir); }

EntryFilter filterOf(const CacheOptions& o) {
  EntryFilter f;
  if (!o.fingerprint.empty()) f.fingerprint = o.fingerprint;
  if (!o.op.empty()) f.op = o.op;
  if (!o.variant.empty()) f.variant = o.variant;
  return f;
}

// A JSON text field as JSON: parsed when it parses, else kept as a string.
nlohmann::json embedJson(const std::string& text) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  return j.is_discarded() ? nlohmann::json(text) : j;
}

nlohmann::json entryJson(const Entry& e) {
  return {{"fingerprint", e.fingerprint},
          {"environment", embedJson(e.fingerprintJson)},
          {"op", e.op},
          {"variant", e.variant},
          {"decision", e.decision},
          {"family", e.family},
          {"kernel_name", e.kernelName},
          {"params", embedJson(e.params)},
          {"metrics", embedJson(e.metrics)},
          {"cubin_bytes", e.cubinBytes},
          {"cubin_sha256", e.cubinSha256},
          {"created_unix", e.createdUnix}};
}

// --- ls ----------------------------------------------------------------------

// ls --json: {"format":"hotkernel-cache-ls","version":1,"database":..,"found":..,"entries":[{entry fields,
// "matches_machine":..}]}; show --json: the same with format "hotkernel-cache-show" and each entry's
// "integrity" instead of "matches_machine". Keys in this order (ordered_json); the entries' fields are
// entryJson's.
constexpr const char* kLsFormat = "hotkernel-cache-ls";
constexpr const char* kShowFormat = "hotkernel-cache-show";
constexpr int kListingVersion = 1;

nlohmann::ordered_json listingJson(const char* format, const std::string& database, bool found,
                                   const nlohmann::json& entries) {
  return {{"format", format}, {"version", kListingVersion}, {"database", database}, {"found", found},
          {"entries", entries}};
}

void runLs(const CacheOptions& o) {
  std::string dir = cacheDir(o);
  // Metadata only: nothing is verified, so no key is needed.
  std::unique_ptr<CacheStore> store = CacheStore::openReadOnly(dir, EntryTrust::none());
  std::vector<Entry> entries = store ? store->listMetadata() : std::vector<Entry>{};
  const MachineFingerprints machine = entries.empty() ? MachineFingerprints{} : thisMachineFingerprints();
  if (o.json) {
    nlohmann::json out = nlohmann::json::array();
    for (const Entry& e : entries) {
      nlohmann::json j = entryJson(e);
      j["matches_machine"] = machine.contains(e.fingerprint);
      out.push_back(std::move(j));
    }
    const std::string database = store ? store->databasePath() : CacheStore::databasePathFor(dir);
    std::cout << listingJson(kLsFormat, database, store != nullptr, out).dump(2) << "\n";
    return;
  }
  if (!store) {
    printNoCache(dir);
    return;
  }
  // HERE marks this machine's entries (prune --stale keeps them: Note [Stale fingerprints]); no column without
  // a known fingerprint.
  std::vector<std::string> header = {"FINGERPRINT", "OP", "VARIANT", "DECISION", "FAMILY", "SPEEDUP", "CUBIN",
                                     "CREATED (UTC)"};
  if (machine.known()) header.insert(header.begin(), "HERE");
  TextTable table(header);
  int64_t cubinTotal = 0;
  size_t here = 0;
  for (const Entry& e : entries) {
    std::vector<std::string> row = {e.fingerprint, e.op, e.variant, e.decision, e.family.empty() ? "-" : e.family,
                                    formatSpeedup(e.metrics), e.cubinBytes ? formatBytes(e.cubinBytes) : "-",
                                    formatUtc(e.createdUnix)};
    const bool matches = machine.contains(e.fingerprint);
    if (machine.known()) row.insert(row.begin(), matches ? "*" : "");
    here += matches ? 1 : 0;
    table.addRow(std::move(row));
    cubinTotal += e.cubinBytes;
  }
  if (table.rows() > 0) std::cout << table.render();
  std::cout << entries.size() << (entries.size() == 1 ? " entry" : " entries") << ", " << formatBytes(cubinTotal)
            << " of cubins, in " << store->databasePath() << "\n";
  if (entries.empty()) return;
  if (machine.known()) {
    std::cout << here << " of them (marked *) match this machine\n";
  } else {
    std::cout << "none can be matched to this machine: its fingerprint is unknown (" << machine.unknown << ")\n";
  }
}

// --- show --------------------------------------------------------------------

void printEntry(const Entry& e, const std::string& integrity) {
  auto pretty = [](const std::string& text) {
    nlohmann::json j = embedJson(text);
    std::string s = j.is_string() ? j.get<std::string>() : j.dump(2);
    std::string indented = "  ";
    for (char c : s) indented += c == '\n' ? std::string("\n  ") : std::string(1, c);
    return indented;
  };
  std::cout << "op:           " << e.op << "\n"
            << "variant:      " << e.variant << "\n"
            << "fingerprint:  " << e.fingerprint << "\n"
            << "environment:  " << e.fingerprintJson << "\n"
            << "decision:     " << e.decision << "\n"
            << "family:       " << (e.family.empty() ? "-" : e.family) << "\n"
            << "kernel name:  " << (e.kernelName.empty() ? "-" : e.kernelName) << "\n"
            << "cubin:        " << e.cubinBytes << " bytes, sha256 " << e.cubinSha256 << "\n"
            << "integrity:    " << integrity << "\n"
            << "created:      " << formatUtc(e.createdUnix) << " UTC (" << e.createdUnix << ")\n"
            << "params:\n"
            << pretty(e.params) << "\n"
            << "metrics:\n"
            << pretty(e.metrics) << "\n";
}

void runShow(const CacheOptions& o, ExitStatus& status) {
  std::string dir = cacheDir(o);
  std::unique_ptr<CacheStore> store = CacheStore::openReadOnly(dir);
  EntryFilter filter = filterOf(o);
  std::vector<Entry> entries = store ? store->listMetadata(filter) : std::vector<Entry>{};
  if (entries.empty()) {
    std::cerr << "no cache entry for op=" << o.op << " variant=" << o.variant
              << (o.fingerprint.empty() ? "" : " fingerprint=" + o.fingerprint) << " in "
              << (store ? store->databasePath() : dir) << "\n";
    status.code = kExitProblem;
    return;
  }
  std::map<std::tuple<std::string, std::string, std::string>, VerifyReport> integrity;
  for (VerifyReport& r : store->verify(filter)) {
    integrity[{r.fingerprint, r.op, r.variant}] = std::move(r);
  }
  auto integrityOf = [&integrity](const Entry& e) -> std::string {
    auto it = integrity.find({e.fingerprint, e.op, e.variant});
    if (it == integrity.end()) return "unknown (entry changed while reading)";
    if (it->second.status == VerifyStatus::Ok) return "ok";
    return std::string(cache::toString(it->second.status)) + ": " + it->second.detail;
  };
  if (o.json) {
    nlohmann::json out = nlohmann::json::array();
    for (const Entry& e : entries) {
      nlohmann::json j = entryJson(e);
      j["integrity"] = integrityOf(e);
      out.push_back(std::move(j));
    }
    std::cout << listingJson(kShowFormat, store->databasePath(), true, out).dump(2) << "\n";
    return;
  }
  for (size_t i = 0; i < entries.size(); ++i) {
    if (i > 0) std::cout << "\n";
    printEntry(entries[i], integrityOf(entries[i]));
  }
}

// --- verify ------------------------------------------------------------------

// verify --json: {"format":"hotkernel-cache-verify","version":1,"database":..,"found":true,
//   "entries":N,"failed":F,"lost":L,"ok":true,"problems":[{"kind":"fail"|"lost","status":..,
//   "op":..,"variant":..,"fingerprint":..,"detail":..}]}; op, variant and fingerprint are null
// in a report about the database as a whole. Signed mode (a key file given or configured) adds
// "key_id" after "found", and "signatures":[{"op","variant","fingerprint","signature":"ok (signed)"|
// "unsigned"|"bad signature"|"not checked"}] (one per entry; "not checked": it failed a digest check
// first) after "problems"; unsigned and badly signed entries are problems of kind "fail".
// Keys in this order (ordered_json).
constexpr const char* kVerifyFormat = "hotkernel-cache-verify";
constexpr int kVerifyVersion = 1;

// How one entry's signature fared, for the per-entry lines of signed mode.
const char* signatureVerdict(VerifyStatus status) {
  switch (status) {
    case VerifyStatus::Ok:
      return "ok (signed)";
    case VerifyStatus::Unsigned:
      return "unsigned";
    case VerifyStatus::BadSignature:
      return "bad signature";
    default:
      return "not checked";
  }
}

void runVerify(const CacheOptions& o, ExitStatus& status) {
  std::string dir = cacheDir(o);
  EntryTrust trust = trustFromKeyFile(o.keyFile, dir);
  const bool signedMode = trust.signedMode();
  const std::string keyId = trust.key ? trust.key->id() : std::string();
  std::unique_ptr<CacheStore> store = CacheStore::openReadOnly(dir, std::move(trust));
  nlohmann::ordered_json out = {{"format", kVerifyFormat},
                        {"version", kVerifyVersion},
                        {"database", store ? store->databasePath() : CacheStore::databasePathFor(dir)},
                        {"found", store != nullptr}};
  if (signedMode) out["key_id"] = keyId;
  if (!store) {
    printNoCache(dir);
    if (o.json) {
      out.update({{"entries", 0}, {"failed", 0}, {"lost", 0}, {"ok", true},
                  {"problems", nlohmann::ordered_json::array()}});
      if (signedMode) out["signatures"] = nlohmann::ordered_json::array();
      std::cout << out.dump(2) << "\n";
    } else {
      std::cout << "nothing to verify\n";
    }
    return;
  }
  size_t entries = 0;
  size_t failed = 0;   // entries and database-level problems, lost commits aside
  size_t lost = 0;     // committed entries missing from the database (VerifyStatus::Lost, one per key)
  bool problem = false;
  nlohmann::ordered_json problems = nlohmann::ordered_json::array();
  nlohmann::ordered_json signatures = nlohmann::ordered_json::array();
  for (const VerifyReport& r : store->verifyAll()) {
    bool isEntry = !r.op.empty() || !r.variant.empty() || !r.fingerprint.empty();
    bool isLost = r.status == VerifyStatus::Lost;
    entries += isEntry && !isLost ? 1 : 0;
    if (signedMode && isEntry && !isLost) {
      signatures.push_back({{"op", r.op},
                            {"variant", r.variant},
                            {"fingerprint", r.fingerprint},
                            {"signature", signatureVerdict(r.status)}});
      if (!o.json && r.status == VerifyStatus::Ok) {
        std::cout << "ok (signed)  op=" << r.op << " variant=" << r.variant << " fingerprint=" << r.fingerprint
                  << "\n";
      }
    }
    if (r.status == VerifyStatus::Ok) continue;
    problem = true;
    if (isLost) {
      lost += isEntry ? 1 : 0;
    } else {
      ++failed;
    }
    auto orNull = [isEntry](const std::string& s) {
      return isEntry ? nlohmann::ordered_json(s) : nlohmann::ordered_json(nullptr);
    };
    problems.push_back({{"kind", isLost ? "lost" : "fail"},
                        {"status", cache::toString(r.status)},
                        {"op", orNull(r.op)},
                        {"variant", orNull(r.variant)},
                        {"fingerprint", orNull(r.fingerprint)},
                        {"detail", r.detail}});
    if (o.json) continue;
    const bool signature = r.status == VerifyStatus::Unsigned || r.status == VerifyStatus::BadSignature;
    std::cout << (isLost ? "LOST " : "FAIL ") << (signature ? signatureVerdict(r.status) : cache::toString(r.status))
              << "  ";
    if (isEntry) std::cout << "op=" << r.op << " variant=" << r.variant << " fingerprint=" << r.fingerprint << ": ";
    std::cout << r.detail << "\n";
  }
  if (problem) status.code = kExitProblem;
  if (o.json) {
    out.update({{"entries", entries}, {"failed", failed}, {"lost", lost}, {"ok", !problem}, {"problems", problems}});
    if (signedMode) out["signatures"] = signatures;
    std::cout << out.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) << "\n";
    return;
  }
  std::string outcome;
  if (failed > 0) outcome = std::to_string(failed) + " failed";
  if (lost > 0) {
    outcome += (outcome.empty() ? "" : ", ") + std::to_string(lost) +
               (lost == 1 ? " committed entry lost" : " committed entries lost");
  }
  if (outcome.empty()) outcome = problem ? "problems found" : "all ok";
  std::cout << "verified " << entries << (entries == 1 ? " entry" : " entries") << " in " << store->databasePath()
            << (signedMode ? " against key " + keyId : std::string()) << ": " << outcome << "\n";
}

// --- rm ----------------------------------------------------------------------

void runRm(const CacheOptions& o, ExitStatus& status) {
  EntryFilter filter = filterOf(o);
  if (filter.selectsAll() && !o.all) {
    std::cerr << "hotkernel cache rm: refusing to remove every entry without --all; "
                 "select entries with --op, --variant or --fingerprint\n";
    status.code = kExitUsage;
    return;
  }
  std::string dir = cacheDir(o);
  // Checks the directory like open() but never creates a cache only to empty it.
  if (!CacheStore::openReadOnly(dir, EntryTrust::none())) {
    printNoCache(dir);
    std::cout << "removed 0 entries\n";
    return;
  }
  // Removing needs no key: a refused or missing key must not stop a cleanup.
  std::unique_ptr<CacheStore> store = CacheStore::open(dir, EntryTrust::none());
  size_t removed = o.all ? store->removeAll() : store->remove(filter);
  std::cout << "removed " << removed << (removed == 1 ? " entry" : " entries") << " from " << store->databasePath()
            << "\n";
}

// --- path --------------------------------------------------------------------

void runPath(const CacheOptions& o) {
  std::string dir = cacheDir(o);
  std::cout << (o.database ? CacheStore::databasePathFor(dir) : CacheStore::absoluteDirectory(dir)) << "\n";
}

}  // namespace

void addCacheCommands(CLI::App& app, ExitStatus& status) {
  auto o = std::make_shared<CacheOptions>();
  CLI::App* cache = app.add_subcommand("cache", "inspect, verify, prune, export and import the kernel cache");
  // Not require_subcommand(): that would answer `cache frob` with "a subcommand is required".
  cache->callback([cache, &status] {
    if (!cache->get_subcommands().empty()) return;
    std::cerr << "hotkernel cache: missing command\n" << cache->help();
    status.code = kExitUsage;
  });

  CLI::App* ls = cache->add_subcommand("ls", "list cached entries (metadata only)");
  addDirOption(ls, *o);
  ls->add_flag("--json", o->json, "print one JSON object (format hotkernel-cache-ls, version 1) instead of a table");
  ls->callback([o] { runLs(*o); });

  CLI::App* show =
      cache->add_subcommand("show", "print one entry in full (params, metrics, environment; not the cubin)");
  show->add_option("op", o->op, "op, e.g. aten::_softmax")->required();
  show->add_option("variant", o->variant, "canonical variant string")->required();
  show->add_option("--fingerprint", o->fingerprint, "environment fingerprint (default: entries of every environment)");
  addDirOption(show, *o);
  show->add_flag("--json", o->json, "print one JSON object (format hotkernel-cache-show, version 1)");
  show->callback([o, &status] { runShow(*o, status); });

  CLI::App* verify = cache->add_subcommand(
      "verify", "re-hash every entry and, with a key, check its signature; exit code 1 if any fails");
  addDirOption(verify, *o);
  verify->add_option("--key-file", o->keyFile,
                     "HMAC key the entries must be signed with (default: $HOTKERNEL_CACHE_KEY_FILE; none: "
                     "signatures are not checked)");
  verify->add_flag("--json", o->json, "print one JSON object (format hotkernel-cache-verify, version 1)");
  verify->callback([o, &status] { runVerify(*o, status); });

  CLI::App* rm = cache->add_subcommand("rm", "remove entries matching every given filter");
  CLI::Option* opOpt = rm->add_option("--op", o->op, "only entries of this op");
  CLI::Option* variantOpt = rm->add_option("--variant", o->variant, "only entries of this variant");
  CLI::Option* fpOpt = rm->add_option("--fingerprint", o->fingerprint, "only entries of this environment");
  rm->add_flag("--all", o->all, "remove every entry")->excludes(opOpt)->excludes(variantOpt)->excludes(fpOpt);
  addDirOption(rm, *o);
  rm->callback([o, &status] { runRm(*o, status); });

  CLI::App* path = cache->add_subcommand("path", "print the cache directory");
  addDirOption(path, *o);
  path->add_flag("--database", o->database, "print the database file instead");
  path->callback([o] { runPath(*o); });

  addCacheStatsCommands(*cache);
  addCacheBundleCommands(*cache, status);
}

}  // namespace hotkernel::cli
