#pragma once
// A fused CUDA kernel from a chain: its source, parameters, launch geometry
// and argument list. No CUDA runtime: the source goes to NVRTC
// (hotkernel/runtime/Nvrtc.h) and the launch through a KernelLauncher.
//
// Note [Chain kernels]
// generateChainSource writes one self-contained program (Note [Self-contained
// chain sources]) holding `extern "C" __global__ void hk_chain(...)`. A chain
// without reductions becomes a grid-stride elementwise kernel: each thread
// takes HK_VEC consecutive elements of one row (cols % vec == 0), loads its
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
// recomputed in each pass that needs them, never stored: only outputs are
// written. The arithmetic is the interpreter's Fused mode (Note [Two
// evaluation modes]).
//
// Note [Chain kernel arguments]
// hk_chain's parameters, in order: one per chain input (a tensor's
// `const void*`, a Scalar input's float by value), one `void*` per output,
// then `long long rows, long long cols`. chainKernelLayout lists them with
// the alignment each pointer needs; chainKernelArgs fills a KernelArgs
// (at most KernelArgs::kMaxArgs = 12 parameters: a chain has at most 10
// inputs and outputs together, checked by checkChainKernel).

#include <cstdint>
#include <string>
#include <vector>

#include "hotkernel/chain/ChainIR.h"
#include "hotkernel/kernels/SoftmaxFamily.h"  // LaunchGeometry
#include "hotkernel/runtime/KernelArgs.h"

namespace hotkernel::chain {

using kernels::LaunchGeometry;

inline constexpr const char* kChainKernelName = "hk_chain";
// Elementwise kernels stride over the grid beyond this many CTAs.
inline constexpr unsigned kMaxPointwiseCtas = 1u << 16;
// Row kernels index a row's vectors in int.
inline constexpr int64_t kMaxChainCols = int64_t{1} << 30;

struct ChainKernelParams {
  int threads = 256;    // threads per CTA: a power of two in [32, 1024]
  int vec = 4;          // elements per access: 1, 2, 4 or 8
  int rowsPerCta = 1;   // row kernels: a power of two; > 1 only with threads / rowsPerCta <= 32
  int items = 0;        // row kernels: 0 streams the row; 1..16 hold it in registers

  std::string describe() const;  // "t256 v4 r1 i0"
  bool operator==(const ChainKernelParams& o) const {
    return threads == o.threads && vec == o.vec && rowsPerCta == o.rowsPerCta && items == o.items;
  }
};

// Error (HOTKERNEL_REQUIRE) when `p` is outside the ranges above, when a
// pointwise chain has rowsPerCta or items other than 1 and 0, or when the
// chain has more than 10 inputs and outputs (Note [Chain kernel arguments]).
void checkChainKernel(const ChainIR& ir, const ChainKernelParams& p);

// The CUDA source of the chain's kernel at `p` (Note [Chain kernels]);
// deterministic: the same chain and parameters give the same text. Error for
// an invalid chain or parameters.
std::string generateChainSource(const ChainIR& ir, const ChainKernelParams& p);

// NVRTC's options for the source (beyond compileToCubin's own).
std::vector<std::string> chainCompileOptions();

// "" when the kernel at `p` serves [rows, cols]; otherwise why not (cols not
// a multiple of vec, too long for the registers at `items`, empty, too many
// rows for the grid).
std::string chainVariantProblem(const ChainIR& ir, const ChainKernelParams& p, int64_t rows, int64_t cols);

// Grid, block and dynamic shared memory for [rows, cols] (Error when
// chainVariantProblem is not empty). The row kernel's shared memory is static.
LaunchGeometry chainLaunchGeometry(const ChainIR& ir, const ChainKernelParams& p, int64_t rows, int64_t cols);

struct ChainArg {
  enum class Kind { Input, ScalarInput, Output, Rows, Cols };
  Kind kind;
  int node = -1;               // the chain node (inputs and outputs)
  DType dtype = DType::Float32;
  ShapeClass shape = ShapeClass::Full;
  size_t alignmentBytes = 0;   // pointers: the alignment the kernel's accesses need
};

// hk_chain's parameters in order (Note [Chain kernel arguments]).
std::vector<ChainArg> chainKernelLayout(const ChainIR& ir, const ChainKernelParams& p);

// One per chain input: a tensor's pointer, or a Scalar input's value.
struct ChainInputValue {
  const void* pointer = nullptr;
  float scalar = 0.0f;
};

// The launch's arguments; Error on a wrong count of inputs or outputs.
KernelArgs chainKernelArgs(const ChainIR& ir, const std::vector<ChainInputValue>& inputs,
                           const std::vector<void*>& outputs, int64_t rows, int64_t cols);

}  // namespace hotkernel::chain
