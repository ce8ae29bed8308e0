// Generated elementwise chain kernels run on the host (Note [Chain kernels on
// the host] in ChainHostKernels.h): their index arithmetic (layouts, cats,
// folded segments) against the interpreter, without a GPU.
#include <gtest/gtest.h>

#include <algorithm>

#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "../../ChainHostKernels.h"
#include "hotkernel/chain/ChainCodegen.h"
#include "hotkernel/chain/ChainInterpreter.h"
#include "hotkernel/chain/ChainLayout.h"
#include "hotkernel/chain/ChainParameterSpace.h"
#include "hotkernel/chain/NamedChains.h"
#include "hotkernel/chain/RandomChain.h"
#include "hotkernel/chain/Rounding.h"

namespace hotkernel::chain {
namespace {

using testutil::HostKernel;
using testutil::HostKernelBatch;

// Memory of one dtype's storage: float32 as floats, 16-bit types as their bits.
struct Memory {
  DType dtype = DType::Float32;
  std::vector<float> f32;
  std::vector<uint16_t> bits;

  static Memory of(DType dtype, const std::vector<float>& values) {
    Memory m;
    m.dtype = dtype;
    if (dtype == DType::Float32) {
      m.f32 = values;
    } else {
      for (float v : values) m.bits.push_back(dtype == DType::Float16 ? floatToHalfBits(v) : floatToBFloat16Bits(v));
    }
    return m;
  }
  static Memory nan(DType dtype, int64_t elements) {
    return of(dtype, std::vector<float>(static_cast<size_t>(elements), std::numeric_limits<float>::quiet_NaN()));
  }
  void* data(int64_t offset = 0) {
    return dtype == DType::Float32 ? static_cast<void*>(f32.data() + offset) : static_cast<void*>(bits.data() + offset);
  }
  float at(int64_t e) const {
    if (dtype == DType::Float32) return f32[static_cast<size_t>(e)];
    const uint16_t b = bits[static_cast<size_t>(e)];
    return dtype == DType::Float16 ? halfBitsToFloat(b) : bfloat16BitsToFloat(b);
  }
  int64_t size() const { return static_cast<int64_t>(dtype == DType::Float32 ? f32.size() : bits.size()); }
};

// Output `m`'s values through the variant's layout, [rows, extent] row-major
// for a Full output as interpretChain returns them; `written` marks the
// elements read back, so that the rest can be checked untouched.
std::vector<float> gather(const ChainIR& ir, const ChainLayout& layout, size_t m, int64_t rows, int64_t cols,
                          const Memory& out, std::vector<bool>* written) {
  const Node& n = ir.node(ir.outputs()[m]);
  const size_t arg = chainTensorArgs(ir).size() - ir.outputs().size() + m;
  const std::vector<int64_t> dims = layoutRowDims(layout, rows);
  const bool full = n.shape == ShapeClass::Full;
  const std::vector<int64_t> strides = full ? layoutStrides(ir, layout, arg, rows, cols) : std::vector<int64_t>{};
  written->assign(static_cast<size_t>(out.size()), false);
  std::vector<float> values;
  const int64_t width = full || n.shape == ShapeClass::Column ? cols : 1;
  for (int64_t r = 0; r < (n.shape == ShapeClass::Column ? 1 : rows); ++r) {
    const int64_t base = full ? layoutRowOffset(dims, strides, r) : (n.shape == ShapeClass::Column ? 0 : r);
    for (int64_t c = 0; c < width; ++c) {
      values.push_back(out.at(base + c));
      (*written)[static_cast<size_t>(base + c)] = true;
    }
  }
  return values;
}

// The kernel's outputs for `memory` (interpretChain's inputs in the layout):
// a Full input is passed at its buffer's start, a Scalar by value.
std::vector<std::vector<float>> runOnHost(const HostKernelBatch& batch, size_t k, const HostKernel& h,
                                          const std::vector<std::vector<float>>& memory,
                                          std::vector<std::vector<bool>>* written) {
  std::vector<Memory> inputs;
  std::vector<ChainInputValue> args;
  inputs.reserve(memory.size());
  for (size_t i = 0; i < memory.size(); ++i) {
    const Node& n = h.ir.node(h.ir.inputs()[i]);
    ChainInputValue v;
    if (n.shape == ShapeClass::Scalar) {
      v.scalar = memory[i][0];
    } else {
      inputs.push_back(Memory::of(n.dtype, memory[i]));
      v.pointer = inputs.back().data();
    }
    args.push_back(v);
  }
  const size_t tensorInputs = chainTensorArgs(h.ir).size() - h.ir.outputs().size();
  std::vector<Memory> outs;
  std::vector<void*> pointers;
  outs.reserve(h.ir.outputs().size());
  for (size_t m = 0; m < h.ir.outputs().size(); ++m) {
    const Node& n = h.ir.node(h.ir.outputs()[m]);
    outs.push_back(Memory::nan(n.dtype, layoutSpan(h.ir, h.layout, tensorInputs + m, h.rows, h.cols)));
    pointers.push_back(outs.back().data());
  }
  batch.run(k, args, pointers);
  std::vector<std::vector<float>> values;
  written->resize(outs.size());
  for (size_t m = 0; m < outs.size(); ++m) {
    values.push_back(gather(h.ir, h.layout, m, h.rows, h.cols, outs[m], &(*written)[m]));
    for (int64_t e = 0; e < outs[m].size(); ++e) {
      if (!(*written)[m][static_cast<size_t>(e)]) {
        EXPECT_TRUE(std::isnan(outs[m].at(e))) << "output " << m << " element " << e << " written between rows";
      }
    }
  }
  return values;
}

bool sameBits(float a, float b) { return (std::isnan(a) && std::isnan(b)) || std::memcmp(&a, &b, sizeof a) == 0; }

// A variant whose whole parameter space runs on the host, with the seed of its inputs.
struct SpaceCase {
  std::string name;
  ChainIR ir;
  ChainLayout layout;
  int64_t rows, cols;
  uint64_t seed;
};

// Every point of each case's space up to 256 threads (a CTA is as many host threads), and the case of each.
std::vector<HostKernel> spaceKernels(const std::vector<SpaceCase>& cases, std::vector<size_t>* caseOf) {
  std::vector<HostKernel> kernels;
  for (size_t c = 0; c < cases.size(); ++c) {
    for (const ChainKernelParams& p : chainParameterSpace(cases[c].ir, cases[c].rows, cases[c].cols, cases[c].layout)) {
      if (p.threads > 256) continue;
      kernels.push_back({cases[c].ir, p, cases[c].layout, cases[c].rows, cases[c].cols});
      caseOf->push_back(c);
    }
  }
  return kernels;
}

// Kernel k's outputs on its case's inputs; `want` gets the interpreter's Fused mode. A NaN where the
// interpreter has none (an element not written) fails the test, as do writes between an output's rows.
std::vector<std::vector<float>> runAgainstFused(const HostKernelBatch& batch, size_t k, const HostKernel& h,
                                                uint64_t seed, std::vector<std::vector<float>>* want) {
  const auto memory = randomChainInputs(h.ir, h.rows, h.cols, h.layout, seed);
  *want = interpretChain(h.ir, h.rows, h.cols, h.layout, memory, EvalMode::Fused);
  std::vector<std::vector<bool>> written;
  std::vector<std::vector<float>> got = runOnHost(batch, k, h, memory, &written);
  for (size_t m = 0; m < got.size(); ++m) {
    EXPECT_EQ(got[m].size(), (*want)[m].size());
    for (size_t e = 0; e < got[m].size() && e < (*want)[m].size(); ++e) {
      EXPECT_FALSE(std::isnan(got[m][e]) && !std::isnan((*want)[m][e])) << "output " << m << " element " << e
                                                                        << " not written";
    }
  }
  return got;
}

// Whether |got - want| <= relative * (1 + |want|) everywhere want is a number (NaN positions: runAgainstFused).
::testing::AssertionResult withinRelative(const std::vector<std::vector<float>>& got,
                                          const std::vector<std::vector<float>>& want, double relative) {
  for (size_t m = 0; m < got.size() && m < want.size(); ++m) {
    for (size_t e = 0; e < got[m].size() && e < want[m].size(); ++e) {
      if (std::isnan(want[m][e])) continue;
      if (!(std::fabs(static_cast<double>(got[m][e]) - want[m][e]) <= relative * (1.0 + std::fabs(want[m][e])))) {
        return ::testing::AssertionFailure() << "output " << m << " element " << e << ": " << got[m][e] << " vs "
                                             << want[m][e];
      }
    }
  }
  return ::testing::AssertionSuccess();
}

// HF's rotary in its strided layout: every point of the tuner's space, the folded ones
// (Note [Folded segments]) among them, computes the interpreter's Fused mode bit for bit
// (mul, neg and add only: no libm on either side), and rounding as ATen its AtenOrder mode,
// and writes nothing between x's rows.
TEST(ChainKernelHostTest, GivenHfRotaryWhenEveryPointOfItsSpaceRunsOnTheHostThenFoldedAndSegmentedKernelsComputeTheFusedMode) {
  for (const DType dtype : {DType::BFloat16, DType::Float16}) {
    for (const RotaryShape shape : {RotaryShape{2, 3, 5, 64}, RotaryShape{1, 4, 3, 128}, RotaryShape{1, 2, 7, 32}}) {
      const int64_t d = shape.headDim, half = d / 2, rows = rotaryRows(shape);
      const ChainIR ir = rotaryChain(dtype, d);
      const ChainLayout layout = rotaryLayout(shape);
      ASSERT_EQ(chainFoldWidth(ir, d), half) << "rotate_half's cat cuts the head in halves";
      // projection [b, s, h * d], cos and sin [b, s, d]: the memory the layout reads.
      const int64_t projection = shape.batch * shape.seq * shape.heads * d, table = shape.batch * shape.seq * d;
      const auto draw = [&](int64_t n, float scale, float shift) {
        std::vector<float> v;
        for (int64_t e = 0; e < n; ++e) v.push_back(roundTo(dtype, std::sin(static_cast<float>(e) * scale) * 2 + shift));
        return v;
      };
      const std::vector<float> x = draw(projection, 0.37f, 0.0f), cos = draw(table, 0.11f, 0.1f),
                               sin = draw(table, 0.23f, -0.1f);
      // Each input's memory as far as its layout reaches; x2 (x[..., half:]) starts half elements into x's.
      const auto span = [&](const std::vector<float>& v, int64_t from, size_t arg) {
        return std::vector<float>(v.begin() + from, v.begin() + from + layoutSpan(ir, layout, arg, rows, d));
      };
      const std::vector<std::vector<float>> memory = {span(x, 0, 0), span(cos, 0, 1), span(x, half, 2), span(x, 0, 3),
                                                      span(sin, 0, 4)};
      const auto fusedMode = interpretChain(ir, rows, d, layout, memory, EvalMode::Fused);
      const auto atenMode = interpretChain(ir, rows, d, layout, memory, EvalMode::AtenOrder);
      std::vector<HostKernel> kernels;
      for (const ChainKernelParams& p : chainParameterSpace(ir, rows, d, layout)) {
        kernels.push_back({ir, p, layout, rows, d});
        ChainKernelParams rounded = p;  // Note [ATen rounding in a fused kernel]: the tuner's second pass
        rounded.atenRounding = true;
        kernels.push_back({ir, rounded, layout, rows, d});
      }
      int folded = 0;
      for (const HostKernel& h : kernels) folded += h.params.fold ? 1 : 0;
      ASSERT_GE(folded, 4) << "the space holds folded points";
      const HostKernelBatch batch(kernels);
      for (size_t k = 0; k < kernels.size(); ++k) {
        SCOPED_TRACE(std::string(shortDTypeName(dtype)) + " " + layoutText(layout) + " at " + kernels[k].params.describe());
        std::vector<std::vector<bool>> written;
        // x2 is x's memory from element `half` on: the kernel gets x's buffer offset by half.
        std::vector<Memory> in = {Memory::of(dtype, x), Memory::of(dtype, cos), Memory::of(dtype, sin)};
        Memory out = Memory::nan(dtype, layoutSpan(ir, layout, 5, rows, d));
        batch.run(k, {{in[0].data(), 0}, {in[1].data(), 0}, {in[0].data(half), 0}, {in[0].data(), 0}, {in[2].data(), 0}},
                  {out.data()});
        std::vector<bool> marks;
        const std::vector<float> got = gather(ir, layout, 0, rows, d, out, &marks);
        const auto& want = kernels[k].params.atenRounding ? atenMode : fusedMode;
        ASSERT_EQ(got.size(), want[0].size());
        for (size_t e = 0; e < got.size(); ++e) {
          ASSERT_TRUE(sameBits(got[e], want[0][e])) << "element " << e << ": " << got[e] << " vs " << want[0][e];
        }
        for (int64_t e = 0; e < out.size(); ++e) {
          if (!marks[static_cast<size_t>(e)]) ASSERT_TRUE(std::isnan(out.at(e))) << "element " << e << " written";
        }
      }
    }
  }
}

// Seeded random elementwise chains with cats, in random strided and broadcast layouts: every
// kernel computes the interpreter's Fused mode (bit for bit where no libm function is called;
// within a 16-bit unit otherwise) and writes nothing between an output's rows; where the cats cut
// equal segments, the folded kernel and the segmented one at the same threads and vec agree bit for bit.
TEST(ChainKernelHostTest, GivenRandomChainsWithCatsInRandomLayoutsWhenRunOnTheHostThenEveryPointComputesTheFusedMode) {
  const int64_t cols = 64;
  const std::vector<int64_t> dims = {3, 5};
  const int64_t rows = 15;
  std::vector<HostKernel> kernels;
  std::vector<uint64_t> seedOf;
  int foldChains = 0;
  for (uint64_t seed = 0; seed < 3000 && (foldChains < 12 || kernels.size() < 60); ++seed) {
    RandomChainOptions o;
    o.catWidth = cols;
    o.reductions = false;
    const ChainIR ir = randomChain(seed, o);
    if (!ir.hasCat()) continue;
    const bool fold = chainFoldWidth(ir, cols) > 0;
    if (!fold && kernels.size() >= 60) continue;
    const ChainLayout layout = seed % 3 == 0 ? ChainLayout{} : randomChainLayout(ir, dims, cols, seed);
    int added = 0;
    for (const ChainKernelParams& p : chainParameterSpace(ir, rows, cols, layout)) {
      if (p.threads > 256) continue;  // the host runs every thread: two sizes are enough
      kernels.push_back({ir, p, layout, rows, cols});
      seedOf.push_back(seed);
      ++added;
    }
    foldChains += fold && added > 0 ? 1 : 0;
  }
  ASSERT_GE(foldChains, 12) << "random chains with equal cat segments";
  const HostKernelBatch batch(kernels);
  int foldedCompared = 0;
  std::vector<std::vector<float>> previous;  // the last unfolded point's outputs, per chain
  for (size_t k = 0; k < kernels.size(); ++k) {
    const HostKernel& h = kernels[k];
    SCOPED_TRACE("seed " + std::to_string(seedOf[k]) + " at " + h.params.describe() + ", layout " + layoutText(h.layout));
    const auto memory = randomChainInputs(h.ir, rows, cols, h.layout, seedOf[k]);
    const auto want = interpretChain(h.ir, rows, cols, h.layout, memory, EvalMode::Fused);
    std::vector<std::vector<bool>> written;
    const auto got = runOnHost(batch, k, h, memory, &written);
    for (size_t m = 0; m < got.size(); ++m) {
      ASSERT_EQ(got[m].size(), want[m].size());
      for (size_t e = 0; e < got[m].size(); ++e) {
        ASSERT_FALSE(std::isnan(got[m][e])) << "output " << m << " element " << e << " not written";
        ASSERT_LE(std::fabs(static_cast<double>(got[m][e]) - want[m][e]), 0x1p-7 * (1.0 + std::fabs(want[m][e])))
            << "output " << m << " element " << e << ": " << got[m][e] << " vs " << want[m][e];
      }
    }
    // The folded one-vector point follows its segmented twin in the space (chainParameterSpace's order); an
    // unrolled one has no unfolded twin (Note [Unrolled elementwise chains]).
    if (h.params.fold && h.params.items == 0) {
      ASSERT_GT(k, 0u);
      ChainKernelParams twin = h.params;
      twin.fold = false;
      ASSERT_EQ(kernels[k - 1].params, twin);
      ASSERT_EQ(seedOf[k - 1], seedOf[k]);
      for (size_t m = 0; m < got.size(); ++m) {
        for (size_t e = 0; e < got[m].size(); ++e) {
          ASSERT_TRUE(sameBits(got[m][e], previous[m][e])) << "output " << m << " element " << e << " differs folded";
        }
      }
      ++foldedCompared;
    }
    previous = got;
  }
  EXPECT_GE(foldedCompared, 24);
}

// Note [Unrolled elementwise chains]: elementwise chains without a Cat, contiguous (the plain kernel) and in random
// strided and broadcast layouts (one segment), at every point of their spaces up to 256 threads, the unrolled ones
// among them, over vector counts that leave the last step partial: each computes the interpreter's Fused mode
// (within a 16-bit unit where a libm function is called), writes every element and nothing between rows, and an
// unrolled point gives the one-vector point's bits at the same threads and vec.
TEST(ChainKernelHostTest, GivenElementwiseChainsWithoutCatsWhenEveryPointRunsOnTheHostThenUnrolledAndOneVectorPointsAgree) {
  std::vector<SpaceCase> cases = {
      {"swiglu bf16", swigluChain(DType::BFloat16), {}, 37, 96, 1},
      {"new_gelu fp16", newGeluChain(DType::Float16), {}, 5, 328, 2},
      {"residual add + cast", residualAddCastChain(DType::BFloat16, DType::Float32), {}, 9, 40, 3},
      {"relayout copy fp16", relayoutCopyChain(DType::Float16), headViewCopyLayout({2, 3, 7, 16}, 3), 2 * 3 * 7, 16, 4}};
  for (uint64_t seed = 0, added = 0; seed < 400 && added < 12; ++seed) {
    RandomChainOptions o;
    o.reductions = false;
    const ChainIR ir = randomChain(2000 + seed, o);
    if (ir.hasCat()) continue;
    const ChainLayout layout = seed % 2 == 0 ? ChainLayout{} : randomChainLayout(ir, {5, 7}, 48, seed);
    cases.push_back({"random " + std::to_string(2000 + seed), ir, layout, 35, 48, seed});
    ++added;
  }
  std::vector<size_t> caseOf;
  const std::vector<HostKernel> kernels = spaceKernels(cases, &caseOf);
  const HostKernelBatch batch(kernels);
  int unrolled = 0;
  std::map<std::tuple<size_t, int, int>, std::vector<std::vector<float>>> oneVector;  // (case, threads, vec)
  for (size_t k = 0; k < kernels.size(); ++k) {
    const HostKernel& h = kernels[k];
    SCOPED_TRACE(cases[caseOf[k]].name + " at " + h.params.describe() + ", layout " + layoutText(h.layout));
    std::vector<std::vector<float>> want;
    const auto got = runAgainstFused(batch, k, h, cases[caseOf[k]].seed, &want);
    ASSERT_TRUE(withinRelative(got, want, 0x1p-7));  // libm: within a 16-bit unit
    const auto key = std::make_tuple(caseOf[k], h.params.threads, h.params.vec);
    if (h.params.items == 0) {
      oneVector[key] = got;
      continue;
    }
    ++unrolled;
    ASSERT_EQ(oneVector.count(key), 1u) << "the one-vector point comes first in the space";
    const auto& base = oneVector[key];
    for (size_t m = 0; m < got.size(); ++m) {
      for (size_t e = 0; e < got[m].size(); ++e) {
        ASSERT_TRUE(sameBits(got[m][e], base[m][e])) << "output " << m << " element " << e << " differs unrolled";
      }
    }
  }
  EXPECT_GE(unrolled, 4 * static_cast<int>(cases.size()));
}

// k^T's copy in HF's eager attention (Note [Transposed copies]): every point of its space, tiles of 64 and 32
// at vec 1 and 2, with head dims and sequences that leave partial tiles, copies (and casts) each element of the transposed view
// exactly where the interpreter reads it, and writes nothing between the copy's rows.
TEST(ChainKernelHostTest, GivenTransposedHeadViewCopiesWhenEveryPointRunsOnTheHostThenEachCopiesEveryElementExactly) {
  const auto castChain = [](DType from, DType to) {
    ChainIR ir;
    ir.markOutput(ir.addCast(ir.addInput(from, ShapeClass::Full), to));
    return ir;
  };
  std::vector<SpaceCase> cases;
  uint64_t seed = 50;
  for (const RotaryShape shape : {RotaryShape{2, 3, 40, 24}, RotaryShape{1, 2, 70, 16}, RotaryShape{1, 1, 9, 100}}) {
    const ChainLayout layout = headTransposeCopyLayout(shape, 3);
    ASSERT_TRUE(layout.transposed()) << layoutText(layout);
    const int64_t rows = shape.batch * shape.heads * shape.headDim;
    for (const auto& [from, to] : {std::pair{DType::Float16, DType::Float16}, std::pair{DType::BFloat16, DType::BFloat16},
                                   std::pair{DType::Float32, DType::Float32}, std::pair{DType::Float32, DType::BFloat16}}) {
      cases.push_back({std::string(dtypeName(from)) + " -> " + dtypeName(to) + " " + layoutText(layout),
                       castChain(from, to), layout, rows, shape.seq, ++seed});
    }
  }
  // NHWC [2, 3, 5, 40] to NCHW as the builder lays it out: the channels (stride 1) last among the row dims
  // (ChainBuilderTest has the recording), the width the columns.
  ChainLayout nchw;
  nchw.rowDims = {2, 3, 40};
  nchw.strides = {{600, 200, 1}, {600, 5, 15}};
  nchw.colStrides = {40, 1};
  ASSERT_EQ(normalizeLayout(castChain(DType::BFloat16, DType::BFloat16), 240, 5, nchw), nchw);
  cases.push_back({"nhwc -> nchw bf16", castChain(DType::BFloat16, DType::BFloat16), nchw, 240, 5, ++seed});
  std::vector<size_t> caseOf;
  const std::vector<HostKernel> kernels = spaceKernels(cases, &caseOf);
  std::set<std::pair<int, int>> points;  // (tile, vec)
  for (const HostKernel& h : kernels) points.insert({h.params.rowsPerCta, h.params.vec});
  EXPECT_EQ(points, (std::set<std::pair<int, int>>{{32, 1}, {64, 1}, {32, 2}, {64, 2}})) << "both tiles at both vecs";
  const HostKernelBatch batch(kernels);
  for (size_t k = 0; k < kernels.size(); ++k) {
    const HostKernel& h = kernels[k];
    SCOPED_TRACE(cases[caseOf[k]].name + " at " + h.params.describe());
    std::vector<std::vector<float>> want;
    const auto got = runAgainstFused(batch, k, h, cases[caseOf[k]].seed, &want);
    ASSERT_EQ(got.size(), 1u);
    for (size_t e = 0; e < got[0].size(); ++e) {
      ASSERT_TRUE(sameBits(got[0][e], want[0][e])) << "element " << e << ": " << got[0][e] << " vs " << want[0][e];
    }
  }
}

// Row kernels (Note [Chain kernels]) on the host, each CTA as host threads: the named row chains (RMSNorm,
// softmax, log_softmax, GPT-2's attention scores in their strided layout) and random chains with reductions in
// random layouts, at every point of their spaces up to 256 threads, compute the interpreter's Fused mode within
// the sum order's and the libm's rounding, and write nothing between an output's rows.
TEST(ChainKernelHostTest, GivenRowChainsWhenEveryPointOfTheirSpacesRunsOnTheHostThenEachComputesTheFusedMode) {
  std::vector<SpaceCase> cases = {
      {"rms_norm bf16", rmsNormChain(DType::BFloat16, 1e-6), {}, 5, 512, 1},
      {"rms_norm fp16 without weight", rmsNormChain(DType::Float16, 1e-5, false), {}, 3, 96, 2},
      {"softmax fp32", softmaxChain(DType::Float32), {}, 4, 200, 3},
      {"log_softmax bf16", softmaxChain(DType::BFloat16, true), {}, 4, 64, 4},
      {"residual add + layer_norm bf16", residualLayerNormChain(DType::BFloat16, 1e-5), {}, 5, 768, 6},
      {"residual add + layer_norm fp32 without bias", residualLayerNormChain(DType::Float32, 1e-12, true, false), {},
       3, 96, 7},
      {"attention scores fp16", attentionSoftmaxChain(DType::Float16, 0.125), attentionSoftmaxLayout({2, 3, 4, 64}),
       24, 64, 5},
      // Note [Repeated columns]: per-channel weight and bias over a repeat vec divides or does not.
      {"group_norm + silu fp16 (repeat 12)", groupNormActChain(DType::Float16, 1e-5, OpKind::Silu),
       groupNormActLayout({2, 8, 12, 4}), 8, 24, 8},
      {"group_norm + silu bf16 (repeat 16, one sample)", groupNormActChain(DType::BFloat16, 1e-6, OpKind::Silu),
       groupNormActLayout({1, 16, 16, 8}), 8, 32, 9},
      {"group_norm + relu fp32 (repeat 9)", groupNormActChain(DType::Float32, 1e-5, OpKind::Relu),
       groupNormActLayout({3, 4, 9, 2}), 6, 18, 10},
      // Note [Eval BatchNorm in a chain]: no reduction, the row kernel for the repeated statistics.
      {"eval batch_norm + relu bf16 (one channel a row)", batchNormActChain(DType::BFloat16, 1e-5, OpKind::Relu),
       batchNormActLayout({2, 6, 16, 6}), 12, 16, 11},
      {"eval batch_norm + silu fp32 (rows of 9)", batchNormActChain(DType::Float32, 1e-5, OpKind::Silu),
       batchNormActLayout({3, 4, 9, 4}), 12, 9, 12}};
  for (uint64_t seed = 0; seed < 10; ++seed) {
    RandomChainOptions o;
    o.maxCols = 64;
    const ChainIR ir = randomChain(1000 + seed, o);
    if (!ir.hasReductions()) continue;
    cases.push_back({"random " + std::to_string(1000 + seed), ir, randomChainLayout(ir, {3, 2}, 64, seed), 6, 64, seed});
  }
  std::vector<size_t> caseOf;
  const std::vector<HostKernel> kernels = spaceKernels(cases, &caseOf);
  ASSERT_GE(kernels.size(), 40u);
  for (size_t c = 0; c < cases.size(); ++c) {
    EXPECT_NE(std::count(caseOf.begin(), caseOf.end(), c), 0) << cases[c].name << ": no point of its space runs here";
  }
  const HostKernelBatch batch(kernels);
  for (size_t k = 0; k < kernels.size(); ++k) {
    const HostKernel& h = kernels[k];
    SCOPED_TRACE(cases[caseOf[k]].name + " at " + h.params.describe() + ", layout " + layoutText(h.layout));
    std::vector<std::vector<float>> want;
    const auto got = runAgainstFused(batch, k, h, cases[caseOf[k]].seed, &want);
    for (size_t m = 0; m < got.size(); ++m) {
      const DType dtype = h.ir.node(h.ir.outputs()[m]).dtype;
      // The sum's order (a tree over the row's threads; the interpreter's in double) and libm move a
      // float32 result by a few ulps, a 16-bit one by at most a unit.
      ASSERT_TRUE(withinRelative({got[m]}, {want[m]}, dtype == DType::Float32 ? 0x1p-18 : 0x1p-7)) << "output " << m;
    }
  }
}

// Note [Division by a row value]: x / amax(x) (an order-free reduction, no libm) at every point of its space
// computes the Fused mode bit for bit, a multiplication by the row maximum's reciprocal (scaled for maxima whose
// reciprocal overflows: two subnormal rows), and a point rounding as ATen computes the AtenOrder mode's division;
// the two modes differ on these inputs, so either rule broken fails, and they stay within a rounding of each other.
TEST(ChainKernelHostTest, GivenADivisionByARowMaximumWhenEveryPointRunsOnTheHostThenFusedPointsMultiplyByTheReciprocal) {
  ChainIR ir;
  const int x = ir.addInput(DType::Float32, ShapeClass::Full);
  ir.markOutput(ir.addBinary(OpKind::Div, x, ir.addReduce(OpKind::Amax, x, /*keepdim=*/true)));
  const int64_t rows = 6, cols = 96;
  std::vector<SpaceCase> cases = {{"x / amax(x)", ir, {}, rows, cols, 11}};
  std::vector<size_t> caseOf;
  std::vector<HostKernel> kernels = spaceKernels(cases, &caseOf);
  ASSERT_GE(kernels.size(), 4u);
  const size_t fusedPoints = kernels.size();
  for (size_t k = 0; k < fusedPoints; ++k) {
    HostKernel aten = kernels[k];
    aten.params.atenRounding = true;
    kernels.push_back(aten);
  }
  std::vector<std::vector<float>> memory = randomChainInputs(ir, rows, cols, {}, 11);
  // The last two rows subnormal, their maxima below 2^-128 (whose reciprocals overflow): 2^-140 times 1..96 and
  // 2^-149 (the smallest float) times 1..96, where a plain product by the reciprocal would be infinite.
  for (int64_t c = 0; c < cols; ++c) {
    memory[0][static_cast<size_t>((rows - 2) * cols + c)] = std::ldexp(static_cast<float>(c + 1), -140);
    memory[0][static_cast<size_t>((rows - 1) * cols + c)] = std::ldexp(static_cast<float>(c + 1), -149);
  }
  const auto fused = interpretChain(ir, rows, cols, memory, EvalMode::Fused);
  const auto atenOrder = interpretChain(ir, rows, cols, memory, EvalMode::AtenOrder);
  size_t differ = 0;
  for (size_t e = 0; e < fused[0].size(); ++e) {
    differ += !sameBits(fused[0][e], atenOrder[0][e]);
    // One more rounding than the quotient, never an infinity where the quotient is finite.
    ASSERT_LE(std::fabs(fused[0][e] - atenOrder[0][e]), 0x1p-22f * std::fabs(atenOrder[0][e])) << "element " << e;
  }
  ASSERT_GT(differ, 0u) << "the inputs do not tell a quotient from a product by the reciprocal";
  const HostKernelBatch batch(kernels);
  for (size_t k = 0; k < kernels.size(); ++k) {
    SCOPED_TRACE(kernels[k].params.describe());
    std::vector<std::vector<bool>> written;
    const auto got = runOnHost(batch, k, kernels[k], memory, &written);
    const auto& want = kernels[k].params.atenRounding ? atenOrder : fused;
    ASSERT_EQ(got[0].size(), want[0].size());
    for (size_t e = 0; e < got[0].size(); ++e) {
      ASSERT_TRUE(sameBits(got[0][e], want[0][e])) << "element " << e << ": " << got[0][e] << " vs " << want[0][e];
    }
  }
}

}  // namespace
}  // namespace hotkernel::chain
