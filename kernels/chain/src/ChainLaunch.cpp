// The chain kernel's parameters, variant check, launch geometry and argument
// list (ChainCodegen.h).

#include <algorithm>
#include <set>
#include <string>
#include <utility>

#include "hotkernel/chain/ChainCodegen.h"

#include "CodegenDetail.h"
#include "hotkernel/kernels/DType.h"
#include "hotkernel/runtime/Check.h"

namespace hotkernel::chain {
namespace {

bool isPowerOfTwo(int v) { return v > 0 && (v & (v - 1)) == 0; }

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

namespace detail {

std::string transposedPointProblem(const ChainIR& ir, const ChainKernelParams& p) {
  if (!isLoneCast(ir)) return "a transposed layout serves a lone cast only";
  const int lanes = p.rowsPerCta / p.vec;  // threads along a tile's side
  if ((p.rowsPerCta != 32 && p.rowsPerCta != 64) || p.vec > 2 || p.items != 0 || p.fold || p.threads < lanes ||
      p.threads / lanes > p.rowsPerCta) {
    return "a transposed copy's kernel takes a tile of 32 or 64 at vec 1 or 2, items 0, between a tile's side and "
           "its square of elements over vec threads, got " + p.describe();
  }
  return "";
}

}  // namespace detail

bool chainUsesRowKernel(const ChainIR& ir, const ChainLayout& layout) { return ir.hasReductions() || layout.repeated(); }

std::string ChainKernelParams::describe() const {
  return "t" + std::to_string(threads) + " v" + std::to_string(vec) + " r" + std::to_string(rowsPerCta) + " i" +
         std::to_string(items) + (atenRounding ? " aten" : "") + (fold ? " fold" : "") +
         (cluster > 1 ? " c" + std::to_string(cluster) : "");
}

void checkChainKernel(const ChainIR& ir, const ChainKernelParams& p) {
  ir.validate();
  HOTKERNEL_REQUIRE(isPowerOfTwo(p.threads) && p.threads >= 32 && p.threads <= 1024, "chain kernel threads ",
                    p.threads, " is not a power of two in [32, 1024]");
  HOTKERNEL_REQUIRE(p.vec == 1 || p.vec == 2 || p.vec == 4 || p.vec == 8, "chain kernel vec ", p.vec,
                    " is not 1, 2, 4 or 8");
  HOTKERNEL_REQUIRE(isPowerOfTwo(p.rowsPerCta) && p.rowsPerCta <= p.threads &&
                        (p.rowsPerCta == 1 || p.threads / p.rowsPerCta <= 32),
                    "chain kernel rowsPerCta ", p.rowsPerCta, " is not 1 or a power of two leaving each row ",
                    "at most one warp of ", p.threads, " threads");
  HOTKERNEL_REQUIRE(p.items >= 0 && p.items <= 16, "chain kernel items ", p.items, " is not in [0, 16]");
  HOTKERNEL_REQUIRE(p.cluster == 1 || ((p.cluster == 2 || p.cluster == 4 || p.cluster == 8) && ir.hasReductions() &&
                                       p.rowsPerCta == 1),
                    "chain kernel cluster ", p.cluster, " is not 1, or 2, 4 or 8 for a row kernel of one row a CTA");
  if (!ir.hasReductions()) {
    // Note [Transposed copies]: a lone cast's rowsPerCta is its tile, where its layout is transposed.
    HOTKERNEL_REQUIRE((p.rowsPerCta == 1 || isLoneCast(ir)) && p.items <= kMaxPointwiseItems,
                      "a chain without reductions is elementwise: rowsPerCta 1 and items at most ",
                      kMaxPointwiseItems, ", got ", p.describe());
    // Note [Unrolled elementwise chains]: the segmented body's loads depend on the vector's segment.
    HOTKERNEL_REQUIRE(p.items == 0 || p.fold || chainCatBoundaries(ir).empty(), "an elementwise chain with Cat ",
                      "segments takes items only folded, got ", p.describe());
  }
  HOTKERNEL_REQUIRE(!ir.hasReductions() || !ir.hasCat(), "a chain with reductions and a cat has no kernel: ",
                    "the row kernel does not evaluate cats (it runs unfused)");
  HOTKERNEL_REQUIRE(!p.fold || chainFoldWidth(ir, ir.width()) > 0, "fold is for elementwise chains whose cats cut ",
                    "the row into equal segments, got ", p.describe());
  const size_t args = ir.inputs().size() + ir.outputs().size();
  HOTKERNEL_REQUIRE(args + 2 <= KernelArgs::kMaxArgs, "a chain kernel takes at most ", KernelArgs::kMaxArgs - 2,
                    " inputs and outputs together, this chain has ", args);
}

std::vector<int64_t> chainCatBoundaries(const ChainIR& ir) {
  // Every (node, shift) the outputs reach; a Cat at shift s cuts at s + its offsets.
  std::set<int64_t> cuts;
  std::set<std::pair<int, int64_t>> seen;
  std::vector<std::pair<int, int64_t>> stack;
  for (int o : ir.outputs()) stack.emplace_back(o, 0);
  while (!stack.empty()) {
    const auto [o, shift] = stack.back();
    stack.pop_back();
    if (!seen.insert({o, shift}).second) continue;
    const Node& n = ir.node(o);
    if (n.op != OpKind::Cat) {
      for (int operand : n.operands) stack.emplace_back(operand, shift);
      continue;
    }
    int64_t offset = 0;
    for (int part : n.operands) {
      cuts.insert(shift + offset);
      stack.emplace_back(part, shift + offset);
      offset += ir.node(part).cols;
    }
  }
  cuts.erase(0);
  return {cuts.begin(), cuts.end()};
}

int64_t chainFoldWidth(const ChainIR& ir, int64_t cols) {
  if (!ir.hasCat() || ir.hasReductions() || cols < 2) return 0;
  const std::vector<int64_t> cuts = chainCatBoundaries(ir);
  if (cuts.empty()) return 0;
  const int64_t w = cuts.front();
  if (cols % w != 0 || static_cast<int64_t>(cuts.size()) != cols / w - 1) return 0;
  for (size_t k = 0; k < cuts.size(); ++k) {
    if (cuts[k] != static_cast<int64_t>(k + 1) * w) return 0;
  }
  return w;
}

std::string chainVariantProblem(const ChainIR& ir, const ChainKernelParams& p, int64_t rows, int64_t cols,
                                const ChainLayout& layout) {
  checkChainKernel(ir, p);
  if (rows < 1 || cols < 1) return "empty: [" + std::to_string(rows) + ", " + std::to_string(cols) + "]";
  if (cols % p.vec != 0) return "cols " + std::to_string(cols) + " is not a multiple of vec " + std::to_string(p.vec);
  if (ir.width() != 0 && ir.width() != cols) {
    return "the chain's width is " + std::to_string(ir.width()) + ", not cols " + std::to_string(cols);
  }
  const std::string layoutProblem = chainLayoutProblem(ir, rows, cols, layout);
  if (!layoutProblem.empty()) return "layout: " + layoutProblem;
  if (layout.transposed()) {
    const std::string point = detail::transposedPointProblem(ir, p);
    if (!point.empty()) return point;
    if (layout.rowDims.back() < 2 || layout.strides[0].back() != 1) {
      return "a transposed copy's innermost row dim has extent above 1 and the input's stride 1 (a normalized layout)";
    }
    if (layout.rowDims.back() % p.vec != 0) {
      return "the innermost row dim " + std::to_string(layout.rowDims.back()) + " is not a multiple of vec " +
             std::to_string(p.vec);
    }
    // Vectors run along the input's innermost row dim (stride 1) and the output's columns (stride 1): every
    // other stride keeps them aligned.
    std::vector<int64_t> strides(layout.strides[0].begin(), layout.strides[0].end() - 1);
    strides.insert(strides.end(), layout.strides[1].begin(), layout.strides[1].end());
    strides.push_back(layoutColStride(layout, 0));
    for (int64_t s : strides) {
      if (s % p.vec != 0) return "stride " + std::to_string(s) + " is not a multiple of vec " + std::to_string(p.vec);
    }
    if (rows > INT64_MAX / cols) return "rows * cols overflows";
    return "";
  }
  if (!ir.hasReductions() && p.rowsPerCta != 1) {
    return "rowsPerCta " + std::to_string(p.rowsPerCta) + " is a transposed copy's tile, the layout is not transposed";
  }
  for (size_t k = 0; k < layout.strides.size(); ++k) {
    if (layoutColRepeat(layout, k) > 1) continue;  // Note [Repeated columns]: element loads, any alignment
    for (int64_t s : layout.strides[k]) {
      if (s % p.vec != 0) return "row stride " + std::to_string(s) + " is not a multiple of vec " + std::to_string(p.vec);
    }
  }
  for (const Node& n : ir.nodes()) {
    if (n.op == OpKind::Input && n.cols > 0 && n.cols % p.vec != 0) {
      return "an input's extent " + std::to_string(n.cols) + " is not a multiple of vec " + std::to_string(p.vec);
    }
  }
  for (int64_t b : chainCatBoundaries(ir)) {
    if (b % p.vec != 0) return "cat boundary " + std::to_string(b) + " is not a multiple of vec " + std::to_string(p.vec);
  }
  if (chainUsesRowKernel(ir, layout)) {
    if (cols > kMaxChainCols) return "cols " + std::to_string(cols) + " is over 2^30";
    if (ir.hasCat()) return "the row kernel does not evaluate cats";
    const int64_t rowThreads = p.threads / p.rowsPerCta;
    // Note [Rows split over a cluster]: a CTA's slice of ceil(vectors / cluster) vectors.
    const int64_t slice = ceilDiv(cols / p.vec, p.cluster) * p.vec;
    if (p.items > 0 && slice > rowThreads * p.vec * p.items) {
      return "cols " + std::to_string(cols) + " is over the registers' " +
             std::to_string(rowThreads * p.vec * p.items * p.cluster) + " at " + p.describe();
    }
    if (ceilDiv(rows, p.rowsPerCta) * p.cluster > int64_t{0x7fffffff}) {
      return "rows " + std::to_string(rows) + " is over the grid";
    }
  } else if (rows > INT64_MAX / cols) {
    return "rows * cols overflows";
  }
  return "";
}

LaunchGeometry chainLaunchGeometry(const ChainIR& ir, const ChainKernelParams& p, int64_t rows, int64_t cols,
                                   const ChainLayout& layout) {
  const std::string problem = chainVariantProblem(ir, p, rows, cols, layout);
  HOTKERNEL_REQUIRE(problem.empty(), "the chain kernel at ", p.describe(), " does not serve [", rows, ", ", cols,
                    "]: ", problem);
  LaunchGeometry g;
  g.blockX = static_cast<unsigned>(p.threads);
  if (layout.transposed()) {
    // Note [Transposed copies]: tiles of the innermost row dim by the columns, for each of the outer rows.
    const int64_t inner = layout.rowDims.back();
    const int64_t tiles = rows / inner * ceilDiv(inner, p.rowsPerCta) * ceilDiv(cols, p.rowsPerCta);
    g.gridX = static_cast<unsigned>(tiles < kMaxPointwiseCtas ? tiles : kMaxPointwiseCtas);
  } else if (chainUsesRowKernel(ir, layout)) {
    g.gridX = static_cast<unsigned>(ceilDiv(rows, p.rowsPerCta) * p.cluster);  // Note [Rows split over a cluster]
  } else {
    // Folded: one thread a vector position of one segment (Note [Folded segments]).
    const int64_t width = p.fold ? chainFoldWidth(ir, cols) : cols;
    const int64_t ctas = ceilDiv(rows * (width / p.vec), int64_t{p.threads} * std::max(p.items, 1));
    g.gridX = static_cast<unsigned>(ctas < kMaxPointwiseCtas ? ctas : kMaxPointwiseCtas);
  }
  g.sharedBytes = 0;  // the row kernel's reduction buffers are static
  return g;
}

std::vector<ChainArg> chainKernelLayout(const ChainIR& ir, const ChainKernelParams& p, const ChainLayout& tensors) {
  checkChainKernel(ir, p);
  std::vector<ChainArg> layout;
  size_t tensorArg = 0;  // inputs, then outputs (Note [Chain layouts])
  auto alignment = [&](const Node& n) {
    const size_t element = kernels::elementSize(n.dtype);
    // Note [Repeated columns]: a repeated argument is read one element at a time.
    const bool repeated = layoutColRepeat(tensors, tensorArg++) > 1;
    return (n.shape == ShapeClass::Full || n.shape == ShapeClass::Column) && !repeated
               ? element * static_cast<size_t>(p.vec)
               : element;
  };
  for (int in : ir.inputs()) {
    const Node& n = ir.node(in);
    const bool scalar = n.shape == ShapeClass::Scalar;
    layout.push_back({scalar ? ChainArg::Kind::ScalarInput : ChainArg::Kind::Input, in, n.dtype, n.shape,
                      scalar ? 0 : alignment(n)});
  }
  for (int out : ir.outputs()) {
    const Node& n = ir.node(out);
    layout.push_back({ChainArg::Kind::Output, out, n.dtype, n.shape, alignment(n)});
  }
  layout.push_back({ChainArg::Kind::Rows, -1, DType::Float32, ShapeClass::Scalar, 0});
  layout.push_back({ChainArg::Kind::Cols, -1, DType::Float32, ShapeClass::Scalar, 0});
  return layout;
}

KernelArgs chainKernelArgs(const ChainIR& ir, const std::vector<ChainInputValue>& inputs,
                           const std::vector<void*>& outputs, int64_t rows, int64_t cols) {
  const std::vector<int> inputNodes = ir.inputs();
  HOTKERNEL_CHECK(inputs.size() == inputNodes.size(), "the chain kernel takes ", inputNodes.size(), " inputs, got ",
                  inputs.size());
  HOTKERNEL_CHECK(outputs.size() == ir.outputs().size(), "the chain kernel takes ", ir.outputs().size(),
                  " outputs, got ", outputs.size());
  KernelArgs args;
  for (size_t k = 0; k < inputs.size(); ++k) {
    if (ir.node(inputNodes[k]).shape == ShapeClass::Scalar) {
      args.float32(inputs[k].scalar);
    } else {
      args.pointer(inputs[k].pointer);
    }
  }
  for (void* out : outputs) args.pointer(out);
  args.int64(rows).int64(cols);
  HOTKERNEL_CHECK(args.valid(), "the chain kernel's arguments overflow KernelArgs");
  return args;
}

bool atenRoundingApplies(const ChainIR& ir) {
  return std::any_of(ir.nodes().begin(), ir.nodes().end(), [&](const Node& n) {
    // Note [Division by a row value]: a kernel rounding as ATen divides where a fused one multiplies.
    const bool byRow = n.op == OpKind::Div && ir.node(n.operands[1]).shape == ShapeClass::Row;
    return detail::roundsAsAten(n) || byRow;
  });
}

}  // namespace hotkernel::chain
