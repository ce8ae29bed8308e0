#pragma once
// A chain variant tuned into a validated, timed fused kernel, or the
// decision to keep running it unfused; its cache entry.
//
// Note [Chain tuning]
// tuneChain tunes one chain variant (Note [Chain variant string]) as the
// families tune theirs, over the small grid of Note [Chain parameter space]
// instead of the tiered search: every point (up to
// options.searchEvaluations, in the space's order) is compiled by NVRTC in
// parallel (TBB), loaded as the ChainPlan its cache entry would make (the
// entry's params written and read back: Note [Chain entry params, v1]), and
// passed through the five stages of Note [Chain harness]; each that passes is
// timed against the chain run by ATen op by op (benchmarkInterleaved: CUDA
// events, L2 flushed, interleaved pairs, the paired speed-up's median and 95%
// CI) with 9 pairs, its calls rotating over two inputs and its first and last
// timed outputs checked against ATen (as Note [Timed outputs are checked]
// does for the families); the three fastest are timed again with
// options.pairs, and the fastest of those is accepted when its speed-up CI
// clears options.minSpeedup. When no point passes the harness and the chain
// computes a 16-bit value, the same points are tried again rounding every
// such value as ATen does (Note [ATen rounding in a fused kernel]); with
// options.chainEagerRounding only such points are tried (Note [Eager rounding
// on request] in hotkernel/chain/ChainParameterSpace.h). A
// candidate whose launch fails while timed is
// dropped. The yield point runs between bounded units of work (a harness
// launch, a benchmark pair); when it says stop, tuneChain throws Error
// "tuning interrupted" and nothing is stored. With options.clock, no new
// candidate starts once the target's budget is spent. The variant's rows are
// tuned whole (a plan serves exactly its rows): a variant whose harness and
// timing buffers exceed options.memoryCapBytes is refused with an Error. A
// variant with a layout is compiled with it and harnessed and timed on memory
// laid out as its calls had it, ATen on the same memory's views (Note [Chain
// values in a layout]).

#include <string>

#include "hotkernel/cache/Entry.h"
#include "hotkernel/chain/ChainVariant.h"
#include "hotkernel/optimizer/TunerOptions.h"
#include "hotkernel/runtime/DeviceFingerprints.h"

namespace hotkernel {

// Tunes `v` on v.device (Note [Chain tuning]). The outcome's family is
// "chain", its paramsJson the kernel entry's params, its kernel "hk_chain";
// its metrics hold one record per candidate. Error when NVRTC is missing, no
// point serves the variant, the memory cap is too small, or tuning was
// interrupted.
TuneOutcome tuneChain(const chain::ChainVariant& v, const TunerOptions& options = {});

// The cache entry of `out` for `v` under the fingerprint of v.device (Note
// [A fingerprint per device]): op "hotkernel::chain", the variant string,
// family "chain"; a kernel entry when accepted, else keep_aten with the
// chain's params (no kernel). Written with CacheStore::put; its experiment
// lines are tuneExperiments(fingerprint, op, variant, out).
cache::Entry chainResultEntry(const DeviceFingerprints& fingerprints, const chain::ChainVariant& v,
                              const TuneOutcome& out);

}  // namespace hotkernel
