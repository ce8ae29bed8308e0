#include "hotkernel/chain/ChainSegments.h"

#include <map>
#include <set>
#include <string>

namespace hotkernel::chain {

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
  std::vector<PatternSegment> segments;
  size_t builds = 0;
  size_t start = 0;
  while (start + 1 <= n && builds < maxBuilds) {
    bool found = false;
    for (size_t end = n; end >= start + 1 && builds < maxBuilds; --end) {
      std::vector<int64_t> segmentLive;
      for (size_t i = start; i < end; ++i) {
        for (int64_t out : window.calls[i].outputs) {
          auto read = lastRead.find(out);
          if (live.count(out) || (read != lastRead.end() && read->second >= end)) segmentLive.push_back(out);
        }
      }
      if (segmentLive.empty()) continue;  // computes nothing anyone reads
      PatternSegment seg;
      seg.first = start;
      seg.last = end;
      try {
        seg.pattern = canonicalPattern(
            std::vector<RecordedCall>(window.calls.begin() + static_cast<std::ptrdiff_t>(start),
                                      window.calls.begin() + static_cast<std::ptrdiff_t>(end)),
            window.metas, segmentLive);
      } catch (const std::exception&) {
        continue;  // a value without metadata: buildChain would refuse it too
      }
      ++builds;
      seg.build = buildChain(seg.pattern.calls, seg.pattern.metas, seg.pattern.live, options);
      if (seg.build.ok() && (end - start >= 2 || isRelayoutCopy(seg.build))) {
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
