#pragma once
// The ranked view of recorded profiles that `hotkernel profile` prints: ops
// and their variants by GPU time (when the profiles carry it: Note [GPU time
// in the profile] in Recorder.h) or by calls, each with its share of the
// total and whether a family of this build serves it. No torch, no cache:
// the command adds what the cache holds (ProfileCommand.cpp).
//
// Note [Merging profiles for the view]
// Several profiles (one per worker) are merged by name: an op's, and a
// variant's (op and variant string), estimated calls and estimated GPU time
// add up, and the GPU-time total is the sum of each profile's kernel time.
// GPU time ranks only when every profile carries it, unless asked for
// (RankBy::GpuTime): then the profiles without it add no time, and a note
// says how many carried it. Deferred calls add up like calls. An op counts at least the sum of its variants
// (they are some of its calls), so a variant whose op is missing from "ops"
// gets an op row that carries it.

#include <optional>
#include <string>
#include <vector>

#include "hotkernel/optimizer/ProfileDocument.h"

namespace hotkernel::cli {

enum class RankBy { Calls, GpuTime };

struct ViewVariant {
  std::string op;       // the served op, overload included
  VariantKey key;
  std::string variant;  // the cache's variant string
  std::string family;   // the family of this build that serves it; "" when none does
  double estimatedCalls = 0;
  // Of estimatedCalls, those the fusion engine deferred into chains (Note [Deferred calls in the recorder] in
  // runtime/DeferredCalls.h): their work ran inside fused kernels.
  double estimatedDeferredCalls = 0;
  std::optional<double> estimatedGpuNs;  // with GPU time
  double share = 0;                      // of the total, in [0, 1]
};

struct ViewOp {
  std::string op;  // as RecordFunction names it
  bool served = false;  // a family of this build serves some overload of it
  // The HOTKERNEL_OPS names that turn a served op on when HOTKERNEL_OPS' default serves no overload of it
  // ("native_group_norm"); "" for an op served by default or not served at all (Note [Opt-in ops in the view]).
  std::string optIn;
  double estimatedCalls = 0;
  double estimatedDeferredCalls = 0;  // as ViewVariant's
  std::optional<double> estimatedGpuNs;
  double share = 0;
  std::vector<ViewVariant> variants;  // ranked like the ops
};

struct ProfileView {
  RankBy by = RankBy::Calls;
  int profiles = 0;
  int profilesWithGpuTime = 0;
  double totalCalls = 0;     // every op's estimated calls
  double totalGpuNs = 0;     // the profiles' kernel time (RankBy::GpuTime)
  double servedShare = 0;    // of the ops a family serves
  bool anyDeferred = false;  // some op's calls were deferred into fused chains
  std::vector<ViewOp> ops;   // ranked, all of them
  std::vector<std::string> notes;  // what the reader should know (dropped records, backed off, ...)
};

// `by`: nullopt picks GPU time when every profile carries it, else calls.
// Throws Error for RankBy::GpuTime when no profile carries GPU time.
ProfileView buildProfileView(const std::vector<RecordedProfile>& profiles, std::optional<RankBy> by);

// Note [Opt-in ops in the view]
// A family of this build serving an op does not make a process serve it: the op must be in HOTKERNEL_OPS, whose
// default (kDefaultServedOps) leaves the newer families out. The view names, for a served op that no default
// entry covers, the entries that turn it on, so that a user profiling a model sees what to add (the recording
// process's own HOTKERNEL_OPS is not in the profile: the view speaks of the default).
// The HOTKERNEL_OPS entries (without "aten::") of this build's families for the op RecordFunction names
// `name`, and whether the default names any of them.
struct OpEntries {
  std::vector<std::string> entries;
  bool inDefault = false;
};
OpEntries servedOpEntries(const std::string& name);

// "base" name of an overload-qualified op: "aten::sum.dim_IntList" -> "aten::sum".
std::string recordedOpName(const std::string& op);

}  // namespace hotkernel::cli
