#pragma once
// What a fused chain's cache entry stores in its `params` field, written by
// the optimizer and read back before a plan is made. No cache or torch
// headers: the caller moves the text in and out of cache::Entry::params.
//
// Note [Chain entry params, v2]
// A cache entry of op "hotkernel::chain" (Note [Chain variant string]) holds
// in its `params` JSON:
// {
//   "format": "hotkernel-chain-entry", "version": 2,
//   "chain": { ... },                  // the chain, Note [Chain JSON, v2]
//   "chainSha256": "<64 hex>",          // chainKey(chain).sha256, as in the variant string
//   "rows": R, "cols": C,               // the variant's extents
//   "layout": {"rowDims": [...], "strides": [[...], ...]},  // only for a variant with a layout; with
//             "colStrides": [...] for a transposed one, "colRepeats": [...] for a repeated one
//             (layoutToJson: a reader from before either key refuses the entry)
//   "kernel": {"threads": 256, "vec": 8, "rowsPerCta": 1, "items": 0,
//              "rounding": "aten",       // optional, "fused" when absent (Note [ATen rounding in a fused kernel])
//              "fold": true,             // optional, false when absent (Note [Folded segments])
//              "cluster": 8},            // optional, 1 when absent (Note [Rows split over a cluster]; a reader
//                                        // from before the key refuses the entry)
//   "sourceSha256": "<64 hex>"          // SHA-256 of generateChainSource(chain, kernel, layout)
// }
// "kernel" and "sourceSha256" are present exactly in a kernel entry; a
// keep_aten entry stores the rest, so `hotkernel cache show` names its chain
// too. readChainEntry refuses, naming the field: another format or version,
// a missing or extra key, a chain that does not parse (its strict reader),
// a "chainSha256" that is not the stored chain's key, a chain, rows, cols or
// layout other than the requested variant's (a key collision or an edited entry),
// kernel parameters outside the generator's ranges or not serving the
// variant (chainVariantProblem), and a "sourceSha256" other than the source
// this build generates from them (a generator that changed since the entry
// was written). "fold" came after version 2 was first written without a
// version step: only a folded kernel writes it, and a reader from before it
// refuses such an entry as an unknown key (its variant runs ATen and is tuned
// again), which is what a version step would do. So did "items" above 0 for
// an elementwise chain (Note [Unrolled elementwise chains]): a reader from
// before it refuses such parameters as outside the generator's ranges, with
// the same outcome. Version 1 is the same
// without "layout" (before layouts):
// the reader reads it as the contiguous layout; the writer writes 2. A later
// version changes "version".

// Note [Chain entry params, v1]
// The params before layouts: Note [Chain entry params, v2] without a
// "layout" key, the chain as Note [Chain JSON, v1] or v2 writes it; read as
// an entry of a contiguous variant.

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "hotkernel/chain/ChainCodegen.h"
#include "hotkernel/chain/ChainVariant.h"

namespace hotkernel::chain {

inline constexpr const char* kChainEntryFormat = "hotkernel-chain-entry";
inline constexpr int kChainEntryVersion = 2;
inline constexpr int kChainEntryOldestVersion = 1;

// {"threads", "vec", "rowsPerCta", "items"}, and its strict reader (Error
// naming the field; the ranges are checkChainKernel's).
nlohmann::json chainParamsToJson(const ChainKernelParams& p);
ChainKernelParams chainParamsFromJson(const nlohmann::json& j, const std::string& where);

// The entry's params for `v`: with `kernel`, a kernel entry's; without, a
// keep_aten entry's (Note [Chain entry params, v2]). Error for an invalid
// chain, or kernel parameters that do not serve the variant.
nlohmann::json chainEntryParams(const ChainVariant& v, const std::optional<ChainKernelParams>& kernel);

// An entry's params read back for the requested variant `v`: its kernel
// parameters, or nullopt for a keep_aten entry. Error (the reason) for any
// refusal listed in Note [Chain entry params, v2].
std::optional<ChainKernelParams> readChainEntry(const std::string& paramsText, const ChainVariant& v);

}  // namespace hotkernel::chain
