#include <gtest/gtest.h>

#include "hotkernel/chain/ChainSegments.h"
#include "hotkernel/chain/NamedChains.h"

using namespace hotkernel;
using namespace hotkernel::chain;

namespace {

const ChainBuildOptions kLayouts{/*layouts=*/true};

// HF's apply_rotary_pos_emb on q ([b, qHeads, s, d]) and then on k ([b, kvHeads, s, d]) in one window, as
// grouped-query attention runs it: k's recording takes ids from 11 on, cos (2) and sin (3) are shared.
ChainPattern rotaryOnQThenK(int64_t qHeads, int64_t kvHeads) {
  const RotaryShape qShape{2, qHeads, 8, 32}, kShape{2, kvHeads, 8, 32};
  const RecordedChain q = rotaryRecording(DType::BFloat16, qShape);
  const RecordedChain k = rotaryRecording(DType::BFloat16, kShape);
  auto shifted = [](int64_t id) { return id == 2 || id == 3 ? id : id + 10; };
  std::vector<RecordedCall> calls = q.calls;
  TensorMetas metas = q.metas;
  for (RecordedCall c : k.calls) {
    for (RecordedArg& a : c.args) {
      if (a.kind == RecordedArg::Kind::Tensor) a.value = shifted(a.value);
      for (int64_t& id : a.ints) {
        if (a.kind == RecordedArg::Kind::TensorList) id = shifted(id);
      }
    }
    for (int64_t& out : c.outputs) out = shifted(out);
    calls.push_back(c);
  }
  for (const auto& [id, meta] : k.metas) metas[shifted(id)] = meta;
  return canonicalPattern(calls, metas, {10, 20});  // q_embed and k_embed outlive the window
}

TensorMeta rowsOf(const char* type) { return TensorMeta{type, {4, 8}, {8, 1}}; }

}  // namespace

TEST(ChainSegmentsTest, GivenRotaryOnQThenOnFewerKvHeadsInOneWindowWhenSegmentedThenEachHalfIsTheChainLearnedAlone) {
  const ChainPattern window = rotaryOnQThenK(4, 2);
  ASSERT_FALSE(buildChain(window.calls, window.metas, window.live, kLayouts).ok());  // no common [rows, cols]
  const std::vector<PatternSegment> segs = segmentPattern(window, kLayouts);
  ASSERT_EQ(segs.size(), 2u);
  EXPECT_EQ(segs[0].first, 0u);
  EXPECT_EQ(segs[0].last, 5u);
  EXPECT_EQ(segs[1].first, 5u);
  EXPECT_EQ(segs[1].last, 10u);
  for (const PatternSegment& s : segs) {
    ASSERT_TRUE(s.build.ok()) << s.build.reason;
    EXPECT_EQ(s.pattern.live.size(), 1u);
    EXPECT_EQ(s.build.cols, 32);
  }
  EXPECT_EQ(segs[0].build.rows, 2 * 4 * 8);
  EXPECT_EQ(segs[1].build.rows, 2 * 2 * 8);
  // Each segment is the pattern its calls make in a window of their own: the engine matches it as such.
  const RecordedChain q = rotaryRecording(DType::BFloat16, RotaryShape{2, 4, 8, 32});
  const RecordedChain k = rotaryRecording(DType::BFloat16, RotaryShape{2, 2, 8, 32});
  EXPECT_EQ(segs[0].pattern.key(), canonicalPattern(q.calls, q.metas, {10}).key());
  EXPECT_EQ(segs[1].pattern.key(), canonicalPattern(k.calls, k.metas, {10}).key());
}

TEST(ChainSegmentsTest, GivenEqualHeadsWhenTheWindowBuildsThenItIsOneSegment) {
  const ChainPattern window = rotaryOnQThenK(4, 4);
  const std::vector<PatternSegment> segs = segmentPattern(window, kLayouts);
  ASSERT_EQ(segs.size(), 1u);
  EXPECT_EQ(segs[0].first, 0u);
  EXPECT_EQ(segs[0].last, 10u);
  EXPECT_EQ(segs[0].pattern.key(), window.key());
}

TEST(ChainSegmentsTest, GivenAValueALaterRefusedCallReadsWhenSegmentedThenTheSegmentWritesItToo) {
  // a = silu(g); b = a * u; c = where(a > 0...) stands for any call the builder refuses, reading a.
  using A = RecordedArg;
  const std::vector<RecordedCall> calls = {
      {"aten::silu", {A::tensor(0)}, {1}},
      {"aten::mul.Tensor", {A::tensor(1), A::tensor(2)}, {3}},
      {"aten::index_select", {A::tensor(1), A::number(0), A::tensor(4)}, {5}},
  };
  TensorMetas metas = {{0, rowsOf("float32")}, {1, rowsOf("float32")}, {2, rowsOf("float32")},
                       {3, rowsOf("float32")}, {4, TensorMeta{"int64", {4}, {1}}}, {5, rowsOf("float32")}};
  const ChainPattern window = canonicalPattern(calls, metas, {3, 5});
  const std::vector<PatternSegment> segs = segmentPattern(window, kLayouts);
  ASSERT_EQ(segs.size(), 1u);
  EXPECT_EQ(segs[0].last, 2u);
  // The product (live) and silu's result (the refused call reads it) are the kernel's outputs.
  EXPECT_EQ(segs[0].pattern.live.size(), 2u);
  EXPECT_EQ(segs[0].build.outputValues.size(), 2u);
}

TEST(ChainSegmentsTest, GivenCallsNoTwoOfWhichBuildWhenSegmentedThenThereIsNone) {
  using A = RecordedArg;
  const std::vector<RecordedCall> calls = {
      {"aten::silu", {A::tensor(0)}, {1}},
      {"aten::index_select", {A::tensor(1), A::number(0), A::tensor(2)}, {3}},
      {"aten::silu", {A::tensor(3)}, {4}},
  };
  TensorMetas metas = {{0, rowsOf("float32")}, {1, rowsOf("float32")}, {2, TensorMeta{"int64", {4}, {1}}},
                       {3, rowsOf("float32")}, {4, rowsOf("float32")}};
  EXPECT_TRUE(segmentPattern(canonicalPattern(calls, metas, {4}), kLayouts).empty());
}

TEST(ChainSegmentsTest, GivenABoundOnBuildsWhenSegmentingThenTheSearchStopsThereLongestRunsFirst) {
  const ChainPattern window = rotaryOnQThenK(4, 2);
  // Runs from call 0 are tried longest first: [0, 10) ... [0, 5) is the sixth build, [5, 10) the seventh.
  EXPECT_TRUE(segmentPattern(window, kLayouts, 5).empty());
  EXPECT_EQ(segmentPattern(window, kLayouts, 6).size(), 1u);
  EXPECT_EQ(segmentPattern(window, kLayouts, 7).size(), 2u);
}

// Note [Relayout copies]: matmul(q, k^T) reshapes q (a row copy of a head view) and k^T (a transpose: Note
// [Transposed layouts]) before its bmm, in one window: each copy is a segment of one call.
TEST(ChainSegmentsTest, GivenTheCopiesOfQAndKTransposedInOneWindowWhenSegmentedThenEachCopyIsASegmentOfItsOwn) {
  using A = RecordedArg;
  const int64_t b = 2, h = 3, s = 5, d = 8;
  const std::vector<RecordedCall> calls = {
      {"aten::clone", {A::tensor(0), A::number(0)}, {1}},
      {"aten::clone", {A::tensor(2), A::number(0)}, {3}},
  };
  TensorMetas metas = {
      {0, TensorMeta{"float16", {b, h, s, d}, {s * 3 * h * d, d, 3 * h * d, 1}}},
      {1, TensorMeta{"float16", {b, h, s, d}, {h * s * d, s * d, d, 1}}},
      {2, TensorMeta{"float16", {b, h, d, s}, {s * 3 * h * d, d, 1, 3 * h * d}}},
      {3, TensorMeta{"float16", {b, h, d, s}, {h * d * s, d * s, s, 1}}},
  };
  const ChainPattern window = canonicalPattern(calls, metas, {1, 3});
  const std::vector<PatternSegment> segs = segmentPattern(window, kLayouts);
  ASSERT_EQ(segs.size(), 2u);
  EXPECT_EQ(segs[0].first, 0u);
  EXPECT_EQ(segs[0].last, 1u);
  EXPECT_TRUE(isRelayoutCopy(segs[0].build));
  EXPECT_FALSE(segs[0].build.layout.transposed());
  EXPECT_EQ(segs[1].first, 1u);
  EXPECT_EQ(segs[1].last, 2u);
  EXPECT_TRUE(isRelayoutCopy(segs[1].build));
  EXPECT_TRUE(segs[1].build.layout.transposed());
}

// A call no chain takes (int64 here) bounds every segment: the search runs between such barriers, so two
// builds find both chains of a window where the longest-first search from its start would spend them on runs
// holding the barrier.
TEST(ChainSegmentsTest, GivenCallsThatBuildNothingAloneWhenSegmentedThenTheSearchRunsBetweenThem) {
  using A = RecordedArg;
  const TensorMeta f{"float32", {4, 8}, {8, 1}}, i{"int64", {4, 8}, {8, 1}};
  const std::vector<RecordedCall> calls = {
      {"aten::mul.Tensor", {A::tensor(0), A::number(2)}, {1}},  // int64: no chain value
      {"aten::silu", {A::tensor(2)}, {3}},
      {"aten::mul.Tensor", {A::tensor(3), A::tensor(4)}, {5}},
      {"aten::add.Tensor", {A::tensor(1), A::number(1), A::number(1)}, {6}},  // int64 again
      {"aten::silu", {A::tensor(5)}, {7}},
      {"aten::mul.Tensor", {A::tensor(7), A::tensor(4)}, {8}},
  };
  const TensorMetas metas = {{0, i}, {1, i}, {2, f}, {3, f}, {4, f}, {5, f}, {6, i}, {7, f}, {8, f}};
  const ChainPattern window = canonicalPattern(calls, metas, {6, 8});
  const std::vector<PatternSegment> segs = segmentPattern(window, kLayouts, 2);
  ASSERT_EQ(segs.size(), 2u);
  EXPECT_EQ(segs[0].first, 1u);
  EXPECT_EQ(segs[0].last, 3u);
  EXPECT_EQ(segs[1].first, 4u);
  EXPECT_EQ(segs[1].last, 6u);
  // The first segment's product is read by the second: an output of the first, an input of the second.
  EXPECT_EQ(segs[0].pattern.live.size(), 1u);
  EXPECT_EQ(segs[1].build.inputValues.size(), 2u);
}

// Note [In-place steps]: an in-place call alone writes an input, which no chain does, yet it is no barrier: the
// segment holding the value it overwrites takes it.
TEST(ChainSegmentsTest, GivenInPlaceStepsBeforeARefusedCallWhenSegmentedThenTheyJoinTheSegmentOfTheValueTheyWrite) {
  using A = RecordedArg;
  const TensorMeta f{"float16", {4, 8}, {8, 1}}, i{"int64", {4, 8}, {8, 1}};
  const std::vector<RecordedCall> calls = {
      {"aten::exp", {A::tensor(0)}, {2}},
      {"aten::add_.Tensor", {A::tensor(2), A::tensor(1), A::number(1)}, {3}},
      {"aten::relu_", {A::tensor(3)}, {4}},
      {"aten::mul.Tensor", {A::tensor(5), A::number(2)}, {6}},  // int64: no chain value
  };
  const TensorMetas metas = {{0, f}, {1, f}, {2, f}, {3, f}, {4, f}, {5, i}, {6, i}};
  const ChainPattern window = canonicalPattern(calls, metas, {4, 6});
  ASSERT_FALSE(buildChain(window.calls, window.metas, window.live, kLayouts).ok());
  const std::vector<PatternSegment> segs = segmentPattern(window, kLayouts);
  ASSERT_EQ(segs.size(), 1u);
  EXPECT_EQ(segs[0].first, 0u);
  EXPECT_EQ(segs[0].last, 3u);
  ASSERT_TRUE(segs[0].build.ok()) << segs[0].build.reason;
  EXPECT_EQ(segs[0].build.outputValues.size(), 1u);
}
