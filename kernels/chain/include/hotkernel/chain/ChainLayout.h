#pragma once
// Where a chain variant's tensor values lie in memory: the row space and
// each tensor argument's row strides.
//
// Note [Chain layouts]
// A chain's logical view is [rows, cols] (Note [Chain shape classes]); its
// layout says where each row of each tensor argument is. The row space is
// `rowDims`, the leading dims of the chain's widest tensor (outer to inner,
// their product is rows; the last dim is the columns, stride 1). Each tensor
// argument of the kernel (the chain's tensor inputs in input order, then its
// outputs: chainTensorArgs) has one row stride per row dim, in elements:
// element (row, c) of argument k is at k's pointer + sum_d i_d * strides[k][d]
// + c, (i_0, ..., i_n-1) the row's index in rowDims (row-major). A stride of
// 0 broadcasts the value over that dim (HF's cos table, shared by the
// heads). A Full value has any strides >= 0 (an output's rows never overlap
// one another); a Column value's are all 0; a Row or RowFlat value (one
// element a row) is dense: dim d's stride is the product of the dims after d.
// The empty layout is the contiguous one (a Full value's row r at r * its
// extent), the layout of every chain without strided values: normalizeLayout
// drops dims of extent 1, merges dims d and d + 1 wherever every argument has
// strides[d] == strides[d + 1] * rowDims[d + 1], and gives the empty layout
// when what is left is contiguous, so a contiguous variant's string, entry
// and kernel source are the same as before layouts existed. At most
// kMaxRowDims dims remain. The layout belongs to the variant (the same chain
// over another layout is another variant: ChainVariant.h), and the kernel
// carries it as constants (Note [Chain layouts in the source] in
// ChainCodegen.h).
//
// Note [Transposed layouts]
// `colStrides` gives each tensor argument the stride of its columns; empty,
// the normal form, is every argument's 1 (the rest of this note's layouts).
// A column stride other than 1 is the input of a transposed copy: a chain of
// one cast of one Full input (a clone of k^T, a `.contiguous()` of a
// transposed view) whose input has stride 1 in the innermost row dim of
// extent above 1, every output at column stride 1. Element (row, c) of
// argument k is then at k's row offset + c * colStrides[k]. The builder puts
// the input's stride-1 row dim last (a lone copy's rows are independent, any
// order of its row dims is the same copy: NHWC to NCHW reads along the
// channels, a middle dim of the result). Its kernel is a tiled transpose (Note [Transposed copies] in ChainCodegen.h); any other
// chain over such a value runs unfused (chainLayoutProblem says why).
//
// Note [Repeated columns]
// `colRepeats` gives each tensor argument a repeat R >= 1; empty, the normal
// form, is every argument's 1. Element (row, c) of an argument of repeat R
// is at its row offset + (c / R) * its column stride: each of its elements
// stands for R consecutive columns. It is how a chain over a group norm's
// view (rows of one group, [N * G, (C / G) * HxW]) reads a per-channel
// value: the norm's weight and bias ([C]: row strides 0 over N and C / G over
// G, repeat HxW), a [N, C, 1, 1] addend alike (row strides C and C / G). Only
// a Full input repeats, R divides the columns, the layout is not transposed,
// and only a row kernel reads such an input (one element load a column, not
// one vector: the value is small and stays in L1), so its pointer needs only
// its element's alignment (chainKernelLayout).

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "hotkernel/chain/ChainIR.h"

namespace hotkernel::chain {

inline constexpr size_t kMaxRowDims = 6;

struct ChainLayout {
  std::vector<int64_t> rowDims;               // empty: contiguous
  std::vector<std::vector<int64_t>> strides;  // per tensor argument (chainTensorArgs), one per row dim
  std::vector<int64_t> colStrides;            // per tensor argument; empty: all 1 (Note [Transposed layouts])
  std::vector<int64_t> colRepeats;            // per tensor argument; empty: all 1 (Note [Repeated columns])

  bool contiguous() const { return rowDims.empty(); }
  // Whether an argument's elements repeat over columns (Note [Repeated columns]).
  bool repeated() const {
    return std::any_of(colRepeats.begin(), colRepeats.end(), [](int64_t r) { return r != 1; });
  }
  // Whether an argument's columns are not at stride 1 (Note [Transposed layouts]).
  bool transposed() const {
    return std::any_of(colStrides.begin(), colStrides.end(), [](int64_t c) { return c != 1; });
  }
  bool operator==(const ChainLayout& o) const {
    return rowDims == o.rowDims && strides == o.strides && colStrides == o.colStrides && colRepeats == o.colRepeats;
  }
  bool operator!=(const ChainLayout& o) const { return !(*this == o); }
};

// The nodes of the kernel's tensor arguments: the non-Scalar inputs in
// input order, then the outputs.
std::vector<int> chainTensorArgs(const ChainIR& ir);

// Whether `ir` is one cast of one Full input, its only output: a copy, the one
// chain a transposed layout serves (Note [Transposed layouts]).
bool isLoneCast(const ChainIR& ir);

// The column extent of node `n` in a variant of `cols` (its own, or cols).
int64_t extentOf(const Node& n, int64_t cols);

// "" when `layout` is valid for `ir` over [rows, cols] (Note [Chain
// layouts]); else why not. The empty layout is valid for any chain.
std::string chainLayoutProblem(const ChainIR& ir, int64_t rows, int64_t cols, const ChainLayout& layout);

// The normal form of a valid layout (Note [Chain layouts]); Error
// (HOTKERNEL_REQUIRE) when chainLayoutProblem is not empty.
ChainLayout normalizeLayout(const ChainIR& ir, int64_t rows, int64_t cols, const ChainLayout& layout);

// The row strides of tensor argument `arg` (an index into chainTensorArgs)
// and the row dims, the empty layout made explicit: one dim of `rows`.
std::vector<int64_t> layoutRowDims(const ChainLayout& layout, int64_t rows);
std::vector<int64_t> layoutStrides(const ChainIR& ir, const ChainLayout& layout, size_t arg, int64_t rows,
                                   int64_t cols);

// The column stride of tensor argument `arg` (1 unless the layout is transposed).
int64_t layoutColStride(const ChainLayout& layout, size_t arg);

// The column repeat of tensor argument `arg` (1 unless the layout repeats columns).
int64_t layoutColRepeat(const ChainLayout& layout, size_t arg);

// The offset (elements) of `row` of argument `arg`; the elements a buffer
// of the argument spans (its last row's offset plus its extent, for an
// argument whose strides are >= 0).
int64_t layoutRowOffset(const std::vector<int64_t>& rowDims, const std::vector<int64_t>& strides, int64_t row);
int64_t layoutSpan(const ChainIR& ir, const ChainLayout& layout, size_t arg, int64_t rows, int64_t cols);

// "32x4096:128,4096|0,128|..." (the variant string's part), each argument's
// "@<column stride>" after its row strides in a transposed layout and its
// "/<repeat>" in a repeated one; "" for the empty layout.
std::string layoutText(const ChainLayout& layout);

// {"rowDims": [...], "strides": [[...], ...]} (and "colStrides": [...] when
// transposed, "colRepeats": [...] when repeated) and its strict reader (Error
// naming the field).
nlohmann::json layoutToJson(const ChainLayout& layout);
ChainLayout layoutFromJson(const nlohmann::json& j, const std::string& where);

}  // namespace hotkernel::chain
