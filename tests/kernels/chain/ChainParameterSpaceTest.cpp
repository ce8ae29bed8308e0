// Tests of a chain variant's parameter space (ChainParameterSpace.h): every
// point legal for the variant, the axes Note [Chain parameter space] names,
// and the variants it refuses.

#include "hotkernel/chain/ChainParameterSpace.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <tuple>
#include <utility>

#include "hotkernel/chain/NamedChains.h"
#include "hotkernel/runtime/Check.h"

namespace hotkernel::chain {
namespace {

struct Case {
  std::string name;
  ChainIR ir;
};

std::vector<Case> namedChains() {
  std::vector<Case> cases;
  for (DType d : {DType::BFloat16, DType::Float32}) {
    const std::string suffix = d == DType::Float32 ? " fp32" : " bf16";
    cases.push_back({"rms_norm" + suffix, rmsNormChain(d, 1e-6)});
    cases.push_back({"swiglu" + suffix, swigluChain(d)});
    cases.push_back({"new_gelu" + suffix, newGeluChain(d)});
    cases.push_back({"residual add + cast" + suffix, residualAddCastChain(d, DType::Float32)});
  }
  return cases;
}

TEST(ChainParameterSpaceTest, GivenTheNamedChainsAtModelShapesWhenEnumeratedThenEveryPointIsLegalAndDistinct) {
  const std::vector<std::tuple<int64_t, int64_t>> shapes = {{4096, 4096}, {1, 4096}, {16384, 8192}, {7, 96},
                                                           {3, 24},     {5, 1}};
  for (const Case& c : namedChains()) {
    for (const auto& [rows, cols] : shapes) {
      SCOPED_TRACE(c.name + " [" + std::to_string(rows) + ", " + std::to_string(cols) + "]");
      const std::vector<ChainKernelParams> space = chainParameterSpace(c.ir, rows, cols);
      ASSERT_FALSE(space.empty());
      std::set<std::string> seen;
      for (const ChainKernelParams& p : space) {
        EXPECT_NO_THROW(checkChainKernel(c.ir, p)) << p.describe();
        EXPECT_EQ(chainVariantProblem(c.ir, p, rows, cols), "") << p.describe();
        EXPECT_TRUE(seen.insert(p.describe()).second) << "twice: " << p.describe();
        if (!c.ir.hasReductions()) {
          EXPECT_EQ(p.rowsPerCta, 1);
          // Note [Unrolled elementwise chains]: 2 or 4 vectors a step at 128 or 256 threads.
          if (p.items != 0) {
            EXPECT_TRUE(p.items == 2 || p.items == 4) << p.describe();
            EXPECT_TRUE(p.threads == 128 || p.threads == 256) << p.describe();
          }
        }
      }
    }
  }
}

TEST(ChainParameterSpaceTest, GivenSixteenBitAndFloat32ChainsWhenEnumeratedThenVecIsSixteenBytesOfTheNarrowestTensor) {
  EXPECT_EQ(chainWidestVec(rmsNormChain(DType::BFloat16, 1e-6)), 8);
  EXPECT_EQ(chainWidestVec(rmsNormChain(DType::Float32, 1e-6)), 4);
  // bf16 in, float32 out: the bf16 tensors set the width.
  EXPECT_EQ(chainWidestVec(residualAddCastChain(DType::BFloat16, DType::Float32)), 8);
  const auto vecsOf = [](const std::vector<ChainKernelParams>& space) {
    std::set<int> vecs;
    for (const ChainKernelParams& p : space) vecs.insert(p.vec);
    return vecs;
  };
  EXPECT_EQ(vecsOf(chainParameterSpace(swigluChain(DType::BFloat16), 64, 4096)), (std::set<int>{4, 8}));
  EXPECT_EQ(vecsOf(chainParameterSpace(swigluChain(DType::Float32), 64, 4096)), (std::set<int>{2, 4}));
  // cols 4 * odd: only the widths that divide it; an odd count: vec 1.
  EXPECT_EQ(vecsOf(chainParameterSpace(swigluChain(DType::BFloat16), 64, 4100)), (std::set<int>{4}));
  EXPECT_EQ(vecsOf(chainParameterSpace(newGeluChain(DType::BFloat16), 64, 4097)), (std::set<int>{1}));
}

// Note [Unrolled elementwise chains]: the unrolled points at the widest vec only, after the one-vector points.
TEST(ChainParameterSpaceTest, GivenAnElementwiseChainWhenEnumeratedThenUnrolledPointsComeAtTheWidestVecAfterTheOthers) {
  const std::vector<ChainKernelParams> space = chainParameterSpace(swigluChain(DType::BFloat16), 4096, 8192);
  std::vector<ChainKernelParams> unrolled;
  size_t firstUnrolled = space.size(), lastPlain = 0;
  for (size_t k = 0; k < space.size(); ++k) {
    if (space[k].items > 0) {
      unrolled.push_back(space[k]);
      firstUnrolled = std::min(firstUnrolled, k);
    } else {
      lastPlain = k;
    }
  }
  const std::vector<ChainKernelParams> expected = {{128, 8, 1, 2}, {256, 8, 1, 2}, {128, 8, 1, 4}, {256, 8, 1, 4}};
  EXPECT_EQ(unrolled, expected);
  // vec 8's one-vector points, then its unrolled ones, then vec 4's.
  EXPECT_LT(firstUnrolled, lastPlain);
  EXPECT_EQ(space[lastPlain].vec, 4);
  EXPECT_EQ(space.size(), 12u);
  // A chain with Cat segments: the unrolled points folded only.
  for (const ChainKernelParams& p :
       chainParameterSpace(rotaryChain(DType::BFloat16, 128), 8 * 4096, 128, rotaryLayout({1, 8, 4096, 128}))) {
    if (p.items > 0) EXPECT_TRUE(p.fold) << p.describe();
  }
}

TEST(ChainParameterSpaceTest, GivenARowChainWhenEnumeratedThenThreadsFollowColsAndRegisterPointsHoldTheRow) {
  const ChainIR rms = rmsNormChain(DType::BFloat16, 1e-6);
  // 4096 bf16 columns: 512 vectors at vec 8, so up to 512 threads (1024 at vec 4); items hold the row.
  bool streaming = false, resident = false;
  for (const ChainKernelParams& p : chainParameterSpace(rms, 4096, 4096)) {
    EXPECT_LE(p.threads, 4096 / p.vec) << p.describe();
    EXPECT_EQ(p.rowsPerCta, 1) << p.describe();
    if (p.items == 0) streaming = true;
    if (p.items > 0) {
      resident = true;
      EXPECT_GE(static_cast<int64_t>(p.threads) * p.vec * p.items, 4096) << p.describe();
    }
  }
  EXPECT_TRUE(streaming);
  EXPECT_TRUE(resident);
  // Short rows: several rows a CTA, each at most a warp.
  bool multiRow = false;
  for (const ChainKernelParams& p : chainParameterSpace(rms, 1000, 128)) {
    if (p.rowsPerCta > 1) {
      multiRow = true;
      EXPECT_LE(p.threads / p.rowsPerCta, 32) << p.describe();
    }
  }
  EXPECT_TRUE(multiRow);
  // Rows far longer than 16 registers a thread can hold: streaming only (a cluster's slice too).
  for (const ChainKernelParams& p : chainParameterSpace(rms, 2, 1 << 20)) EXPECT_EQ(p.items, 0) << p.describe();
}

// Note [Rows split over a cluster]: few long rows (a VAE's group norm: 32 rows of 262,144) take clusters of 2, 4
// and 8 CTAs at the widest vec, each a legal point whose slice its registers hold; many rows (BiT's 1,024) or
// short ones (4,096 columns) take none, and the points before clusters are unchanged.
TEST(ChainParameterSpaceTest, GivenFewLongRowsWhenEnumeratedThenClustersSplitThemAndOtherVariantsTakeNone) {
  const GroupNormShape vae{1, 512, 128 * 128, 32};
  const ChainIR gn = groupNormActChain(DType::Float16, 1e-5, OpKind::Silu);
  const std::vector<ChainKernelParams> space =
      chainParameterSpace(gn, groupNormRows(vae), groupNormCols(vae), groupNormActLayout(vae));
  // The UNet's 640-channel block at 64 x 64 (64 rows of 10,240 vectors): slices a CTA's registers hold too.
  const GroupNormShape unet{2, 640, 64 * 64, 32};
  int resident = 0;
  for (const ChainKernelParams& p :
       chainParameterSpace(gn, groupNormRows(unet), groupNormCols(unet), groupNormActLayout(unet))) {
    if (p.cluster == 1 || p.items == 0) continue;
    ++resident;
    EXPECT_GE(int64_t{p.threads} * p.vec * p.items * p.cluster, groupNormCols(unet)) << p.describe();
    EXPECT_EQ(p.threads, 512) << p.describe();
    EXPECT_LE(p.vec * p.items, 32) << p.describe();
  }
  EXPECT_GT(resident, 0);
  std::set<int> clusters;
  for (const ChainKernelParams& p : space) {
    EXPECT_EQ(chainVariantProblem(gn, p, groupNormRows(vae), groupNormCols(vae), groupNormActLayout(vae)), "")
        << p.describe();
    if (p.cluster == 1) continue;
    clusters.insert(p.cluster);
    EXPECT_EQ(p.vec, 8) << p.describe();
    EXPECT_EQ(p.rowsPerCta, 1) << p.describe();
    EXPECT_EQ(p.items, 0) << p.describe() << ": a slice of 4,096 vectors or more spills in registers";
  }
  EXPECT_EQ(clusters, (std::set<int>{2, 4, 8}));
  EXPECT_LE(space.size(), 40u) << "the tuner tries the first 40 points";
  const ChainIR rms = rmsNormChain(DType::BFloat16, 1e-6);
  for (const auto& [rows, cols] : std::vector<std::pair<int64_t, int64_t>>{{1024, 25088}, {8, 4096}, {4096, 4096}}) {
    for (const ChainKernelParams& p : chainParameterSpace(rms, rows, cols)) EXPECT_EQ(p.cluster, 1) << p.describe();
  }
  // A cluster is a row kernel's of one row a CTA: refused elsewhere.
  EXPECT_THROW(checkChainKernel(rms, {256, 8, 2, 0, false, false, 2}), Error);
  EXPECT_THROW(checkChainKernel(rms, {256, 8, 1, 0, false, false, 3}), Error);
  EXPECT_THROW(checkChainKernel(swigluChain(DType::BFloat16), {256, 8, 1, 0, false, false, 2}), Error);
  EXPECT_NO_THROW(checkChainKernel(rms, {1024, 8, 1, 4, false, false, 8}));
  EXPECT_EQ((ChainKernelParams{1024, 8, 1, 4, false, false, 8}).describe(), "t1024 v8 r1 i4 c8");
  // Clusters are sm_90's: an older GPU's tuner leaves them out.
  EXPECT_TRUE(chainArchHasClusters("sm_90a"));
  EXPECT_TRUE(chainArchHasClusters("sm_100"));
  EXPECT_FALSE(chainArchHasClusters("sm_80"));
  EXPECT_FALSE(chainArchHasClusters("sm_89"));
  EXPECT_FALSE(chainArchHasClusters("compute_90"));
  // The grid: a cluster's CTAs for each row.
  EXPECT_EQ(chainLaunchGeometry(rms, {1024, 8, 1, 0, false, false, 4}, 32, 1 << 18).gridX, 128u);
}

// GPT-2's hidden size: 768 bf16 columns are 96 vectors at vec 8, more than two warps' worth of vectors and less
// than four: one row a CTA up to 128 threads, and several rows a CTA at 32 and 16 threads a row (3 and 6 vectors a
// thread), never 8 threads a row (12 vectors a thread).
TEST(ChainParameterSpaceTest, GivenRowsOfNinetySixVectorsWhenEnumeratedThenBothOneAndSeveralRowsACtaAreTried) {
  const std::vector<ChainKernelParams> space = chainParameterSpace(rmsNormChain(DType::BFloat16, 1e-6), 4096, 768);
  auto has = [&](int threads, int vec, int rowsPerCta, int items) {
    return std::find(space.begin(), space.end(), ChainKernelParams{threads, vec, rowsPerCta, items}) != space.end();
  };
  EXPECT_TRUE(has(128, 8, 1, 1));
  EXPECT_FALSE(has(256, 8, 1, 0));
  EXPECT_TRUE(has(128, 8, 4, 3));
  EXPECT_TRUE(has(256, 8, 8, 0));
  EXPECT_TRUE(has(128, 8, 8, 6));
  for (const ChainKernelParams& p : space) {
    if (p.rowsPerCta > 1) {
      EXPECT_LE(p.items, 8) << p.describe();
      EXPECT_GE(p.threads / p.rowsPerCta, 16) << p.describe();
    }
  }
}

// Note [Folded segments]: rotary's space holds each one-vector elementwise point folded too, right after it, and
// its unrolled points folded only; a chain without equal cat segments holds none.
TEST(ChainParameterSpaceTest, GivenRotaryWhenEnumeratedThenEachPointComesFoldedToo) {
  const ChainIR ir = rotaryChain(DType::BFloat16, 128);
  const std::vector<ChainKernelParams> space = chainParameterSpace(ir, 32 * 4096, 128, rotaryLayout({1, 32, 4096, 128}));
  size_t folded = 0, unrolled = 0;
  for (size_t k = 0; k < space.size(); ++k) {
    if (!space[k].fold) continue;
    if (space[k].items > 0) {  // Note [Unrolled elementwise chains]: folded only
      ++unrolled;
      continue;
    }
    ++folded;
    ASSERT_GT(k, 0u);
    ChainKernelParams twin = space[k];
    twin.fold = false;
    EXPECT_EQ(space[k - 1], twin);
  }
  EXPECT_EQ(folded * 2 + unrolled, space.size());
  EXPECT_EQ(unrolled, 4u);
  for (const ChainKernelParams& p : chainParameterSpace(swigluChain(DType::BFloat16), 4096, 8192)) EXPECT_FALSE(p.fold);
}

TEST(ChainParameterSpaceTest, GivenAbsurdVariantsWhenEnumeratedThenTheSpaceIsEmpty) {
  const ChainIR rms = rmsNormChain(DType::BFloat16, 1e-6);
  EXPECT_TRUE(chainParameterSpace(rms, 0, 4096).empty());
  EXPECT_TRUE(chainParameterSpace(rms, 4096, 0).empty());
  EXPECT_TRUE(chainParameterSpace(rms, -3, 4096).empty());
  // More rows than a grid holds, even at the most rows a CTA.
  EXPECT_TRUE(chainParameterSpace(rms, int64_t{1} << 40, 8).empty());
  // Rows over 2^30 columns (row kernels index in int).
  EXPECT_TRUE(chainParameterSpace(rms, 1, (int64_t{1} << 30) + 8).empty());
  // A chain of 19 inputs and outputs: over the kernel's argument list; 18 fit.
  ChainIR wide;
  int acc = wide.addInput(DType::Float32, ShapeClass::Full);
  for (int k = 0; k < 16; ++k) acc = wide.addBinary(OpKind::Add, acc, wide.addInput(DType::Float32, ShapeClass::Full));
  ChainIR fits = wide;
  fits.markOutput(acc);
  EXPECT_FALSE(chainParameterSpace(fits, 64, 64).empty());
  acc = wide.addBinary(OpKind::Add, acc, wide.addInput(DType::Float32, ShapeClass::Full));
  wide.markOutput(acc);
  EXPECT_TRUE(chainParameterSpace(wide, 64, 64).empty());
}

// Note [Eager rounding on request]: with eager rounding, the first points of a chain that computes a 16-bit value
// all round as eager does; a float32 chain's and the default's are the space's own.
TEST(ChainParameterSpaceTest, GivenEagerRoundingWhenTheFirstPointsAreTakenThenEachRoundsAsEagerWhereThatChangesTheKernel) {
  const ChainIR bf16 = rmsNormChain(DType::BFloat16, 1e-6);
  const ChainIR fp32 = rmsNormChain(DType::Float32, 1e-6);
  ASSERT_TRUE(atenRoundingApplies(bf16));
  ASSERT_FALSE(atenRoundingApplies(fp32));
  const std::vector<ChainKernelParams> space = chainParameterSpace(bf16, 4096, 4096);
  ASSERT_GT(space.size(), 3u);
  const std::vector<ChainKernelParams> eager = firstChainPoints(space, 3, bf16, true);
  ASSERT_EQ(eager.size(), 3u);
  for (size_t i = 0; i < eager.size(); ++i) {
    ChainKernelParams expected = space[i];
    expected.atenRounding = true;
    EXPECT_EQ(eager[i], expected) << eager[i].describe();
  }
  const std::vector<ChainKernelParams> fused = firstChainPoints(space, 3, bf16, false);
  EXPECT_EQ(fused, std::vector<ChainKernelParams>(space.begin(), space.begin() + 3));
  const std::vector<ChainKernelParams> fp32Space = chainParameterSpace(fp32, 4096, 4096);
  EXPECT_EQ(firstChainPoints(fp32Space, 2, fp32, true),
            std::vector<ChainKernelParams>(fp32Space.begin(), fp32Space.begin() + 2));
  EXPECT_EQ(firstChainPoints(space, space.size() + 5, bf16, true).size(), space.size());  // at most the space
}

TEST(ChainParameterSpaceTest, GivenEagerRoundingWhenACachedPointIsCheckedThenOnlyAPointRoundingAsEagerServesA16BitChain) {
  const ChainIR bf16 = swigluChain(DType::BFloat16);
  const ChainIR fp32 = swigluChain(DType::Float32);
  ChainKernelParams fusedPoint;
  ChainKernelParams atenPoint;
  atenPoint.atenRounding = true;
  EXPECT_FALSE(chainParamsRoundAsAsked(bf16, fusedPoint, true));  // tuned again
  EXPECT_TRUE(chainParamsRoundAsAsked(bf16, atenPoint, true));
  EXPECT_TRUE(chainParamsRoundAsAsked(fp32, fusedPoint, true));  // rounding changes nothing there
  EXPECT_TRUE(chainParamsRoundAsAsked(bf16, fusedPoint, false));  // the default serves both kinds
  EXPECT_TRUE(chainParamsRoundAsAsked(bf16, atenPoint, false));
}

}  // namespace
}  // namespace hotkernel::chain
