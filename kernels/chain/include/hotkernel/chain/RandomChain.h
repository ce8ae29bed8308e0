#pragma once
// Seeded random chains and inputs: for the interpreter's and the generator's
// tests now, for the fuzz suite of the deferral engine later.
//
// Note [Random chains]
// randomChain(seed) builds a valid chain from the whole vocabulary (every
// unary op, pow with its special exponents, the binary ops with tensors,
// constants and scalar arguments, alpha, casts between the three dtypes, sum,
// mean and amax with and without keepdim, Full / Column / Row inputs). It
// tracks an interval for every value, assuming tensor inputs in [-2, 2] and
// scalar arguments in [1/2, 2] (what randomChainInputs draws), and picks only
// ops that keep every value within |v| <= 8 and away from singularities:
// log, sqrt, rsqrt, reciprocal, negative and fractional powers and divisors
// on values >= 1/4 (or <= -1/4 for divisors), exp on values <= 2; a sum
// only of values >= 0 (rows of at most maxCols), which keeps their relative
// error and may exceed 8 (then only ops whose result fits read it). So the
// chain's results are finite and the two evaluation modes stay close (Note
// [Interpreter modes tolerance]).
// With catWidth > 0 the chain is width-fixed (Note [Chain column extents]):
// every full and column input has that extent, and a step may join two or
// three narrower parts (new inputs, some negated, some themselves a cat of
// two) into a cat of the chain's width, cut at multiples of 8 columns.
// randomChainLayout draws a layout for a chain (Note [Chain layouts]): each
// full input broadcast over some row dims (stride 0) and laid out in a
// random dim order with padded rows, each output in a random dim order with
// padded rows (never overlapping); strides stay multiples of 8 elements.
// The same seed and options give the same chain on every platform (splitmix64,
// no std distributions).

#include <cstdint>
#include <vector>

#include "hotkernel/chain/ChainIR.h"
#include "hotkernel/chain/ChainLayout.h"

namespace hotkernel::chain {

struct RandomChainOptions {
  int maxOps = 10;           // computed nodes, at least 1
  int maxInputs = 3;         // tensor and scalar inputs together, at least 1
  bool reductions = true;    // sum, mean, amax
  int64_t maxCols = 64;      // the longest row the chain's sums are bounded for
  int64_t catWidth = 0;      // > 0 (a multiple of 8, >= 16): a width-fixed chain with cats
};

ChainIR randomChain(uint64_t seed, const RandomChainOptions& options = {});

// Values for each input of `ir` over [rows, cols] (elementCount of its node:
// a cat's narrower part holds rows times its own extent):
// tensors uniform in [-2, 2] rounded to their dtype, scalar arguments in [1/2, 2].
std::vector<std::vector<float>> randomChainInputs(const ChainIR& ir, int64_t rows, int64_t cols, uint64_t seed);

// A random normalized layout of `ir` over the row dims `rowDims` (their
// product the variant's rows) and `cols`; the full inputs' and outputs'
// extents must be multiples of 8.
ChainLayout randomChainLayout(const ChainIR& ir, const std::vector<int64_t>& rowDims, int64_t cols, uint64_t seed);

// Inputs as randomChainInputs draws them, a full input's buffer holding its
// memory in `layout` (layoutSpan elements; what lies between its rows is
// drawn too).
std::vector<std::vector<float>> randomChainInputs(const ChainIR& ir, int64_t rows, int64_t cols,
                                                  const ChainLayout& layout, uint64_t seed);

}  // namespace hotkernel::chain
