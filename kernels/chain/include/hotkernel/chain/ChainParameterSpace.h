#pragma once
// The kernel parameter points a chain variant is tuned over.
//
// Note [Chain parameter space]
// The points are (threads, vec, rowsPerCta, items) as the norm families
// choose them, every one legal for the variant (checkChainKernel and an
// empty chainVariantProblem):
//  - vec: the widest access of the narrowest Full or Column tensor is 16
//    bytes (8 elements of a 16-bit dtype, 4 of float32); that width and half
//    of it, each only when it divides cols, every row stride of the layout,
//    every input's own extent and every Cat boundary; 1 when neither does.
//  - elementwise chains (no reduction): 128, 256, 512 and 1024 threads,
//    rowsPerCta 1, items 0 (the grid strides over the elements, one vector
//    a thread a step); at the widest vec also 128 and 256 threads at items 2
//    and 4 (that many vectors a thread a step: Note [Unrolled elementwise
//    chains] in ChainCodegen.cpp), of a chain with Cat segments only folded;
//    each point folded too where the Cats cut equal segments (Note [Folded
//    segments]).
//  - row chains: one row a CTA with 64 to 1024 threads, up to the first
//    power of two not below the row's vectors; several rows a CTA (8, 16 or
//    32 threads a row, 128 or 256 a CTA) where such a row holds at most 8
//    vectors a thread; each with items 0 (streaming) and, when the row fits
//    16 vectors a thread, the fewest items that hold it. A variant of fewer
//    than 264 rows of at least 1,024 vectors also takes, at the widest vec,
//    each row split over a cluster of 2, 4 or 8 CTAs of 512 or 1024 threads,
//    streamed or (512 threads) with the fewest items that hold the CTA's
//    slice where that is at most 32 elements a thread (more, or 1024
//    threads, spill: Note [Rows split over a cluster] in ChainCodegen.cpp).
//  - a transposed copy (Note [Transposed copies]): at vec 2 (where it
//    divides the strides, cols and the innermost row dim) and 1, tiles of 64
//    and 32 a side, each with 256, 512, 128 and 1024 threads where each
//    thread holds at least two vectors of the tile (one leaves a single load
//    in flight), items 0, before anything else (the elementwise points serve
//    no transposed layout).
// The order is the search's seeds' order: the widest vec first, then
// threads ascending. Empty when no point serves the variant (rows or cols
// below 1, a chain of more than 18 inputs and outputs, too many rows for the
// grid, a chain with reductions and a Cat): the variant is then run unfused.

#include <cstdint>
#include <string>
#include <vector>

#include "hotkernel/chain/ChainCodegen.h"

namespace hotkernel::chain {

// Whether NVRTC's `arch` ("sm_90a", "sm_80") has thread-block clusters (sm_90
// and later): a tuner on an older GPU leaves the cluster points out (Note [Rows
// split over a cluster] in ChainRowCodegen.cpp).
bool chainArchHasClusters(const std::string& arch);

// The widest vec of `ir` (Note [Chain parameter space]): 16 bytes of its
// narrowest Full or Column tensor value; 4 when it has none.
int chainWidestVec(const ChainIR& ir);

// Every point of the space for [rows, cols] (Note [Chain parameter space]),
// without duplicates. Error for an invalid chain.
std::vector<ChainKernelParams> chainParameterSpace(const ChainIR& ir, int64_t rows, int64_t cols,
                                                   const ChainLayout& layout = {});

// Note [Eager rounding on request]
// A fused kernel keeps its intermediates in float32 (Note [ATen rounding in a
// fused kernel]): closer to float64 than eager, and so not eager's bits,
// which a greedy decode may turn into another token where two logits nearly
// tie. A process that asks for eager's rounding (HOTKERNEL_FUSION_ROUNDING=
// eager) tunes every chain that computes a 16-bit value on atenRounding points
// only: each such value rounded as eager stores it, at a few instructions a
// value and no memory traffic; a reduction still sums in its own order, so a
// chain with one stays within its tolerance of eager rather than bitwise. Its
// process serves a cached kernel entry only when the entry rounds so; another
// (tuned by a process of the default rounding) is tuned again and replaced.
// A process of the default rounding serves both kinds: its tuner falls back to
// atenRounding points itself when no fused one passes the harness.

// The points tuneChain tries first (Note [Chain tuning]): the first `count` of
// `space`, each with atenRounding when `eagerRounding` and that changes the
// chain's kernel (atenRoundingApplies; Note [Eager rounding on request]).
std::vector<ChainKernelParams> firstChainPoints(const std::vector<ChainKernelParams>& space, size_t count,
                                                const ChainIR& ir, bool eagerRounding);

// Whether a kernel at `p` rounds as a process of `eagerRounding` serves
// (Note [Eager rounding on request]): any point without it; with it, an
// atenRounding point, or any point of a chain that computes no 16-bit value.
bool chainParamsRoundAsAsked(const ChainIR& ir, const ChainKernelParams& p, bool eagerRounding);

}  // namespace hotkernel::chain
