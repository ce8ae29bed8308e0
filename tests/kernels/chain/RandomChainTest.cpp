// Tests on seeded random chains (RandomChain.h): every chain validates, keys
// and round-trips through JSON deterministically, interprets in both modes
// within Note [Interpreter modes tolerance] (float32 chains bit for bit), and
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

namespace hotkernel::chain {
namespace {

constexpr uint64_t kChains = 2000;

bool allFloat32(const ChainIR& ir) {
  return std::all_of(ir.nodes().begin(), ir.nodes().end(), [](const Node& n) { return n.dtype == DType::Float32; });
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
    const bool exact = allFloat32(ir);
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

}  // namespace
}  // namespace hotkernel::chain
