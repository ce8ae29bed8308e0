#pragma once
// A fused CUDA kernel from a chain: its source, parameters, launch geometry
// and argument list. No CUDA runtime: the source goes to NVRTC
// (hotkernel/runtime/Nvrtc.h) and the launch through a KernelLauncher.
//
// Note [Chain kernels]
// generateChainSource writes one self-contained program (Note [Self-contained
// chain sources]) holding `extern "C" __global__ void hk_chain(...)`. A chain
// without reductions becomes a grid-stride elementwise kernel: each thread
// takes HK_VEC consecutive elements of one row (cols % vec == 0; items
// such vectors a step at items > 0: Note [Unrolled elementwise chains] in
// ChainVectorLoop.cpp), loads its
// Full inputs as vectors, its Column inputs at the same column, its Row inputs
// once per vector, runs the nodes in float32 and stores only the outputs (a
// Column output from row 0, a Row output from column 0). A chain with row
// reductions becomes a row kernel: rowsPerCta rows per CTA (each row served by
// threads / rowsPerCta threads, at most one warp when rowsPerCta > 1), one
// pass over the row per reduction depth (a reduction that reads another's
// result comes a pass later), then a last pass for the Full and Column
// outputs; between passes, the Row-class nodes run once per row on every
// thread of the row. Passes re-read their inputs from memory (L1/L2 hits
// after the first) when items == 0; with items > 0 every thread holds its
// part of the row's Full and Column inputs in registers and reads memory once
// (cols <= threads / rowsPerCta * vec * items). Intermediate nodes are
// recomputed in each pass that needs them (with items > 0, a costly one is
// kept in registers from the pass that first computes it: Note [Values kept
// across passes] in ChainCodegen.cpp), never stored: only outputs are
// written. The arithmetic is the interpreter's Fused mode (Note [Two
// evaluation modes]). A chain with a Cat, or an elementwise chain with a
// layout, is evaluated per column segment (Note [Chain kernel segments] in
// ChainCodegen.cpp), or, with `fold` where the Cats cut equal segments, all
// segments in each thread (Note [Folded segments]); a row kernel takes a
// layout, not a Cat (checkChainKernel refuses it: such a chain runs unfused).
//
// Note [Transposed copies]
// The kernel of a transposed layout (Note [Transposed layouts] in
// ChainLayout.h: one cast of an input whose columns are not at stride 1) is
// a tiled transpose. Its tile is rowsPerCta (32 or 64) rows of the innermost
// row dim, where the input has stride 1, by as many columns, where the
// output has: a CTA reads the tile with consecutive threads on consecutive
// rows (coalesced in the input), each thread's loads of the tile issued
// before any is used (all in flight at once), stages it in shared memory as
// float32 (pitch rowsPerCta + 1), and writes it with consecutive threads on
// consecutive columns (coalesced in the output); tiles are taken
// grid-stride. An access is vec (1 or 2) elements, along the rows when
// loading and along the columns when storing; items is 0. The cast is the
// elementwise kernel's (through float32), so the copy is exact.
//
// Note [Chain layouts in the source]
// A variant's layout (Note [Chain layouts]) is written into its kernel's
// source as constants: the row dims as the divisors that split a row index
// (32-bit when the rows fit) and each Full argument's row strides as the
// multipliers of its row offset, computed once per row (per vector in the
// elementwise kernel, per CTA row in the row kernel), never per element.
// The kernel's arguments stay (inputs, outputs, rows, cols): KernelArgs
// holds 20, fewer than a strided chain's strides, and a plan serves exactly
// its variant anyway, so constants cost nothing and let the compiler turn
// the divisions into multiplies. The empty layout writes nothing: a
// contiguous variant's source is what it was before layouts.
//
// Note [Chain kernel arguments]
// hk_chain's parameters, in order: one per chain input (a tensor's
// `const void*`, a Scalar input's float by value), one `void*` per output,
// then `long long rows, long long cols`. chainKernelLayout lists them with
// the alignment each pointer needs; chainKernelArgs fills a KernelArgs
// (at most KernelArgs::kMaxArgs = 20 parameters: a chain has at most 18
// inputs and outputs together, checked by checkChainKernel; a ResNet
// downsampling tail, two batch norms and their residual add, has 11).

#include <cstdint>
#include <string>
#include <vector>

#include "hotkernel/chain/ChainIR.h"
#include "hotkernel/chain/ChainLayout.h"
#include "hotkernel/kernels/SoftmaxFamily.h"  // LaunchGeometry
#include "hotkernel/runtime/KernelArgs.h"

namespace hotkernel::chain {

using kernels::LaunchGeometry;

inline constexpr const char* kChainKernelName = "hk_chain";
// Elementwise kernels stride over the grid beyond this many CTAs.
inline constexpr unsigned kMaxPointwiseCtas = 1u << 16;
// The most vectors an elementwise kernel's thread takes a step (Note [Unrolled elementwise chains]).
inline constexpr int kMaxPointwiseItems = 4;
// Row kernels index a row's vectors in int.
inline constexpr int64_t kMaxChainCols = int64_t{1} << 30;

// Note [ATen rounding in a fused kernel]
// A fused kernel keeps its intermediates in float32 (the interpreter's Fused
// mode, Note [Two evaluation modes]). Where that is more accurate than ATen
// by more than the harness's bound (a difference of two large products, as
// rotary embeddings compute in bfloat16: ATen rounds each product before the
// subtraction), no Fused candidate passes. With atenRounding the kernel
// rounds every computed value of a 16-bit dtype to it, reductions included,
// as the interpreter's AtenOrder mode does: the same arithmetic as eager, at
// the cost of a few instructions per value and none of memory traffic. The
// tuner tries such points only when no Fused point passed the harness
// (Note [Chain tuning]).
struct ChainKernelParams {
  int threads = 256;    // threads per CTA: a power of two in [32, 1024]
  int vec = 4;          // elements per access: 1, 2, 4 or 8
  int rowsPerCta = 1;   // row kernels: a power of two; > 1 only with threads / rowsPerCta <= 32. A transposed
                        // copy's tile side, 32 or 64 (Note [Transposed copies])
  int items = 0;        // row kernels: 0 streams the row; 1..16 hold it in registers. Elementwise chains: 0 one
                        // vector a thread a step; 1..4 that many (Note [Unrolled elementwise chains])
  // Note [ATen rounding in a fused kernel]: every computed value of a 16-bit
  // dtype rounded to it, as eager ATen stores each op's result.
  bool atenRounding = false;
  // Elementwise chains whose Cats cut the row into equal segments: each
  // thread evaluates one vector position in every segment (Note [Folded
  // segments] in ChainCodegen.cpp; chainFoldWidth says where it applies).
  bool fold = false;
  // Row kernels of one row a CTA: a thread-block cluster of this many CTAs
  // (1, 2, 4 or 8) splits each row into slices (Note [Rows split over a
  // cluster] in ChainCodegen.cpp); 1 is the kernel as before clusters.
  int cluster = 1;

  // "t256 v4 r1 i0", "t256 v4 r1 i0 aten", "t128 v8 r1 i0 fold", "t1024 v8 r1 i0 c8"
  std::string describe() const;
  bool operator==(const ChainKernelParams& o) const {
    return threads == o.threads && vec == o.vec && rowsPerCta == o.rowsPerCta && items == o.items &&
           atenRounding == o.atenRounding && fold == o.fold && cluster == o.cluster;
  }
};

// Error (HOTKERNEL_REQUIRE) when `p` is outside the ranges above, when a
// pointwise chain has rowsPerCta other than 1 (but a lone cast, whose
// transposed layout takes a tile: chainVariantProblem) or items over 4 (or above 0
// unfolded where a Cat cuts the row into segments), when fold is
// asked of a chain whose Cats do not cut equal segments, when the
// chain has more than 18 inputs and outputs (Note [Chain kernel arguments]),
// or when a chain with reductions has a Cat (Note [Chain kernels]), or a
// cluster other than 1 is asked of other than a row kernel of one row a CTA.
void checkChainKernel(const ChainIR& ir, const ChainKernelParams& p);

// Whether the variant's kernel is the row kernel: a chain with reductions, or
// one reading repeated columns (Note [Repeated columns]: a per-channel value is
// loaded a row at a time, which only the row kernel's rows do).
bool chainUsesRowKernel(const ChainIR& ir, const ChainLayout& layout);

// The CUDA source of the chain's kernel at `p` (Note [Chain kernels]);
// deterministic: the same chain and parameters give the same text. Error for
// an invalid chain or parameters.
std::string generateChainSource(const ChainIR& ir, const ChainKernelParams& p, const ChainLayout& layout = {});

// NVRTC's options for the source (beyond compileToCubin's own).
std::vector<std::string> chainCompileOptions();

// Whether atenRounding changes `ir`'s kernel: it computes a value of a 16-bit
// dtype other than by a cast (Note [ATen rounding in a fused kernel]), or it
// divides by a Row value (Note [Division by a row value]).
bool atenRoundingApplies(const ChainIR& ir);

// "" when the kernel at `p` serves [rows, cols] in `layout`; otherwise why
// not (cols not a multiple of vec, too long for the registers at `items`,
// empty, too many rows for the grid, a width-fixed chain over other cols, an
// invalid layout, a row stride or a Cat boundary that vec does not divide,
// a transposed layout at a point that is no tile or a tile at another layout).
std::string chainVariantProblem(const ChainIR& ir, const ChainKernelParams& p, int64_t rows, int64_t cols,
                                const ChainLayout& layout = {});

// The columns where a Cat the outputs reach switches parts (Note [Chain
// kernel segments]), ascending, without 0; empty without a Cat.
std::vector<int64_t> chainCatBoundaries(const ChainIR& ir);

// The width of the equal segments the Cats cut a row of `cols` columns into
// (boundaries exactly at w, 2w, ..., cols - w), or 0: no Cat, reductions, or
// segments of different widths. `fold` is for a chain where this is not 0 at
// its width (Note [Folded segments]).
int64_t chainFoldWidth(const ChainIR& ir, int64_t cols);

// Grid, block and dynamic shared memory for [rows, cols] (Error when
// chainVariantProblem is not empty). The row kernel's shared memory is static.
LaunchGeometry chainLaunchGeometry(const ChainIR& ir, const ChainKernelParams& p, int64_t rows, int64_t cols,
                                   const ChainLayout& layout = {});

struct ChainArg {
  enum class Kind { Input, ScalarInput, Output, Rows, Cols };
  Kind kind;
  int node = -1;               // the chain node (inputs and outputs)
  DType dtype = DType::Float32;
  ShapeClass shape = ShapeClass::Full;
  size_t alignmentBytes = 0;   // pointers: the alignment the kernel's accesses need
};

// hk_chain's parameters in order (Note [Chain kernel arguments]); an argument
// `tensors` repeats over columns needs only its element's alignment.
std::vector<ChainArg> chainKernelLayout(const ChainIR& ir, const ChainKernelParams& p,
                                        const ChainLayout& tensors = ChainLayout{});

// One per chain input: a tensor's pointer, or a Scalar input's value.
struct ChainInputValue {
  const void* pointer = nullptr;
  float scalar = 0.0f;
};

// The launch's arguments; Error on a wrong count of inputs or outputs.
KernelArgs chainKernelArgs(const ChainIR& ir, const std::vector<ChainInputValue>& inputs,
                           const std::vector<void*>& outputs, int64_t rows, int64_t cols);

}  // namespace hotkernel::chain
