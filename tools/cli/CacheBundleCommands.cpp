#include "CacheBundleCommands.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <ctime>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "BundleFile.h"
#include "CacheCommon.h"
#include "ErrorText.h"
#include "MachineFingerprint.h"
#include "hotkernel/Config.h"
#include "hotkernel/cache/Bundle.h"
#include "hotkernel/cache/BundleImport.h"
#include "hotkernel/cache/CacheStore.h"
#include "hotkernel/runtime/Check.h"

namespace hotkernel::cli {
namespace {

using cache::Bundle;
using cache::CacheStore;
using cache::Entry;
using cache::EntryTrust;
using json = nlohmann::ordered_json;

// export --json: {"format":"hotkernel-cache-export","version":1,"database":..,"bundle":<path>,"bytes":N,
//   "signed":..,"key_id":..|null,"fingerprints":[..],"entries":N,"skipped":K}; "skipped" counts the
//   selected entries that fail their checks (not exported; `cache verify` names them).
constexpr const char* kExportFormat = "hotkernel-cache-export";
// import --json: {"format":"hotkernel-cache-import","version":1,"database":..,"bundle":<path>,
//   "bundle_hotkernel_version":..,"signed":..,"signature_checked":..,"key_id":..|null,"fingerprints":[..],
//   "entries":N,"added":..,"replaced":..,"unchanged":..,"kept":..,"changed":..,"matching_entries":N|null}.
constexpr const char* kImportFormat = "hotkernel-cache-import";
constexpr int kExportVersion = 1;
constexpr int kImportVersion = 1;

struct BundleOptions {
  std::string dir;
  std::string keyFile;
  std::string out;   // export
  std::string file;  // import
  std::vector<std::string> fingerprints;
  bool all = false;
  bool json = false;
};

std::string plural(size_t n, const char* one, const char* many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

json orNull(const std::string& text) { return text.empty() ? json(nullptr) : json(text); }

// --fingerprint, --all (every fingerprint in the cache), else this machine's; nullopt after a usage error.
std::optional<std::vector<std::string>> exportSelection(const BundleOptions& o, const CacheStore& store,
                                                        ExitStatus& status) {
  if (!o.fingerprints.empty()) {
    std::vector<std::string> fps = o.fingerprints;
    std::sort(fps.begin(), fps.end());
    fps.erase(std::unique(fps.begin(), fps.end()), fps.end());
    return fps;
  }
  if (o.all) {
    std::vector<std::string> fps;
    for (const Entry& e : store.listMetadata()) {
      if (fps.empty() || fps.back() != e.fingerprint) fps.push_back(e.fingerprint);
    }
    return fps;
  }
  const MachineFingerprints machine = thisMachineFingerprints();
  if (machine.known()) return machine.keys;
  std::cerr << "hotkernel cache export: this machine's fingerprint is unknown (" << machine.unknown
            << "); name the environments to export with --fingerprint FP (see `hotkernel cache stats`) or "
               "export every entry with --all\n";
  status.code = kExitUsage;
  return std::nullopt;
}

void runExport(const BundleOptions& o, ExitStatus& status) {
  const std::string dir = resolveCacheDir(o.dir);
  const EntryTrust trust = trustFromKeyFile(o.keyFile, dir);
  std::unique_ptr<CacheStore> store = CacheStore::openReadOnly(dir, trust);
  if (!store) {
    printNoCache(dir);
    std::cerr << "hotkernel cache export: nothing to export; no file written\n";
    status.code = kExitProblem;
    return;
  }
  std::optional<std::vector<std::string>> fps = exportSelection(o, *store, status);
  if (!fps) return;
  std::vector<Entry> entries;
  size_t skipped = 0;
  for (const std::string& fp : *fps) {
    // Verified like a serving process loads them: digests, and with a key the signature.
    std::vector<Entry> loaded = store->listForFingerprint(fp);
    cache::EntryFilter filter;
    filter.fingerprint = fp;
    skipped += store->listMetadata(filter).size() - loaded.size();
    for (Entry& e : loaded) entries.push_back(std::move(e));
  }
  if (entries.empty()) {
    std::cerr << "hotkernel cache export: no entry of " << (fps->size() == 1 ? "fingerprint " : "fingerprints ");
    for (size_t i = 0; i < fps->size(); ++i) std::cerr << (i ? ", " : "") << (*fps)[i];
    std::cerr << (skipped ? " passes its checks" : "") << " in " << store->databasePath() << "; no file written\n";
    status.code = kExitProblem;
    return;
  }
  cache::BundleHeader header;
  header.hotkernelVersion = HOTKERNEL_VERSION;
  header.createdUnix = static_cast<int64_t>(std::time(nullptr));
  const size_t count = entries.size();
  std::set<std::string> exported;
  for (const Entry& e : entries) exported.insert(e.fingerprint);
  const std::string bytes = cache::encodeBundle(header, std::move(entries), trust.key.get());
  writeBundleFile(o.out, bytes);
  const std::string keyId = trust.key ? trust.key->id() : std::string();
  if (o.json) {
    json out = {{"format", kExportFormat},
                {"version", kExportVersion},
                {"database", store->databasePath()},
                {"bundle", o.out},
                {"bytes", bytes.size()},
                {"signed", trust.key != nullptr},
                {"key_id", orNull(keyId)},
                {"fingerprints", std::vector<std::string>(exported.begin(), exported.end())},
                {"entries", count},
                {"skipped", skipped}};
    std::cout << out.dump(2, ' ', false, json::error_handler_t::replace) << "\n";
  } else {
    std::cout << "exported " << plural(count, "entry", "entries") << " of "
              << plural(exported.size(), "fingerprint", "fingerprints") << " to " << o.out << " ("
              << bytes.size() << " bytes, " << (keyId.empty() ? "unsigned" : "signed with key " + keyId) << ")\n";
  }
  if (skipped > 0) {
    std::cerr << "hotkernel cache export: not exported: " << plural(skipped, "entry", "entries")
              << " failing their checks (see `hotkernel cache verify`)\n";
  }
}

void runImport(const BundleOptions& o, ExitStatus& status) {
  std::string bytes;
  if (std::string problem = readBundleFile(o.file, &bytes); !problem.empty()) {
    std::cerr << "hotkernel cache import: " << problem << "\n";
    status.code = kExitUsage;
    return;
  }
  const std::string dir = resolveCacheDir(o.dir);
  const EntryTrust trust = trustFromKeyFile(o.keyFile, dir);
  Bundle bundle;
  try {
    bundle = cache::decodeBundle(bytes, trust);
  } catch (const Error& e) {
    std::cerr << "hotkernel cache import: bundle " << o.file << " refused, nothing imported: " << userMessage(e)
              << "\n";
    status.code = kExitProblem;
    return;
  }
  const cache::ImportCounts c = cache::importEntries(dir, trust, bundle.entries);
  const MachineFingerprints machine = thisMachineFingerprints();
  size_t matching = 0;
  for (const Entry& e : bundle.entries) matching += machine.contains(e.fingerprint) ? 1 : 0;
  const std::string database = CacheStore::databasePathFor(dir);
  const std::string keyId = trust.key ? trust.key->id() : std::string();
  if (o.json) {
    json out = {{"format", kImportFormat},
                {"version", kImportVersion},
                {"database", database},
                {"bundle", o.file},
                {"bundle_hotkernel_version", bundle.header.hotkernelVersion},
                {"signed", bundle.isSigned},
                {"signature_checked", bundle.signatureChecked},
                {"key_id", orNull(keyId)},
                {"fingerprints", bundle.header.fingerprints},
                {"entries", bundle.entries.size()},
                {"added", c.added},
                {"replaced", c.replaced},
                {"unchanged", c.unchanged},
                {"kept", c.kept},
                {"changed", c.written() > 0},
                {"matching_entries", machine.known() ? json(matching) : json(nullptr)}};
    std::cout << out.dump(2, ' ', false, json::error_handler_t::replace) << "\n";
    return;
  }
  std::cout << "bundle " << o.file << ": " << plural(bundle.entries.size(), "entry", "entries") << " of "
            << plural(bundle.header.fingerprints.size(), "fingerprint", "fingerprints") << ", written by hotkernel "
            << bundle.header.hotkernelVersion << ", "
            << (bundle.signatureChecked ? "signature verified under key " + keyId
                                        : bundle.isSigned ? "signed (not checked: no key configured)" : "unsigned")
            << "\n";
  std::cout << "imported into " << database << ": " << c.added << " added, " << c.replaced << " replaced, "
            << c.unchanged << " unchanged, " << c.kept << " kept (newer here)\n";
  if (c.written() == 0) std::cout << "nothing changed: the cache already holds every entry of the bundle\n";
  if (machine.known()) {
    std::cout << matching << " of them match this machine\n";
  } else {
    std::cout << "none can be matched to this machine: its fingerprint is unknown (" << machine.unknown << ")\n";
  }
  if (bundle.header.hotkernelVersion != HOTKERNEL_VERSION) {
    std::cout << "note: the bundle was written by hotkernel " << bundle.header.hotkernelVersion << "; this is "
              << HOTKERNEL_VERSION << ", whose fingerprints differ: its processes load none of its entries\n";
  }
}

}  // namespace

void addCacheBundleCommands(CLI::App& cache, ExitStatus& status) {
  auto o = std::make_shared<BundleOptions>();
  CLI::App* exp = cache.add_subcommand(
      "export", "write the verified entries of chosen fingerprints (default: this machine's) to one bundle file");
  exp->add_option("--out", o->out, "the bundle file to write (replaced atomically)")->required();
  CLI::Option* fp = exp->add_option("--fingerprint", o->fingerprints,
                                    "an environment to export (repeatable; see `hotkernel cache stats`)");
  exp->add_flag("--all", o->all, "export every entry of every fingerprint")->excludes(fp);
  addCacheDirOption(exp, o->dir);
  addKeyFileOption(exp, o->keyFile, "that signs the bundle and that the exported entries must be signed with");
  exp->add_flag("--json", o->json, "print one JSON object (format hotkernel-cache-export, version 1)");
  exp->footer("Exit status: 0 written; 1 nothing to export; 2 bad usage, a refused key file, a failed write.");
  exp->callback([o, &status] { runExport(*o, status); });

  CLI::App* imp = cache.add_subcommand(
      "import", "check a bundle file completely, then put its entries into the cache (idempotent)");
  imp->add_option("file", o->file, "the bundle file")->required();
  addCacheDirOption(imp, o->dir);
  addKeyFileOption(imp, o->keyFile, "the bundle must be signed with; imported entries are signed with it");
  imp->add_flag("--json", o->json, "print one JSON object (format hotkernel-cache-import, version 1)");
  imp->footer("Exit status: 0 imported (also when nothing changed); 1 the bundle refused, nothing imported; 2 bad "
              "usage, an unreadable file, a refused key file, an unsafe cache.");
  imp->callback([o, &status] { runImport(*o, status); });
}

}  // namespace hotkernel::cli
