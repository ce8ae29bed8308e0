#pragma once
// The identity of a chain: a canonical text and its SHA-256.
//
// Note [Chain key]
// The canonical text lists the nodes that the outputs reach in a depth-first
// post-order from the outputs (in output order, operands in operand order),
// numbered in that order, one line each: the op, the result dtype and shape
// class, the operands by canonical number, the inputs by their input index
// (their argument position), scalars in C's exact hexadecimal form (%a),
// alpha only when it is not 1, keepdim for reductions, a column extent only
// when it is explicit (Note [Chain column extents]: a width-free chain's
// text is the same as before extents existed, so its key is stable; a cat
// lists its parts in order). Two chains with the
// same inputs, outputs and dataflow have the same text whatever the order in
// which their intermediate nodes were recorded (a constant made first or
// last, two independent branches in either order); anything that changes the
// computation or the kernel's arguments (an op, a dtype, a scalar's bits,
// the order of inputs or outputs, an operand order) changes it. Operand
// order is kept even for commutative ops: `a * b` and `b * a` differ in
// rounding nowhere, but they are different recordings and the key does not
// guess. The key is the SHA-256 of the text, lowercase hex.

#include <string>

#include "hotkernel/chain/ChainIR.h"

namespace hotkernel::chain {

struct ChainKey {
  std::string text;    // the canonical text, lines ending in '\n'
  std::string sha256;  // SHA-256 of `text`, lowercase hex
};

// Error (via validate()) for an invalid chain.
ChainKey chainKey(const ChainIR& ir);

// The chain renumbered in the canonical order of its key: the same inputs
// (in the same order), outputs and dataflow; chainKey(canonicalChain(ir))
// equals chainKey(ir), and two chains with equal keys have equal canonical chains.
ChainIR canonicalChain(const ChainIR& ir);

}  // namespace hotkernel::chain
