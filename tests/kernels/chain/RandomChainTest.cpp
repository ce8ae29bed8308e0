// Tests on seeded random chains (RandomChain.h): every chain validates, keys
// and round-trips through JSON deterministically, interprets in both modes
// within Note [Interpreter modes tolerance] (float32 chains bit for bit, unless
// one divides by a Row value: Note [Division by a row value]), and
// compiles with NVRTC; the generator covers the whole vocabulary.

#include "hotkernel/chain/RandomChain.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>

#include "ChainCompileUtil.h"
#include "hotkernel/chain/ChainInterpreter.h"
#include "hotkernel/chain/ChainJson.h"
#include "hotkernel/chain/ChainKey.h"
#include "hotkernel/chain/ChainLayout.h"
#include "hotkernel/chain/Rounding.h"
#include <map>
#include <utility>

namespace hotkernel::chain {
namespace {

constexpr uint64_t kChains = 2000;

bool allFloat32(const ChainIR& ir) {
  return std::all_of(ir.nodes().begin(), ir.nodes().end(), [](const Node& n) { return n.dtype == DType::Float32; });
}

// Note [Division by a row value]: the Fused mode multiplies by such a divisor's reciprocal.
bool dividesByARowValue(const ChainIR& ir) {
  return std::any_of(ir.nodes().begin(), ir.nodes().end(), [&](const Node& n) {
    return n.op == OpKind::Div && ir.node(n.operands[1]).shape == ShapeClass::Row;
  });
}

TEST(RandomChainTest, GivenSeedsWhenChainsAreDrawnThenEachIsValidDeterministicAndRoundTrips) {
  std::set<std::string> keys;
  for (uint64_t seed = 0; seed < kChains; ++seed) {
    const ChainIR ir = randomChain(seed);
    ASSERT_NO_THROW(ir.validate()) << seed;
    ASSERT_EQ(ir, randomChain(seed)) << seed;
    ASSERT_LE(ir.inputs().size() + ir.outputs().size(), 10u) << seed;
    const ChainKey key = chainKey(ir);
    ASSERT_EQ(chainFromJsonText(chainToJson(ir).dump()), ir) << seed << "\n" << key.text;
    keys.insert(key.sha256);
  }
  EXPECT_GT(keys.size(), kChains * 9 / 10) << "the seeds draw mostly the same chains";
}

TEST(RandomChainTest, GivenManyChainsThenEveryOpShapeAndDtypeOccurs) {
  std::set<OpKind> ops;
  std::set<ShapeClass> shapes;
  std::set<DType> dtypes;
  std::set<double> exponents;
  bool alpha = false, flat = false;
  for (uint64_t seed = 0; seed < kChains; ++seed) {
    const ChainIR ir = randomChain(seed);
    for (const Node& n : ir.nodes()) {
      ops.insert(n.op);
      shapes.insert(n.shape);
      dtypes.insert(n.dtype);
      if (n.op == OpKind::PowScalar) exponents.insert(n.scalar);
      alpha = alpha || ((n.op == OpKind::Add || n.op == OpKind::Sub) && n.scalar != 1.0);
      flat = flat || n.shape == ShapeClass::RowFlat;
    }
  }
  for (int op = 0; op <= static_cast<int>(OpKind::Amax); ++op) {
    EXPECT_EQ(ops.count(static_cast<OpKind>(op)), 1u) << opInfo(static_cast<OpKind>(op)).name << " never drawn";
  }
  EXPECT_EQ(shapes.size(), 5u);
  EXPECT_EQ(dtypes.size(), 3u);
  EXPECT_EQ(exponents.size(), 7u);
  EXPECT_TRUE(alpha);
  EXPECT_TRUE(flat);
}

TEST(RandomChainTest, GivenRandomChainsWhenInterpretedInBothModesThenTheyAgreeWithinTheDocumentedTolerance) {
  double worst = 0.0;
  int exactChains = 0, differingChains = 0;
  for (uint64_t seed = 0; seed < kChains; ++seed) {
    const ChainIR ir = randomChain(seed);
    const int64_t rows = 1 + static_cast<int64_t>(seed % 4), cols = 8 * (1 + static_cast<int64_t>(seed % 8));
    const auto inputs = randomChainInputs(ir, rows, cols, seed);
    const auto aten = interpretChain(ir, rows, cols, inputs, EvalMode::AtenOrder);
    const auto again = interpretChain(ir, rows, cols, inputs, EvalMode::AtenOrder);
    const auto fused = interpretChain(ir, rows, cols, inputs, EvalMode::Fused);
    const bool exact = allFloat32(ir) && !dividesByARowValue(ir);
    bool differs = false;
    for (size_t k = 0; k < aten.size(); ++k) {
      ASSERT_EQ(std::memcmp(aten[k].data(), again[k].data(), aten[k].size() * sizeof(float)), 0) << seed;
      for (size_t e = 0; e < aten[k].size(); ++e) {
        const float a = aten[k][e], f = fused[k][e];
        ASSERT_TRUE(std::isfinite(a) && std::isfinite(f)) << "seed " << seed << " output " << k << ": " << a << " / "
                                                          << f << "\n" << chainKey(ir).text;
        if (exact) {
          ASSERT_EQ(std::memcmp(&a, &f, sizeof a), 0) << "float32 chain, seed " << seed;
          continue;
        }
        const double ratio = std::fabs(static_cast<double>(a) - f) / (1.0 + std::fabs(static_cast<double>(f)));
        worst = std::max(worst, ratio);
        differs = differs || a != f;
        ASSERT_LE(ratio, 0x1p-4) << "seed " << seed << " output " << k << " element " << e << ": aten " << a
                                 << ", fused " << f << "\n" << chainKey(ir).text;
      }
    }
    exactChains += exact;
    differingChains += differs;
  }
  std::printf("random chains: %d float32 (bitwise), %d where the modes differ, worst |a - f| / (1 + |f|) = %.3g\n",
              exactChains, differingChains, worst);
  EXPECT_GT(exactChains, 0);
  EXPECT_GT(differingChains, static_cast<int>(kChains) / 10) << "the modes hardly differ: is rounding emulated?";
}

TEST(RandomChainTest, GivenRandomChainsWhenGeneratedAndCompiledThenEachIsACubin) {
  SKIP_WITHOUT_NVRTC();
  std::vector<testutil::ChainCompileJob> jobs;
  for (uint64_t seed = 1000; jobs.size() < 24; ++seed) {
    const ChainIR ir = randomChain(seed);
    const bool rows = ir.hasReductions();
    // Points across the space: streaming and resident rows, several rows a CTA, wide and narrow vectors.
    const ChainKernelParams p = rows ? (seed % 3 == 0   ? ChainKernelParams{256, 4, 1, 0}
                                        : seed % 3 == 1 ? ChainKernelParams{128, 2, 1, 4}
                                                        : ChainKernelParams{128, 8, 8, 2})
                                     : ChainKernelParams{256, 1 << (seed % 4)};
    jobs.push_back({"random_" + std::to_string(seed), ir, p});
  }
  const auto results = testutil::compileChains(jobs);
  for (size_t i = 0; i < jobs.size(); ++i) {
    EXPECT_TRUE(results[i].ok) << jobs[i].name << " " << jobs[i].params.describe() << ": " << results[i].error;
  }
}

// The reference for a chain in a layout, computed here without the
// interpreter's layout or cat code: at output column c, every Cat is the part
// that holds c, so the chain becomes a width-free chain over one column whose
// inputs are read from memory at (row offset by the strides) + (c - shift).
class ColumnReference {
 public:
  ColumnReference(const ChainIR& ir, int64_t rows, int64_t cols, const ChainLayout& layout,
                  const std::vector<std::vector<float>>& inputs)
      : ir_(ir), rows_(rows), cols_(cols), layout_(layout), inputs_(inputs) {
    const std::vector<int> nodes = ir.inputs();
    size_t arg = 0;
    for (size_t k = 0; k < nodes.size(); ++k) {
      inputIndex_[nodes[k]] = k;
      if (ir.node(nodes[k]).shape != ShapeClass::Scalar) argOf_[nodes[k]] = arg++;
    }
  }

  // Output `m`'s value at (row, c) for every row (a Row output's at c = 0).
  std::vector<float> column(size_t m, int64_t c, EvalMode mode) {
    ChainIR one;
    std::vector<std::vector<float>> values;
    std::map<std::pair<int, int64_t>, int> memo;
    const int out = resolve(ir_.outputs()[m], 0, c, one, values, memo);
    one.markOutput(out);
    return interpretChain(one, rows_, 1, values, mode)[0];
  }

 private:
  int resolve(int o, int64_t shift, int64_t c, ChainIR& one, std::vector<std::vector<float>>& values,
              std::map<std::pair<int, int64_t>, int>& memo) {
    const auto key = std::make_pair(o, shift);
    if (auto it = memo.find(key); it != memo.end()) return it->second;
    const Node& n = ir_.node(o);
    int result = -1;
    switch (opInfo(n.op).category) {
      case OpCategory::Leaf:
        if (n.op == OpKind::Constant) {
          result = one.addConstant(n.scalar);
        } else {
          result = one.addInput(n.dtype, n.shape);
          values.push_back(read(o, c - shift));
        }
        break;
      case OpCategory::Unary:
        result = one.addUnary(n.op, resolve(n.operands[0], shift, c, one, values, memo), n.scalar);
        break;
      case OpCategory::Cast:
        result = one.addCast(resolve(n.operands[0], shift, c, one, values, memo), n.dtype);
        break;
      case OpCategory::Binary: {
        const int a = resolve(n.operands[0], shift, c, one, values, memo);
        const int b = resolve(n.operands[1], shift, c, one, values, memo);
        result = one.addBinary(n.op, a, b, n.op == OpKind::Add || n.op == OpKind::Sub ? n.scalar : 1.0);
        break;
      }
      case OpCategory::Join: {
        int64_t offset = 0;
        for (int part : n.operands) {
          const int64_t e = ir_.node(part).cols;
          if (c - shift < offset + e) {
            result = resolve(part, shift + offset, c, one, values, memo);
            // cat converts to its dtype (exactly: a promotion); the cast says so to the one-column chain.
            if (one.node(result).dtype != n.dtype) result = one.addCast(result, n.dtype);
            break;
          }
          offset += e;
        }
        break;
      }
      case OpCategory::Reduction:
        ADD_FAILURE() << "the column reference takes chains without reductions";
        break;
    }
    memo[key] = result;
    return result;
  }

  // Input `o`'s values at column c of every row, from its memory.
  std::vector<float> read(int o, int64_t c) const {
    const Node& n = ir_.node(o);
    const std::vector<float>& buffer = inputs_[inputIndex_.at(o)];
    if (n.shape == ShapeClass::Scalar || n.shape == ShapeClass::Row) return buffer;
    if (n.shape == ShapeClass::Column) return {buffer[static_cast<size_t>(c)]};
    const std::vector<int64_t> dims = layoutRowDims(layout_, rows_);
    const std::vector<int64_t> strides = layoutStrides(ir_, layout_, argOf_.at(o), rows_, cols_);
    std::vector<float> v(static_cast<size_t>(rows_));
    for (int64_t r = 0; r < rows_; ++r) {
      int64_t offset = 0, rest = r;
      for (size_t d = dims.size(); d-- > 0;) {
        offset += (rest % dims[d]) * strides[d];
        rest /= dims[d];
      }
      v[static_cast<size_t>(r)] = buffer[static_cast<size_t>(offset + c)];
    }
    return v;
  }

  const ChainIR& ir_;
  int64_t rows_, cols_;
  const ChainLayout& layout_;
  const std::vector<std::vector<float>>& inputs_;
  std::map<int, size_t> inputIndex_, argOf_;
};

TEST(RandomChainTest, GivenRandomCatChainsInRandomLayoutsWhenInterpretedThenTheyEqualTheColumnReference) {
  int cats = 0, nested = 0, broadcasts = 0;
  for (uint64_t seed = 0; seed < 600; ++seed) {
    RandomChainOptions o;
    o.reductions = false;
    o.catWidth = 16 + 8 * static_cast<int64_t>(seed % 4);
    o.maxInputs = 4;
    const ChainIR ir = randomChain(seed, o);
    const int64_t cols = o.catWidth;
    const std::vector<int64_t> dims = {2, 1 + static_cast<int64_t>(seed % 3), 3};
    const int64_t rows = dims[0] * dims[1] * dims[2];
    const ChainLayout layout = randomChainLayout(ir, dims, cols, seed);
    const auto inputs = randomChainInputs(ir, rows, cols, layout, seed);
    ColumnReference reference(ir, rows, cols, layout, inputs);
    for (const EvalMode mode : {EvalMode::AtenOrder, EvalMode::Fused}) {
      const auto got = interpretChain(ir, rows, cols, layout, inputs, mode);
      for (size_t m = 0; m < ir.outputs().size(); ++m) {
        const Node& out = ir.node(ir.outputs()[m]);
        const int64_t width = out.shape == ShapeClass::Row ? 1 : cols;
        for (int64_t c = 0; c < width; ++c) {
          const std::vector<float> want = reference.column(m, c, mode);
          for (int64_t r = 0; r < (out.shape == ShapeClass::Column ? 1 : rows); ++r) {
            const float g = got[m][static_cast<size_t>(out.shape == ShapeClass::Full     ? r * cols + c
                                                       : out.shape == ShapeClass::Column ? c
                                                                                         : r)];
            const float w = want[static_cast<size_t>(out.shape == ShapeClass::Column ? 0 : r)];
            ASSERT_EQ(std::memcmp(&g, &w, sizeof g), 0)
                << "seed " << seed << " " << evalModeName(mode) << " output " << m << " (" << r << ", " << c
                << "): " << g << " vs " << w << "\n" << chainKey(ir).text << layoutText(layout);
          }
        }
      }
    }
    for (const Node& n : ir.nodes()) {
      cats += n.op == OpKind::Cat;
      if (n.op == OpKind::Cat) {
        for (int part : n.operands) nested += ir.node(part).op == OpKind::Cat;
      }
    }
    for (const std::vector<int64_t>& s : layout.strides) broadcasts += std::count(s.begin(), s.end(), 0) > 0;
  }
  EXPECT_GT(cats, 100);
  EXPECT_GT(nested, 10);
  EXPECT_GT(broadcasts, 50);
}

TEST(RandomChainTest, GivenRandomChainsWithReductionsInRandomLayoutsWhenInterpretedThenTheyEqualTheGatheredContiguousChain) {
  for (uint64_t seed = 0; seed < 300; ++seed) {
    const ChainIR ir = randomChain(seed);
    const int64_t cols = 16;
    const std::vector<int64_t> dims = {3, 2 + static_cast<int64_t>(seed % 2)};
    const int64_t rows = dims[0] * dims[1];
    const ChainLayout layout = randomChainLayout(ir, dims, cols, seed);
    const auto memory = randomChainInputs(ir, rows, cols, layout, seed);
    // Gather each full input's [rows, cols] values by its strides, here.
    std::vector<std::vector<float>> values = memory;
    size_t arg = 0;
    for (size_t k = 0; k < ir.inputs().size(); ++k) {
      const Node& n = ir.node(ir.inputs()[k]);
      if (n.shape == ShapeClass::Scalar) continue;
      if (n.shape == ShapeClass::Full && !layout.contiguous()) {
        values[k].assign(static_cast<size_t>(rows * cols), 0.0f);
        for (int64_t i0 = 0; i0 < dims[0]; ++i0) {
          for (int64_t i1 = 0; i1 < dims[1]; ++i1) {
            const std::vector<int64_t> s = layoutStrides(ir, layout, arg, rows, cols);
            // A normalized layout may have merged the two dims into one.
            const int64_t offset = s.size() == 2 ? i0 * s[0] + i1 * s[1] : (i0 * dims[1] + i1) * s[0];
            for (int64_t c = 0; c < cols; ++c) {
              values[k][static_cast<size_t>((i0 * dims[1] + i1) * cols + c)] = memory[k][static_cast<size_t>(offset + c)];
            }
          }
        }
      }
      ++arg;
    }
    for (const EvalMode mode : {EvalMode::AtenOrder, EvalMode::Fused}) {
      const auto got = interpretChain(ir, rows, cols, layout, memory, mode);
      const auto want = interpretChain(ir, rows, cols, values, mode);
      ASSERT_EQ(got.size(), want.size());
      for (size_t m = 0; m < got.size(); ++m) {
        ASSERT_EQ(got[m].size(), want[m].size());
        ASSERT_EQ(std::memcmp(got[m].data(), want[m].data(), got[m].size() * sizeof(float)), 0)
            << "seed " << seed << " output " << m << "\n" << chainKey(ir).text << layoutText(layout);
      }
    }
  }
}

TEST(RandomChainTest, GivenRandomCatChainsInRandomLayoutsWhenGeneratedAndCompiledThenEachIsACubin) {
  SKIP_WITHOUT_NVRTC();
  std::vector<testutil::ChainCompileJob> jobs;
  for (uint64_t seed = 500; jobs.size() < 12; ++seed) {
    RandomChainOptions o;
    o.catWidth = 64;
    o.reductions = seed % 2 == 0;  // a row kernel in a layout; cats only without reductions
    if (o.reductions) o.catWidth = 0;
    const ChainIR ir = randomChain(seed, o);
    const ChainLayout layout = randomChainLayout(ir, {4, 3, 5}, 64, seed);
    const ChainKernelParams p = ir.hasReductions() ? ChainKernelParams{128, 8, 1, seed % 4 == 0 ? 0 : 1}
                                                   : ChainKernelParams{256, 8, 1, 0};
    jobs.push_back({"random_layout_" + std::to_string(seed), ir, p, "sm_90a", layout});
  }
  const auto results = testutil::compileChains(jobs);
  for (size_t i = 0; i < jobs.size(); ++i) {
    EXPECT_TRUE(results[i].ok) << jobs[i].name << " " << jobs[i].params.describe() << ": " << results[i].error;
  }
}

}  // namespace
}  // namespace hotkernel::chain
