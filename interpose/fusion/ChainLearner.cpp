#include "ChainLearner.h"

#include <algorithm>

#include "hotkernel/runtime/Logging.h"

namespace hotkernel::fusion {

bool ChainLearner::append(chain::RecordedCall call, const std::vector<at::Tensor>& outputs, bool inPlace) {
  call.outputs.clear();
  if (inPlace) {
    // Note [In-place steps in the table]: the result is the first argument, a value a call of the window returned;
    // on another tensor (an input, a view) the window ends.
    const bool onValue = outputs.size() == 1 && !call.args.empty() &&
                         call.args[0].kind == chain::RecordedArg::Kind::Tensor && outputs[0].defined();
    const int64_t id = onValue ? values_.addInPlace(outputs[0], call.args[0].value) : -1;
    if (id < 0) return false;
    call.outputs.push_back(id);
    calls_.push_back(std::move(call));
    return true;
  }
  for (const at::Tensor& out : outputs) {
    if (!out.defined() || values_.find(out) >= 0 || values_.aliasesAValue(out)) return false;
    call.outputs.push_back(values_.add(out, /*produced=*/true));
  }
  calls_.push_back(std::move(call));
  return true;
}

void ChainLearner::drop() {
  calls_.clear();
  values_.clear();
}

void ChainLearner::close(uint64_t window) {
  if (calls_.empty()) {
    values_.clear();
    return;
  }
  std::vector<int64_t> live;
  for (const chain::RecordedCall& c : calls_) {
    for (int64_t out : c.outputs) {
      if (values_.referencedElsewhere(out)) live.push_back(out);
    }
  }
  // The table numbers values in order of first appearance: the ids are canonical already.
  const uint64_t digest = chain::windowDigest(calls_, values_.metas(), live);
  auto it = patterns_.find(digest);
  if (it == patterns_.end()) {
    if (patterns_.size() >= kMaxPatterns) {
      drop();
      return;
    }
    it = patterns_.emplace(digest, PatternStats{}).first;
    it->second.calls = static_cast<int64_t>(calls_.size());
    ++news_;
  }
  PatternStats& stats = it->second;
  // Note [Learning a pattern that recurs]: not the sighting that makes it hot.
  if (stats.seen > 0 && stats.seen + 1 < hotCalls_ && !stats.reported && stats.refusal.empty() &&
      window > stats.lastWindow && window - stats.lastWindow <= kMaxHoldWindows) {
    learnUntil_ = std::max(learnUntil_, window + 2 * (window - stats.lastWindow));
  }
  stats.lastWindow = window;
  ++stats.seen;
  if (stats.reported || !stats.refusal.empty() || stats.seen < hotCalls_) {
    drop();
    return;
  }
  chain::ChainPattern pattern;
  try {
    pattern = chain::canonicalPattern(calls_, values_.metas(), live);
  } catch (const std::exception& e) {
    stats.refusal = e.what();
    ++news_;
    drop();
    return;
  }
  drop();
  ++news_;  // reported or refused below
  if (pattern.live.empty()) {
    stats.refusal = "no value of the window is read after it";
    return;
  }
  HotChain hot;
  hot.key = pattern.key();
  stats.key = hot.key;
  hot.build = chain::buildChain(pattern.calls, pattern.metas, pattern.live, chain::ChainBuildOptions{/*layouts=*/true});
  // A lone call is a chain only when it is a relayout copy or a normalization (Note [Lone normalizations]).
  if (pattern.calls.size() < 2 && !chain::isLoneChain(pattern.calls, hot.build)) {
    stats.refusal = "a single call: nothing to fuse";
    if (!hot.build.ok()) stats.refusal += " (no chain: " + hot.build.reason + ")";
    return;
  }
  if (!hot.build.ok()) {
    stats.refusal = hot.build.reason;
    HOTKERNEL_LOG(Debug) << "fusion: a hot window of " << pattern.calls.size()
                         << " calls is no chain: " << hot.build.reason << "\n" << pattern.text();
    // Note [Segments of a refused window]
    for (chain::PatternSegment& seg : chain::segmentPattern(pattern, chain::ChainBuildOptions{/*layouts=*/true})) {
      HotChain part;
      part.key = seg.pattern.key();
      part.pattern = std::move(seg.pattern);
      part.build = std::move(seg.build);
      stats.segments.push_back(part.key);
      HOTKERNEL_LOG(Debug) << "fusion: calls [" << seg.first << ", " << seg.last << ") of that window are a chain";
      if (onHot_) onHot_(part);
    }
    return;
  }
  stats.reported = true;
  hot.pattern = std::move(pattern);
  if (onHot_) onHot_(hot);
}

}  // namespace hotkernel::fusion
