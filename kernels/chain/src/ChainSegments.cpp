#include "hotkernel/chain/ChainSegments.h"

#include <map>
#include <set>
#include <string>

#include "CallWrites.h"

namespace hotkernel::chain {

namespace {

// Calls [start, end) of `window` as a segment: its canonical pattern and build (build.reason says why not).
// False when the run returns nothing anyone reads (no build is tried).
bool tryRun(const ChainPattern& window, const std::map<int64_t, size_t>& lastRead, const std::set<int64_t>& live,
            size_t start, size_t end, const ChainBuildOptions& options, PatternSegment& seg) {
  std::vector<int64_t> segmentLive;
  for (size_t i = start; i < end; ++i) {
    for (int64_t out : window.calls[i].outputs) {
      auto read = lastRead.find(out);
      if (live.count(out) || (read != lastRead.end() && read->second >= end)) segmentLive.push_back(out);
    }
  }
  if (segmentLive.empty()) return false;  // computes nothing anyone reads
  seg = PatternSegment{};
  seg.first = start;
  seg.last = end;
  try {
    seg.pattern = canonicalPattern(std::vector<RecordedCall>(window.calls.begin() + static_cast<std::ptrdiff_t>(start),
                                                             window.calls.begin() + static_cast<std::ptrdiff_t>(end)),
                                   window.metas, segmentLive);
  } catch (const std::exception& e) {
    seg.build.reason = e.what();  // a value without metadata: buildChain would refuse it too
    return true;
  }
  seg.build = buildChain(seg.pattern.calls, seg.pattern.metas, seg.pattern.live, options);
  return true;
}

}  // namespace

std::vector<PatternSegment> segmentPattern(const ChainPattern& window, const ChainBuildOptions& options,
                                           size_t maxBuilds) {
  const size_t n = window.calls.size();
  // The last call reading each value: a value a segment returns and a later call reads is live for it.
  std::map<int64_t, size_t> lastRead;
  for (size_t i = 0; i < n; ++i) {
    for (const RecordedArg& a : window.calls[i].args) {
      for (int64_t id : a.tensorIds()) lastRead[id] = i;
    }
  }
  const std::set<int64_t> live(window.live.begin(), window.live.end());
  // A call that builds nothing on its own (an op, dtype or argument no chain takes) bounds every segment: the
  // search runs between such barriers (one build of one call each, outside maxBuilds).
  // An in-place call alone writes a segment input, which no chain does (Note [In-place steps]): its functional
  // op says whether it is a barrier.
  ChainPattern functional = window;
  for (RecordedCall& c : functional.calls) {
    const std::string f = detail::functionalOfInPlace(c.op);
    if (!f.empty()) c.op = f;
  }
  std::vector<bool> barrier(n, false);
  for (size_t i = 0; i < n; ++i) {
    PatternSegment alone;
    barrier[i] = tryRun(functional, lastRead, live, i, i + 1, options, alone) && !alone.build.ok();
  }
  std::vector<PatternSegment> segments;
  size_t builds = 0;
  size_t start = 0;
  while (start < n && builds < maxBuilds) {
    if (barrier[start]) {
      ++start;
      continue;
    }
    size_t stretch = start;  // the calls up to the next barrier
    while (stretch < n && !barrier[stretch]) ++stretch;
    bool found = false;
    for (size_t end = stretch; end >= start + 1 && builds < maxBuilds; --end) {
      PatternSegment seg;
      if (!tryRun(window, lastRead, live, start, end, options, seg)) continue;
      ++builds;
      if (seg.build.ok() && (end - start >= 2 || isLoneChain(seg.pattern.calls, seg.build))) {
        segments.push_back(std::move(seg));
        start = end;
        found = true;
        break;
      }
    }
    if (!found) ++start;
  }
  return segments;
}

}  // namespace hotkernel::chain
