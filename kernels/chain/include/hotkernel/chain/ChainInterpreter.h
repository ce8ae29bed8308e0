#pragma once
// The CPU reference interpreter of a ChainIR over float buffers.
//
// Note [Two evaluation modes]
// AtenOrder is the chain as eager ATen runs it: one op after the other, each
// op's arithmetic in float32 (Note [Chain op arithmetic]) and its result
// rounded to its dtype (Note [Round to nearest even]), because ATen writes
// every op's result to a tensor of that dtype and the next op reads it back.
// Fused is what a fused kernel computes (ChainCodegen.h): the same
// arithmetic, every intermediate kept in float32, rounded only where a cast
// to a 16-bit dtype asks for it (an explicit `.to(bfloat16)` is a value the
// model asked for; the kernel rounds there too) and where an output is
// stored, and it divides by a Row value as a multiplication by its reciprocal
// (Note [Division by a row value] in OpMath.h). Both modes take a Scalar
// operand as its float32 value and round pow's inner product as ATen does
// (the op's definition, Note [Chain dtypes]). For a float32 chain without a
// division by a Row value the two modes are the same computation. A row
// reduction sums in double in row order (a reference for any order ATen's
// tree takes), rounds the sum to float32 and, for mean, multiplies it by
// ATen's factor float(rows) / float(rows * cols); amax is NaN if any element
// is. The interpreter is deterministic: the same chain and inputs give the
// same bits, and each row's results depend on that row's inputs only.
//
// Note [Interpreter modes tolerance]
// On chains whose values stay bounded and away from the ops' singularities
// (what randomChain builds: Note [Random chains]), the two modes agree within
// |aten - fused| <= 2^-4 * (1 + |fused|) for chains with 16-bit nodes or a
// division by a Row value, and bit for bit for other float32 chains. The
// bound covers one rounding to bfloat16 (relative 2^-9) per op, amplified
// along a chain of up to a dozen ops whose operands stay within |v| <= 8;
// RandomChainTest checks it on random chains (docs/design/fusion.md has the
// margin). It is the agreement of the two modes, not a harness tolerance for
// a kernel against ATen.

#include <cstdint>
#include <vector>

#include "hotkernel/chain/ChainIR.h"
#include "hotkernel/chain/ChainLayout.h"

namespace hotkernel::chain {

enum class EvalMode { AtenOrder, Fused };

const char* evalModeName(EvalMode mode);  // "aten_order", "fused"

// Elements of a value of `shape` over [rows, cols]: rows * cols, cols, rows, rows, 1.
int64_t elementCount(ShapeClass shape, int64_t rows, int64_t cols);
// Elements of node `n`'s value (its own extent, Note [Chain column extents]).
int64_t elementCount(const Node& n, int64_t rows, int64_t cols);

// The chain over [rows, cols]: `inputs[k]` holds the values of ir.inputs()[k]
// (elementCount of its class, each a value of its dtype; a Scalar input one
// float32). Returns one buffer per output (ir.outputs() order), each value
// rounded to the output's dtype. Error (HOTKERNEL_CHECK) for an invalid
// chain, a wrong count of inputs or elements, or an input value its dtype
// cannot hold.
std::vector<std::vector<float>> interpretChain(const ChainIR& ir, int64_t rows, int64_t cols,
                                               const std::vector<std::vector<float>>& inputs, EvalMode mode);

// The same in a variant's `layout` (Note [Chain layouts]): a Full input's
// buffer is its memory, layoutSpan elements with element (row, c) at
// layoutRowOffset(row) + c / layoutColRepeat * layoutColStride (the contiguous layout's is its [rows, extent]
// values, as above); the other classes' buffers are as above. Values have
// their own column extents (Note [Chain column extents]; a width-fixed
// chain's cols must be its width) and a Cat takes each element from the
// part that holds its column. Outputs are returned as values, [rows,
// extent] row-major for Full ones, whatever their layout.
std::vector<std::vector<float>> interpretChain(const ChainIR& ir, int64_t rows, int64_t cols, const ChainLayout& layout,
                                               const std::vector<std::vector<float>>& inputs, EvalMode mode);

}  // namespace hotkernel::chain
