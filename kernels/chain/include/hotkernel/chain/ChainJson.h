#pragma once
// A chain as JSON, for the cache, the recorder's profile and agents.
//
// Note [Chain JSON, v2]
// {
//   "format": "hotkernel-chain", "version": 2,
//   "nodes": [                          // in order; a node's operands are earlier nodes
//     {"op": "input", "dtype": "bfloat16", "shape": "full"},
//     {"op": "input", "dtype": "bfloat16", "shape": "full", "cols": 64},   // an explicit extent
//     {"op": "cat", "dtype": "bfloat16", "shape": "full", "inputs": [5, 1], "cols": 128},
//     {"op": "constant", "dtype": "float32", "shape": "scalar", "value": 1e-06},
//     {"op": "pow", "dtype": "float32", "shape": "full", "inputs": [2], "exponent": 2.0},
//     {"op": "add", "dtype": "float32", "shape": "row", "inputs": [4, 1], "alpha": 1.0},
//     {"op": "mean", "dtype": "float32", "shape": "row", "inputs": [3], "keepdim": true, "dim": -1},
//     ...
//   ],
//   "outputs": [10]                     // node indices, in the kernel's output order
// }
// Every node has "op" (ChainTypes' names), "dtype" (float32, float16,
// bfloat16) and "shape" (full, column, row, row_flat, scalar); "inputs" for
// every op that is not a leaf; "value" for a constant, "exponent" for pow, "slope" for leaky_relu,
// "alpha" for add and sub, "keepdim" and "dim" for sum, mean and amax,
// "cols" (an integer >= 1) for a full or column value of a width-fixed chain
// (Note [Chain column extents]), absent for extent 0; no other key. Dtypes and shapes are stated, not inferred: the reader re-infers
// them (ChainIR::validate) and refuses a chain whose stated types are not
// ATen's. Any missing or extra key, wrong type, unknown name, out-of-range
// index or invalid chain is an Error naming the field (Note [Strict JSON
// fields]). Version 1 is the same without "cols" and "cat" (before column
// extents): this reader reads it (every extent 0); the writer writes 2. A
// later version changes "version"; a reader refuses versions it does not
// know.

// Note [Chain JSON, v1]
// The form before column extents: Note [Chain JSON, v2] without "cols" keys
// and without "cat" nodes (every extent 0). chainFromJson still reads it.

#include <string>

#include <nlohmann/json.hpp>

#include "hotkernel/chain/ChainIR.h"

namespace hotkernel::chain {

inline constexpr const char* kChainJsonFormat = "hotkernel-chain";
inline constexpr int kChainJsonVersion = 2;
// The oldest version chainFromJson reads.
inline constexpr int kChainJsonOldestVersion = 1;

// Error for an invalid chain (validate()).
nlohmann::json chainToJson(const ChainIR& ir);
ChainIR chainFromJson(const nlohmann::json& j);
// `text` parsed (jsonfield::parse) and read by chainFromJson.
ChainIR chainFromJsonText(const std::string& text);

}  // namespace hotkernel::chain
