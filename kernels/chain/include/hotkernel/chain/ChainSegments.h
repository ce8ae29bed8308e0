#pragma once
// The chains inside a window the builder refuses as a whole.
//
// Note [Segments of a refused window]
// A learning window ends at a command, not at a chain's natural end, so a
// hot window may hold several chains that share no [rows, cols] view: HF's
// apply_rotary_pos_emb runs its five calls on q and then on k, and under
// grouped-query attention k has fewer heads than q, so the window's ten calls
// are refused ("does not broadcast to the chain's [...]") while each half
// builds on its own. segmentPattern cuts such a window into consecutive
// segments, greedily from the left: from where the last segment ended, the
// longest run of at least two calls that builds is the next segment (or a
// lone call isLoneChain takes: Note [Lone normalizations]); when
// no run from there builds, that call is left to its original kernel and
// the search goes on from the next one. A segment's live values are those
// it returns that the window's live set holds or that a later call of the
// window reads (the engine flushes the segment's chain when that later call
// arrives, so the kernel must write them); a segment that returns nothing
// anyone reads is no chain. Each segment is renumbered canonically on its
// own (Note [Chain patterns]): a value of an earlier segment is an input.
// The engine matches and flushes segments like any learned chain: the
// first diverging call flushes one, and may start the next. A call that
// builds nothing on its own (an op, dtype or argument no chain takes) is a
// barrier no segment crosses: each call is first built alone (an in-place
// call as its functional op: alone, it writes an input, which no chain
// does; Note [In-place steps]), and the search runs between barriers. At most `maxBuilds` builds of runs are tried
// (each a buildChain of up to the window's calls, besides the one-call
// builds), so a window costs a bounded, one-time effort on the thread that
// ends it.

#include <cstddef>
#include <vector>

#include "hotkernel/chain/ChainBuilder.h"
#include "hotkernel/chain/ChainPattern.h"

namespace hotkernel::chain {

struct PatternSegment {
  size_t first = 0;  // the window's calls [first, last)
  size_t last = 0;
  ChainPattern pattern;  // canonical on its own
  ChainBuild build;      // ok(): built from pattern with pattern.live
};

// The buildable segments of `window` (a canonical pattern), in order; empty
// when none has two calls that build. Never throws for a bad recording.
std::vector<PatternSegment> segmentPattern(const ChainPattern& window, const ChainBuildOptions& options,
                                           size_t maxBuilds = 64);

}  // namespace hotkernel::chain
