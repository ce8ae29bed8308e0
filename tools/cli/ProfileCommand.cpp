#include "ProfileCommand.h"

#include <CLI/CLI.hpp>

#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "CacheCommon.h"
#include "ErrorText.h"
#include "Format.h"
#include "MachineFingerprint.h"
#include "ProfileView.h"
#include "RangeCheck.h"
#include "TextTable.h"
#include "WarmupArgs.h"
#include "hotkernel/cache/CacheStore.h"
#include "hotkernel/runtime/Config.h"

namespace hotkernel::cli {
namespace {

using cache::CacheStore;
using json = nlohmann::ordered_json;

// --json: {"format":"hotkernel-profile-view","version":2,"files":[..],"ranked_by":"gpu_time"|"calls",
//   "profiles_with_gpu_time":N,"total_estimated_calls":x,"total_gpu_ns":x|null,"served_share":x,
//   "machine":{"known","fingerprints":[..],"unknown":null|why},"cache":{"database","found"},
//   "ops":[{"rank","op","served","opt_in":null|"native_group_norm","estimated_calls","estimated_deferred_calls",
//     "estimated_gpu_ns":x|null,"share",
//     "variants":[{"op","variant","family":..|null,"estimated_calls","estimated_deferred_calls",
//       "estimated_gpu_ns":x|null,"share","cached":null|{"decision","speedup":x|null}}]}],"shown_ops":N,
//   "notes":[..]}; keys in this order.
constexpr const char* kViewFormat = "hotkernel-profile-view";
// Version 2 adds each op's "opt_in" (Note [Opt-in ops in the view] in ProfileView.h); otherwise version 1's.
// Version 3 adds "estimated_deferred_calls" to ops and variants: of their estimated calls, those the fusion
// engine deferred into chains (0 when the profiles say none).
constexpr int kViewVersion = 3;
constexpr int64_t kMaxTop = 1000000;

struct ProfileOptions {
  std::vector<std::string> files;
  bool json = false;
  int64_t top = 20;
  std::string by;  // "", "calls", "gpu-time"
  std::string dir;
};

// What the cache holds for a variant on this machine.
struct CachedState {
  bool looked = false;   // the machine's fingerprint is known and the cache exists
  std::string decision;  // "kernel", "keep_aten", "aten_backend", or "" (no verified entry)
  std::string speedup;   // "1.84x" or "-"
  std::optional<double> speedupValue;
};

class CacheLookup {
 public:
  explicit CacheLookup(const std::string& dirOption)
      : dir_(resolveCacheDir(dirOption)), machine_(thisMachineFingerprints()) {
    if (machine_.known()) store_ = CacheStore::openReadOnly(dir_, trustFromKeyFile("", dir_));
  }

  CachedState lookup(const std::string& op, const std::string& variant) const {
    CachedState s;
    if (!store_) return s;
    s.looked = true;
    for (const std::string& fingerprint : machine_.keys) {
      // get() verifies the entry (digests, and with a key its signature) before returning it.
      if (std::optional<cache::Entry> e = store_->get(fingerprint, op, variant)) {
        s.decision = e->decision;
        s.speedup = formatSpeedup(e->metrics);
        nlohmann::json m = nlohmann::json::parse(e->metrics, nullptr, /*allow_exceptions=*/false);
        if (m.is_object() && m.contains("speedup") && m["speedup"].is_number()) s.speedupValue = m["speedup"].get<double>();
        return s;
      }
    }
    return s;
  }

  const MachineFingerprints& machine() const { return machine_; }
  bool found() const { return store_ != nullptr; }
  std::string database() const { return store_ ? store_->databasePath() : CacheStore::databasePathFor(dir_); }

 private:
  std::string dir_;
  MachineFingerprints machine_;
  std::unique_ptr<CacheStore> store_;
};

std::string formatNs(double ns) {
  char buf[32];
  if (ns < 1e3) {
    std::snprintf(buf, sizeof buf, "%.0f ns", ns);
  } else if (ns < 1e6) {
    std::snprintf(buf, sizeof buf, "%.1f us", ns / 1e3);
  } else if (ns < 1e9) {
    std::snprintf(buf, sizeof buf, "%.2f ms", ns / 1e6);
  } else {
    std::snprintf(buf, sizeof buf, "%.2f s", ns / 1e9);
  }
  return buf;
}

std::string formatCalls(double calls) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f", std::round(calls));
  return buf;
}

std::string formatShare(double share) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%.1f%%", share * 100.0);
  return buf;
}

json orNull(const std::optional<double>& x) { return x ? json(*x) : json(nullptr); }

json cachedJson(const CachedState& c) {
  if (c.decision.empty()) return nullptr;
  return {{"decision", c.decision}, {"speedup", orNull(c.speedupValue)}};
}

std::string cachedText(const CachedState& c) {
  if (!c.looked) return "?";
  if (c.decision.empty()) return "-";
  return c.decision == "kernel" || c.decision == "aten_backend" ? c.decision + " " + c.speedup : c.decision;
}

void printJson(const ProfileOptions& o, const ProfileView& view, const CacheLookup& cache) {
  json ops = json::array();
  const size_t shown = std::min(view.ops.size(), static_cast<size_t>(o.top));
  for (size_t i = 0; i < shown; ++i) {
    const ViewOp& op = view.ops[i];
    json variants = json::array();
    for (const ViewVariant& v : op.variants) {
      variants.push_back({{"op", v.op},
                          {"variant", v.variant},
                          {"family", v.family.empty() ? json(nullptr) : json(v.family)},
                          {"estimated_calls", v.estimatedCalls},
                          {"estimated_deferred_calls", v.estimatedDeferredCalls},
                          {"estimated_gpu_ns", orNull(v.estimatedGpuNs)},
                          {"share", v.share},
                          {"cached", cachedJson(cache.lookup(v.op, v.variant))}});
    }
    ops.push_back({{"rank", i + 1},
                   {"op", op.op},
                   {"served", op.served},
                   {"opt_in", op.optIn.empty() ? json(nullptr) : json(op.optIn)},
                   {"estimated_calls", op.estimatedCalls},
                   {"estimated_deferred_calls", op.estimatedDeferredCalls},
                   {"estimated_gpu_ns", orNull(op.estimatedGpuNs)},
                   {"share", op.share},
                   {"variants", std::move(variants)}});
  }
  const MachineFingerprints& machine = cache.machine();
  const json out = {
      {"format", kViewFormat},
      {"version", kViewVersion},
      {"files", o.files},
      {"ranked_by", view.by == RankBy::GpuTime ? "gpu_time" : "calls"},
      {"profiles_with_gpu_time", view.profilesWithGpuTime},
      {"total_estimated_calls", view.totalCalls},
      {"total_gpu_ns", view.by == RankBy::GpuTime ? json(view.totalGpuNs) : json(nullptr)},
      {"served_share", view.servedShare},
      {"machine",
       {{"known", machine.known()},
        {"fingerprints", machine.keys},
        {"unknown", machine.unknown.empty() ? json(nullptr) : json(machine.unknown)}}},
      {"cache", {{"database", cache.database()}, {"found", cache.found()}}},
      {"ops", std::move(ops)},
      {"shown_ops", shown},
      {"notes", view.notes}};
  std::cout << out.dump(2) << "\n";
}

// The share of `calls` fused chains took: "-" for none.
std::string deferredText(double deferred, double calls) {
  if (deferred <= 0 || calls <= 0) return "-";
  return formatShare(std::min(1.0, deferred / calls));
}

void printTable(const ProfileOptions& o, const ProfileView& view, const CacheLookup& cache) {
  const bool gpu = view.by == RankBy::GpuTime;
  std::cout << "ranked by " << (gpu ? "GPU time (CUPTI, estimated from the sampled calls)" : "calls (estimated)")
            << " in " << view.profiles << (view.profiles == 1 ? " profile" : " profiles") << ": "
            << view.ops.size() << " ops";
  if (gpu) std::cout << ", " << formatNs(view.totalGpuNs) << " of kernels in all";
  std::cout << "\n";
  std::vector<std::string> header = {"RANK", "OP / VARIANT", "CALLS"};
  // Note [Deferred calls in the recorder]: the share of the calls fused chains took, when any were.
  const bool fused = view.anyDeferred;
  if (fused) header.push_back("IN CHAINS");
  if (gpu) header.push_back("GPU TIME");
  for (const char* h : {"SHARE", "SERVED", "CACHED"}) header.push_back(h);
  TextTable table(header);
  const size_t shown = std::min(view.ops.size(), static_cast<size_t>(o.top));
  for (size_t i = 0; i < shown; ++i) {
    const ViewOp& op = view.ops[i];
    std::vector<std::string> row = {std::to_string(i + 1), op.op, formatCalls(op.estimatedCalls)};
    if (fused) row.push_back(deferredText(op.estimatedDeferredCalls, op.estimatedCalls));
    if (gpu) row.push_back(formatNs(op.estimatedGpuNs.value_or(0.0)));
    const std::string served = !op.served ? "-" : op.optIn.empty() ? "yes" : "opt-in";
    for (const std::string& cell : {formatShare(op.share), served, std::string()}) {
      row.push_back(cell);
    }
    table.addRow(std::move(row));
    for (const ViewVariant& v : op.variants) {
      std::vector<std::string> vrow = {"", "  " + (v.op == op.op ? "" : v.op + " ") + v.variant,
                                       formatCalls(v.estimatedCalls)};
      if (fused) vrow.push_back(deferredText(v.estimatedDeferredCalls, v.estimatedCalls));
      if (gpu) vrow.push_back(formatNs(v.estimatedGpuNs.value_or(0.0)));
      vrow.push_back(formatShare(v.share));
      vrow.push_back(v.family.empty() ? "-" : v.family);
      vrow.push_back(v.family.empty() ? "-" : cachedText(cache.lookup(v.op, v.variant)));
      table.addRow(std::move(vrow));
    }
  }
  std::cout << table.render();
  std::cout << "ops a family of this build serves: " << formatShare(view.servedShare) << " of "
            << (gpu ? "the GPU time" : "the calls") << "\n";
  // Note [Opt-in ops in the view]: the shown ops HOTKERNEL_OPS' default leaves out, and what serves them.
  std::string optIn;
  for (size_t i = 0; i < shown; ++i) {
    if (!view.ops[i].optIn.empty()) optIn += (optIn.empty() ? "" : ",") + view.ops[i].optIn;
  }
  if (!optIn.empty()) {
    std::cout << "opt-in: served only when named in HOTKERNEL_OPS, e.g. HOTKERNEL_OPS=" << kDefaultServedOps << ","
              << optIn << "\n";
  }
  if (shown < view.ops.size()) {
    std::cout << (view.ops.size() - shown) << " more ops not shown (--top " << o.top << ")\n";
  }
  if (!cache.machine().known()) {
    std::cout << "CACHED ?: this machine's cache fingerprint is unknown (" << cache.machine().unknown << ")\n";
  } else if (!cache.found()) {
    std::cout << "CACHED ?: no hotkernel cache at " << cache.database() << "\n";
  }
  for (const std::string& note : view.notes) std::cout << "note: " << note << "\n";
}

void runProfile(const ProfileOptions& o, ExitStatus& status) {
  std::vector<RecordedProfile> profiles;
  for (const std::string& path : o.files) {
    nlohmann::json doc;
    if (std::string problem = readProfileFile(path, &doc); !problem.empty()) {
      std::cerr << "hotkernel profile: " << problem << "\n";
      status.code = kExitUsage;
      return;
    }
    try {
      profiles.push_back(parseRecordedProfile(doc, /*device=*/0));
    } catch (const std::exception& e) {
      std::cerr << "hotkernel profile: " << path << " " << userMessage(e) << "\n";
      status.code = kExitUsage;
      return;
    }
  }
  std::optional<RankBy> by;
  if (o.by == "calls") by = RankBy::Calls;
  if (o.by == "gpu-time") by = RankBy::GpuTime;
  ProfileView view;
  try {
    view = buildProfileView(profiles, by);
  } catch (const std::exception& e) {
    std::cerr << "hotkernel profile: " << userMessage(e) << "\n";
    status.code = kExitProblem;
    return;
  }
  const CacheLookup cache(o.dir);
  if (o.json) {
    printJson(o, view, cache);
  } else {
    printTable(o, view, cache);
  }
}

}  // namespace

void addProfileCommand(CLI::App& app, ExitStatus& status) {
  auto o = std::make_shared<ProfileOptions>();
  CLI::App* cmd = app.add_subcommand(
      "profile", "rank the ops of recorded profiles (HOTKERNEL_PROFILE) by GPU time or calls, and what is served");
  cmd->add_option("files", o->files, "profiles written by HOTKERNEL_PROFILE; several are merged")->required();
  cmd->add_flag("--json", o->json, "print one JSON object (format hotkernel-profile-view) instead of a table");
  cmd->add_option("--top", o->top, "show the first N ops (each with all its variants)")
      ->check(integerInRange(1, kMaxTop))
      ->capture_default_str();
  cmd->add_option("--by", o->by,
                  "rank by calls or gpu-time (default: gpu-time when every profile carries it, else calls)")
      ->check(CLI::IsMember({"calls", "gpu-time"}));
  addCacheDirOption(cmd, o->dir);
  cmd->callback([o, &status] { runProfile(*o, status); });
}

}  // namespace hotkernel::cli
