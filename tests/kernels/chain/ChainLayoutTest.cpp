// Tests of chain layouts (ChainLayout.h) and of what carries them: the
// variant string, the entry params (version 2, version 1 read back), the
// parameter space and the plan's launch guard (spans, not classes).

#include "hotkernel/chain/ChainLayout.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "hotkernel/chain/ChainCodegen.h"
#include "hotkernel/chain/ChainEntry.h"
#include "hotkernel/chain/ChainKey.h"
#include "hotkernel/chain/ChainParameterSpace.h"
#include "hotkernel/chain/ChainPlan.h"
#include "hotkernel/chain/ChainVariant.h"
#include "hotkernel/chain/NamedChains.h"
#include "hotkernel/runtime/Check.h"
#include "hotkernel/runtime/Hash.h"

namespace hotkernel::chain {
namespace {

const RotaryShape kQ{1, 32, 4096, 128};

ChainVariant rotaryVariant(const RotaryShape& shape = kQ) {
  ChainVariant v;
  v.ir = rotaryChain(DType::BFloat16, shape.headDim);
  v.rows = rotaryRows(shape);
  v.cols = shape.headDim;
  v.layout = rotaryLayout(shape);
  return v;
}

TEST(ChainLayoutTest, GivenLayoutsWhenNormalizedThenUnitDimsGoMergeableDimsMergeAndContiguousIsEmpty) {
  const ChainIR swiglu = swigluChain(DType::BFloat16);  // args: gate, up, out
  // [2, 3, 5] rows of 64, all dense: contiguous, so the empty layout.
  ChainLayout dense{{2, 3, 5}, {{960, 320, 64}, {960, 320, 64}, {960, 320, 64}}};
  EXPECT_EQ(chainLayoutProblem(swiglu, 30, 64, dense), "");
  EXPECT_TRUE(normalizeLayout(swiglu, 30, 64, dense).contiguous());
  // A unit dim goes; padded rows of `up` (pitch 72) merge over the leading dims but are no contiguous layout.
  ChainLayout padded{{2, 1, 15}, {{960, 0, 64}, {1080, 7, 72}, {960, 960, 64}}};
  const ChainLayout n = normalizeLayout(swiglu, 30, 64, padded);
  EXPECT_EQ(n.rowDims, std::vector<int64_t>{30});
  EXPECT_EQ(n.strides, (std::vector<std::vector<int64_t>>{{64}, {72}, {64}}));
  EXPECT_EQ(layoutText(n), "30:64|72|64");
  EXPECT_EQ(layoutSpan(swiglu, n, 1, 30, 64), 29 * 72 + 64);
  EXPECT_EQ(layoutRowOffset(n.rowDims, n.strides[1], 3), 3 * 72);
  // A broadcast dim keeps the dims apart.
  ChainLayout broadcast{{4, 8}, {{0, 64}, {512, 64}, {512, 64}}};
  EXPECT_EQ(normalizeLayout(swiglu, 32, 64, broadcast).rowDims, (std::vector<int64_t>{4, 8}));
  EXPECT_EQ(layoutRowOffset({4, 8}, {0, 64}, 13), 5 * 64);
  // JSON round trip.
  EXPECT_EQ(layoutFromJson(layoutToJson(n), "layout"), n);
}

TEST(ChainLayoutTest, GivenInvalidLayoutsWhenCheckedThenTheProblemNamesIt) {
  const ChainIR swiglu = swigluChain(DType::BFloat16);
  auto problem = [&](ChainLayout l, int64_t rows = 32) { return chainLayoutProblem(swiglu, rows, 64, l); };
  EXPECT_NE(problem({{4, 8}, {{0, 64}, {512, 64}}}).find("strides of 2 arguments, the chain has 3"), std::string::npos);
  EXPECT_NE(problem({{4, 8}, {{0, 64}, {512, 64}, {512, 64}}}, 31).find("hold 32 rows, the variant 31"),
            std::string::npos);
  EXPECT_NE(problem({{4, 8}, {{0, 64}, {512, 64}, {0, 64}}}).find("an output whose rows overlap"), std::string::npos);
  EXPECT_NE(problem({{4, 8}, {{0, 64}, {512, 64}, {64, 32}}}).find("an output whose rows overlap"), std::string::npos);
  EXPECT_EQ(problem({{4, 8}, {{0, 64}, {512, 64}, {64, 256}}}), "");  // dims swapped: disjoint
  EXPECT_NE(problem({{4, 8}, {{-64, 64}, {512, 64}, {512, 64}}}).find("outside [0, 2^48]"), std::string::npos);
  EXPECT_NE(problem({{1, 1, 1, 2, 2, 2, 4}, {{}, {}, {}}}).find("at most 6"), std::string::npos);
  // A column value's strides are 0, a row value's dense.
  const ChainIR rms = rmsNormChain(DType::BFloat16, 1e-6);  // args: x, weight (column), out
  EXPECT_NE(chainLayoutProblem(rms, 32, 64, {{4, 8}, {{512, 64}, {0, 64}, {512, 64}}}).find("column value"),
            std::string::npos);
  EXPECT_THROW(normalizeLayout(swiglu, 32, 64, {{4, 8}, {{0, 64}, {512, 64}, {0, 64}}}), Error);
}

// Note [Transposed layouts]: column strides other than 1 only for a lone copy's input, its innermost row dim at
// stride 1; normalization keeps them (and drops a list of ones); spans, text, JSON and entries carry them.
TEST(ChainLayoutTest, GivenColumnStridesWhenCheckedAndNormalizedThenOnlyATransposedCopysInputHasThem) {
  const ChainIR copy = relayoutCopyChain(DType::Float16);
  const RotaryShape shape{2, 3, 5, 8};  // b, h, s, d: k^T is [2, 3, 8, 5], rows 48, cols 5
  const ChainLayout kt = headTransposeCopyLayout(shape, 3);
  ASSERT_TRUE(kt.transposed());
  EXPECT_EQ(kt.rowDims, (std::vector<int64_t>{2, 24}));  // heads and head dim merge: stride 8 = 1 * 8 in k^T
  EXPECT_EQ(kt.strides, (std::vector<std::vector<int64_t>>{{360, 1}, {120, 5}}));
  EXPECT_EQ(kt.colStrides, (std::vector<int64_t>{72, 1}));
  EXPECT_EQ(chainLayoutProblem(copy, 48, 5, kt), "");
  EXPECT_EQ(layoutText(kt), "2x24:360,1@72|120,5@1");
  // The input spans its last row plus four columns of 72; the copy its 48 rows of 5.
  EXPECT_EQ(layoutSpan(copy, kt, 0, 48, 5), 360 + 23 + 4 * 72 + 1);
  EXPECT_EQ(layoutSpan(copy, kt, 1, 48, 5), 240);
  EXPECT_EQ(layoutColStride(kt, 0), 72);
  EXPECT_EQ(layoutColStride(ChainLayout{}, 0), 1);
  EXPECT_EQ(layoutFromJson(layoutToJson(kt), "layout"), kt);
  EXPECT_FALSE(layoutToJson(headViewCopyLayout(shape, 3)).contains("colStrides"));
  nlohmann::json empty = layoutToJson(kt);
  empty["colStrides"] = nlohmann::json::array();
  EXPECT_THROW(layoutFromJson(empty, "layout"), Error);
  // Column strides of 1 everywhere normalize to none: the plain layout.
  ChainLayout ones = headViewCopyLayout(shape, 3);
  ones.colStrides = {1, 1};
  EXPECT_EQ(normalizeLayout(copy, 30, 8, ones), headViewCopyLayout(shape, 3));
  auto problem = [&](const ChainIR& ir, ChainLayout l) { return chainLayoutProblem(ir, 48, 5, l); };
  ChainLayout outputStrided = kt;
  outputStrided.colStrides = {72, 2};
  EXPECT_NE(problem(copy, outputStrided).find("is an output with column stride 2"), std::string::npos);
  ChainLayout count = kt;
  count.colStrides = {72};
  EXPECT_NE(problem(copy, count).find("column strides of 1 arguments, the chain has 2"), std::string::npos);
  ChainLayout zero = kt;
  zero.colStrides = {0, 1};
  EXPECT_NE(problem(copy, zero).find("column stride 0 outside [1, 2^48]"), std::string::npos);
  ChainLayout gathered = kt;
  gathered.strides[0] = {360, 2};
  EXPECT_NE(problem(copy, gathered).find("stride 1 in its innermost row dim"), std::string::npos);
  ChainIR negated;
  negated.markOutput(negated.addUnary(OpKind::Neg, negated.addInput(DType::Float16, ShapeClass::Full)));
  EXPECT_NE(problem(negated, kt).find("only a lone copy (a transpose) reads such a value"), std::string::npos);
  // The variant string and an entry name the column strides; a plain layout's entry is refused for it.
  const ChainVariant v{copy, 48, 5, 0, kt};
  EXPECT_NE(chainVariantString(v).find(";layout=2x24:360,1@72|120,5@1;"), std::string::npos);
  const ChainKernelParams tile{256, 1, 32, 0};
  const nlohmann::json j = chainEntryParams(v, tile);
  EXPECT_EQ(readChainEntry(j.dump(), v), tile);
  ChainVariant plain = v;
  plain.layout.colStrides.clear();
  EXPECT_THROW(readChainEntry(j.dump(), plain), Error);
}

// Note [Repeated columns]: a group norm's per-channel weight and bias repeat over HxW columns at row strides
// (0, C / G); normalization keeps the repeats (and drops a list of ones), the span is the [C] tensor, text, JSON,
// variant strings and entries carry them, and every misuse is named.
TEST(ChainLayoutTest, GivenColumnRepeatsWhenCheckedAndNormalizedThenOnlyAFullInputRepeatsDividingItsExtent) {
  const ChainIR gn = groupNormActChain(DType::Float16, 1e-5, OpKind::Silu);  // args: x, weight, bias, out
  const GroupNormShape shape{2, 320, 4096, 32};
  const int64_t rows = groupNormRows(shape), cols = groupNormCols(shape);
  EXPECT_EQ(rows, 64);
  EXPECT_EQ(cols, 40960);
  const ChainLayout l = groupNormActLayout(shape);
  ASSERT_TRUE(l.repeated());
  EXPECT_FALSE(l.transposed());
  EXPECT_EQ(l.rowDims, (std::vector<int64_t>{2, 32}));
  EXPECT_EQ(l.strides, (std::vector<std::vector<int64_t>>{{32 * cols, cols}, {0, 10}, {0, 10}, {32 * cols, cols}}));
  EXPECT_EQ(l.colRepeats, (std::vector<int64_t>{1, 4096, 4096, 1}));
  EXPECT_EQ(chainLayoutProblem(gn, rows, cols, l), "");
  EXPECT_EQ(layoutText(l), "2x32:1310720,40960/1|0,10/4096|0,10/4096|1310720,40960/1");
  EXPECT_EQ(layoutSpan(gn, l, 1, rows, cols), 320);  // the weight: C elements
  EXPECT_EQ(layoutSpan(gn, l, 0, rows, cols), 2 * 320 * 4096);
  EXPECT_EQ(layoutColRepeat(l, 1), 4096);
  EXPECT_EQ(layoutColRepeat(l, 0), 1);
  EXPECT_EQ(layoutColRepeat(ChainLayout{}, 1), 1);
  EXPECT_EQ(layoutFromJson(layoutToJson(l), "layout"), l);
  EXPECT_FALSE(layoutToJson(rotaryLayout(kQ)).contains("colRepeats"));
  nlohmann::json empty = layoutToJson(l);
  empty["colRepeats"] = nlohmann::json::array();
  EXPECT_THROW(layoutFromJson(empty, "layout"), Error);
  // One sample: the batch dim goes, the groups stay apart from the columns.
  const ChainLayout one = groupNormActLayout({1, 64, 49, 32});
  EXPECT_EQ(one.rowDims, std::vector<int64_t>{32});
  EXPECT_EQ(one.strides[1], std::vector<int64_t>{2});
  // Repeats of 1 everywhere normalize to none.
  ChainLayout ones = groupNormActLayout(shape);
  ones.colRepeats = {1, 1, 1, 1};
  ones.strides[1] = ones.strides[2] = {0, 0};  // now a broadcast Full value over the rows
  EXPECT_TRUE(normalizeLayout(gn, rows, cols, ones).colRepeats.empty());
  auto problem = [&](ChainLayout bad) { return chainLayoutProblem(gn, rows, cols, bad); };
  ChainLayout output = l;
  output.colRepeats = {1, 4096, 4096, 2};
  EXPECT_NE(problem(output).find("is an output with column repeat 2"), std::string::npos);
  ChainLayout count = l;
  count.colRepeats = {1, 4096};
  EXPECT_NE(problem(count).find("column repeats of 2 arguments, the chain has 4"), std::string::npos);
  ChainLayout zero = l;
  zero.colRepeats = {0, 4096, 4096, 1};
  EXPECT_NE(problem(zero).find("column repeat 0 outside [1, 2^30]"), std::string::npos);
  ChainLayout odd = l;
  odd.colRepeats = {1, 4095, 4096, 1};
  EXPECT_NE(problem(odd).find("does not divide its extent 40960"), std::string::npos);
  ChainLayout transposed = l;
  transposed.colStrides = {2, 1, 1, 1};
  EXPECT_FALSE(problem(transposed).empty());
  const ChainIR rms = rmsNormChain(DType::BFloat16, 1e-6);  // args: x, weight (column), out
  EXPECT_NE(chainLayoutProblem(rms, 4, 64, {{4}, {{64}, {0}, {64}}, {}, {1, 2, 1}}).find("only a Full input repeats"),
            std::string::npos);
  EXPECT_NE(chainLayoutProblem(gn, rows, cols, ChainLayout{{}, {}, {}, {1, 1, 1, 1}}).find("lists no strides"),
            std::string::npos);
  // The variant string and an entry name the repeats; the layout without them is another variant.
  const ChainVariant v{gn, rows, cols, 0, l};
  EXPECT_NE(chainVariantString(v).find("/4096"), std::string::npos);
  const ChainKernelParams p{1024, 8, 1, 0};
  EXPECT_EQ(chainVariantProblem(v.ir, p, v.rows, v.cols, v.layout), "");
  const nlohmann::json j = chainEntryParams(v, p);
  EXPECT_EQ(readChainEntry(j.dump(), v), p);
  ChainVariant plain = v;
  plain.layout.colRepeats.clear();
  EXPECT_THROW(readChainEntry(j.dump(), plain), Error);
  // A repeated input's loads are element loads: its row stride 10 need not be a multiple of vec 8.
  const std::vector<ChainKernelParams> space = chainParameterSpace(v.ir, v.rows, v.cols, v.layout);
  ASSERT_FALSE(space.empty());
  EXPECT_EQ(space.front().vec, 8);
  // A chain without a reduction that reads a repeated input runs the row kernel (chainUsesRowKernel): its space
  // holds row points only, one row a CTA, at most 4 items.
  ChainIR scaled;
  scaled.markOutput(scaled.addBinary(OpKind::Mul, scaled.addInput(DType::Float16, ShapeClass::Full),
                                     scaled.addInput(DType::Float16, ShapeClass::Full)));
  const ChainLayout scaledLayout{{2, 32}, {{32 * cols, cols}, {0, 10}, {32 * cols, cols}}, {}, {1, 4096, 1}};
  EXPECT_EQ(chainLayoutProblem(scaled, rows, cols, scaledLayout), "");
  EXPECT_TRUE(chainUsesRowKernel(scaled, scaledLayout));
  EXPECT_FALSE(chainUsesRowKernel(scaled, ChainLayout{}));
  const std::vector<ChainKernelParams> rowPoints = chainParameterSpace(scaled, rows, cols, scaledLayout);
  ASSERT_FALSE(rowPoints.empty());
  for (const ChainKernelParams& p : rowPoints) {
    EXPECT_EQ(p.rowsPerCta, 1) << p.describe();
    EXPECT_LE(p.items, 4) << p.describe();
    EXPECT_EQ(chainLaunchGeometry(scaled, p, rows, cols, scaledLayout).gridX, static_cast<unsigned>(rows)) << p.describe();
  }
  EXPECT_NE(generateChainSource(scaled, rowPoints.front(), scaledLayout).find("hk_live_row"), std::string::npos);
}

TEST(ChainLayoutTest, GivenAVariantWithALayoutWhenItsStringIsMadeThenTheLayoutIsNamedAndContiguousOnesAreUnchanged) {
  const ChainVariant v = rotaryVariant();
  const std::string s = chainVariantString(v);
  EXPECT_EQ(s, "chain=" + chainKey(v.ir).sha256 + ";rows=131072;cols=128;layout=" + layoutText(v.layout) + ";dev=0");
  ChainVariant k = rotaryVariant({1, 8, 4096, 128});
  EXPECT_NE(chainVariantString(k), s);
  ChainVariant contiguous = v;
  contiguous.layout = ChainLayout{};
  EXPECT_EQ(chainVariantString(contiguous), "chain=" + chainKey(v.ir).sha256 + ";rows=131072;cols=128;dev=0");
  // A layout that is not normalized is refused.
  ChainVariant unnormalized = v;
  unnormalized.layout.rowDims = {1, 32, 4096};
  for (std::vector<int64_t>& st : unnormalized.layout.strides) st.insert(st.begin(), 0);
  EXPECT_THROW(chainVariantString(unnormalized), Error);
}

TEST(ChainLayoutTest, GivenAnEntryOfAVariantWithALayoutWhenReadBackThenOnlyThatLayoutIsServed) {
  const ChainVariant v = rotaryVariant();
  const ChainKernelParams p{256, 8, 1, 0};
  const nlohmann::json j = chainEntryParams(v, p);
  EXPECT_EQ(j.at("version"), 2);
  EXPECT_EQ(j.at("layout"), layoutToJson(v.layout));
  EXPECT_EQ(j.at("sourceSha256"), sha256Hex(generateChainSource(v.ir, p, v.layout)));
  EXPECT_EQ(readChainEntry(j.dump(), v), p);
  // Another layout (k's heads), or the contiguous one, is refused.
  ChainVariant k = v;
  k.layout = rotaryLayout({1, 8, 16384, 128});
  try {
    readChainEntry(j.dump(), k);
    ADD_FAILURE() << "read for another layout";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("stored for layout"), std::string::npos) << e.what();
  }
  ChainVariant contiguous = v;
  contiguous.layout = ChainLayout{};
  EXPECT_THROW(readChainEntry(j.dump(), contiguous), Error);
  // A source hash of the contiguous source is stale for the layout.
  nlohmann::json stale = j;
  stale["sourceSha256"] = sha256Hex(generateChainSource(v.ir, p));
  EXPECT_THROW(readChainEntry(stale.dump(), v), Error);
}

TEST(ChainLayoutTest, GivenAVersionOneEntryWhenReadThenItServesItsContiguousVariant) {
  // An entry as written before layouts: version 1, no "layout".
  const ChainVariant v{swigluChain(DType::BFloat16), 1024, 4096, 0};
  const ChainKernelParams p{256, 8, 1, 0};
  nlohmann::json j = chainEntryParams(v, p);
  EXPECT_FALSE(j.contains("layout"));
  j["version"] = 1;
  EXPECT_EQ(readChainEntry(j.dump(), v), p);
  nlohmann::json withLayout = chainEntryParams(rotaryVariant(), p);
  withLayout["version"] = 1;
  EXPECT_THROW(readChainEntry(withLayout.dump(), rotaryVariant()), Error);  // v1 has no "layout" key
  j["version"] = 3;
  EXPECT_THROW(readChainEntry(j.dump(), v), Error);
}

TEST(ChainLayoutTest, GivenTheRotaryVariantsWhenTheirSpaceIsEnumeratedThenVecDividesTheHalvesAndEveryPointServes) {
  for (const RotaryShape& shape : {kQ, RotaryShape{1, 8, 4096, 128}, RotaryShape{2, 4, 64, 64}}) {
    const ChainVariant v = rotaryVariant(shape);
    const std::vector<ChainKernelParams> space = chainParameterSpace(v.ir, v.rows, v.cols, v.layout);
    ASSERT_FALSE(space.empty());
    EXPECT_EQ(space.front().vec, 8);
    for (const ChainKernelParams& p : space) {
      EXPECT_EQ(chainVariantProblem(v.ir, p, v.rows, v.cols, v.layout), "") << p.describe();
    }
  }
  // Halves of 12 columns: vec 8 divides neither the boundary nor the extents, so vec 4 alone.
  const ChainIR odd = rotaryChain(DType::BFloat16, 24);
  const std::vector<ChainKernelParams> space = chainParameterSpace(odd, 64, 24);
  ASSERT_FALSE(space.empty());
  for (const ChainKernelParams& p : space) EXPECT_EQ(12 % p.vec, 0) << p.describe();
}

TEST(ChainLayoutTest, GivenAStridedPlanWhenItsGuardChecksOverlapsThenItUsesTheSpansOfTheLayout) {
  ChainPlan plan;
  plan.variant = rotaryVariant({1, 2, 4, 16});
  plan.params = ChainKernelParams{128, 8, 1, 0};
  plan.layout = chainKernelLayout(plan.variant.ir, plan.params);
  // x is [4 positions, 2 heads * 16]; x1 and x2 views of it; tables [4, 16]; out like x.
  std::vector<char> bytes(4096);
  char* base = bytes.data() + (64 - reinterpret_cast<uintptr_t>(bytes.data()) % 64) % 64;
  const void* x = base;
  const void* x2 = base + 8 * 2;
  const void* cos = base + 512;
  const void* sin = base + 768;
  void* out = base + 1024;
  EXPECT_EQ(chainLaunchRefusal(plan, {{x, 0}, {cos, 0}, {x2, 0}, {x, 0}, {sin, 0}}, {out}), "");
  // x spans 4 * 32 elements (256 bytes): an output 192 bytes in overlaps its last position.
  EXPECT_NE(chainLaunchRefusal(plan, {{x, 0}, {cos, 0}, {x2, 0}, {x, 0}, {sin, 0}}, {base + 192})
                .find("output 0 overlaps input 0"),
            std::string::npos);
}

}  // namespace
}  // namespace hotkernel::chain
