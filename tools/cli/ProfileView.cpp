#include "ProfileView.h"

#include <algorithm>
#include <map>
#include <set>
#include <sstream>

#include "hotkernel/kernels/FamilyDescriptor.h"
#include "hotkernel/kernels/VariantOptions.h"
#include "hotkernel/runtime/Check.h"
#include "hotkernel/runtime/Config.h"

namespace hotkernel::cli {
namespace {

// The base names of the ops this build's families serve ("aten::_softmax", "aten::sum").
const std::set<std::string>& servedBaseNames() {
  static const std::set<std::string> names = [] {
    std::set<std::string> out;
    for (const kernels::FamilyDescriptor* f : kernels::allFamilies()) out.insert(recordedOpName(f->atenOp));
    return out;
  }();
  return names;
}

std::vector<std::string> defaultEntries() {
  std::vector<std::string> out;
  std::stringstream ss(kDefaultServedOps);
  for (std::string entry; std::getline(ss, entry, ',');) {
    if (!entry.empty()) out.push_back(entry);
  }
  return out;
}

std::string optInOf(const std::string& name) {
  const OpEntries e = servedOpEntries(name);
  if (e.inDefault) return "";
  std::string out;
  for (const std::string& entry : e.entries) out += (out.empty() ? "" : ",") + entry;
  return out;
}

std::string familyServing(const std::string& op, const VariantKey& key) {
  const kernels::FamilyDescriptor* f = kernels::familyForOp(op);
  return f != nullptr && f->servesKey(key) ? f->name : "";
}

double metricOf(RankBy by, double calls, const std::optional<double>& gpuNs) {
  return by == RankBy::GpuTime ? gpuNs.value_or(0.0) : calls;
}

template <typename Row>
void rank(std::vector<Row>& rows, RankBy by) {
  std::stable_sort(rows.begin(), rows.end(), [by](const Row& a, const Row& b) {
    const double x = metricOf(by, a.estimatedCalls, a.estimatedGpuNs);
    const double y = metricOf(by, b.estimatedCalls, b.estimatedGpuNs);
    return x != y ? x > y : a.op < b.op;
  });
}

void addGpu(std::optional<double>& into, const std::optional<RecordedGpuTime>& gpu) {
  if (gpu) into = into.value_or(0.0) + gpu->estimatedNs;
}

std::string countText(int64_t n, const char* what) { return std::to_string(n) + " " + what; }

}  // namespace

std::string recordedOpName(const std::string& op) {
  const size_t dot = op.find('.', op.rfind("::") == std::string::npos ? 0 : op.rfind("::") + 2);
  return dot == std::string::npos ? op : op.substr(0, dot);
}

ProfileView buildProfileView(const std::vector<RecordedProfile>& profiles, std::optional<RankBy> by) {
  ProfileView view;
  view.profiles = static_cast<int>(profiles.size());
  for (const RecordedProfile& p : profiles) {
    if (p.hasGpuTime()) {
      ++view.profilesWithGpuTime;
      view.totalGpuNs += static_cast<double>(p.gpuTime->kernelNs);
      if (p.gpuTime->droppedRecords > 0) {
        view.notes.push_back("CUPTI dropped " + countText(p.gpuTime->droppedRecords, "records") +
                             ": GPU time is undercounted");
      }
      if (!p.gpuTime->takenOver.empty()) view.notes.push_back(p.gpuTime->takenOver);
    } else if (p.gpuTime) {
      view.notes.push_back("GPU time was asked for (HOTKERNEL_CUPTI=1) but not recorded: " + p.gpuTime->state +
                           (p.gpuTime->detail.empty() ? "" : " (" + p.gpuTime->detail + ")"));
    }
  }
  if (by == RankBy::GpuTime && view.profilesWithGpuTime == 0) {
    HOTKERNEL_THROW("no profile carries GPU time (record with HOTKERNEL_CUPTI=1); rank by calls instead");
  }
  view.by = by.value_or(view.profilesWithGpuTime == view.profiles && view.profiles > 0 ? RankBy::GpuTime
                                                                                       : RankBy::Calls);
  if (view.by == RankBy::GpuTime && view.profilesWithGpuTime < view.profiles) {
    view.notes.push_back(std::to_string(view.profilesWithGpuTime) + " of " + std::to_string(view.profiles) +
                         " profiles carry GPU time: the others add none");
  } else if (view.by == RankBy::Calls && view.profilesWithGpuTime > 0 && view.profilesWithGpuTime < view.profiles) {
    view.notes.push_back(std::to_string(view.profilesWithGpuTime) + " of " + std::to_string(view.profiles) +
                         " profiles carry GPU time: ranked by calls (--by gpu-time to rank by it)");
  }
  const bool gpu = view.by == RankBy::GpuTime;

  // Note [Merging profiles for the view]
  std::map<std::string, size_t> opIndex;
  auto opRow = [&view, &opIndex](const std::string& name) -> ViewOp& {
    auto [it, added] = opIndex.try_emplace(name, view.ops.size());
    if (added) {
      ViewOp op;
      op.op = name;
      op.served = servedBaseNames().count(name) > 0;
      if (op.served) op.optIn = optInOf(name);
      view.ops.push_back(std::move(op));
    }
    return view.ops[it->second];
  };
  std::map<std::pair<std::string, std::string>, std::pair<size_t, size_t>> variantIndex;  // -> (op, variant)
  for (const RecordedProfile& p : profiles) {
    const bool withGpu = gpu && p.hasGpuTime();
    for (const RecordedOp& o : p.ops) {
      ViewOp& row = opRow(o.op);
      row.estimatedCalls += o.estimatedCalls;
      row.estimatedDeferredCalls += o.estimatedDeferredCalls;
      if (withGpu) addGpu(row.estimatedGpuNs, o.gpu);
    }
    for (const RecordedVariant& v : p.variants) {
      const std::string variant = kernels::variantString(v.key);
      ViewOp& parent = opRow(recordedOpName(v.op));
      const size_t opAt = opIndex.at(parent.op);
      auto [it, added] = variantIndex.try_emplace({v.op, variant}, std::make_pair(opAt, parent.variants.size()));
      if (added) {
        ViewVariant row;
        row.op = v.op;
        row.key = v.key;
        row.variant = variant;
        row.family = familyServing(v.op, v.key);
        parent.variants.push_back(std::move(row));
      }
      ViewVariant& row = view.ops[it->second.first].variants[it->second.second];
      row.estimatedCalls += v.estimatedCalls;
      row.estimatedDeferredCalls += v.estimatedDeferredCalls;
      if (withGpu) addGpu(row.estimatedGpuNs, v.gpu);
    }
  }
  // An op counts at least what its variants count (they are some of its calls; a profile whose "ops" lacks
  // the op gives it only them).
  view.totalCalls = 0;
  for (ViewOp& op : view.ops) {
    double calls = 0, deferred = 0;
    std::optional<double> gpuNs;
    for (const ViewVariant& v : op.variants) {
      calls += v.estimatedCalls;
      deferred += v.estimatedDeferredCalls;
      if (v.estimatedGpuNs) gpuNs = gpuNs.value_or(0.0) + *v.estimatedGpuNs;
    }
    op.estimatedCalls = std::max(op.estimatedCalls, calls);
    op.estimatedDeferredCalls = std::max(op.estimatedDeferredCalls, deferred);
    view.anyDeferred = view.anyDeferred || op.estimatedDeferredCalls > 0;
    if (gpuNs) op.estimatedGpuNs = std::max(op.estimatedGpuNs.value_or(0.0), *gpuNs);
    view.totalCalls += op.estimatedCalls;
  }
  const double total = gpu ? view.totalGpuNs : view.totalCalls;
  for (ViewOp& op : view.ops) {
    if (gpu && !op.estimatedGpuNs) op.estimatedGpuNs = 0.0;
    op.share = total > 0 ? std::min(1.0, metricOf(view.by, op.estimatedCalls, op.estimatedGpuNs) / total) : 0.0;
    if (op.served) view.servedShare += op.share;
    for (ViewVariant& v : op.variants) {
      if (gpu && !v.estimatedGpuNs) v.estimatedGpuNs = 0.0;
      v.share = total > 0 ? std::min(1.0, metricOf(view.by, v.estimatedCalls, v.estimatedGpuNs) / total) : 0.0;
    }
    rank(op.variants, view.by);
  }
  view.servedShare = std::min(1.0, view.servedShare);
  rank(view.ops, view.by);
  return view;
}

OpEntries servedOpEntries(const std::string& name) {
  static const std::vector<std::string> defaults = defaultEntries();
  OpEntries out;
  for (const kernels::FamilyDescriptor* f : kernels::allFamilies()) {
    if (recordedOpName(f->atenOp) != name) continue;
    std::string entry = f->atenOp;
    if (entry.rfind("aten::", 0) == 0) entry.erase(0, 6);
    if (std::find(out.entries.begin(), out.entries.end(), entry) != out.entries.end()) continue;
    out.entries.push_back(entry);
    out.inDefault |= std::find(defaults.begin(), defaults.end(), entry) != defaults.end();
  }
  return out;
}

}  // namespace hotkernel::cli
