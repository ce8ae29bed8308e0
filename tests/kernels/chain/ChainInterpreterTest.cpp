// Tests of the CPU interpreter (ChainInterpreter.h) on chains whose results
// are computed here by hand: where each mode rounds, the scalar rules, the
// reductions, determinism and the input checks. Random chains:
// RandomChainTest.cpp.

#include "hotkernel/chain/ChainInterpreter.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "hotkernel/chain/ChainLayout.h"
#include "hotkernel/chain/NamedChains.h"
#include "hotkernel/chain/Rounding.h"
#include "hotkernel/runtime/Check.h"

namespace hotkernel::chain {
namespace {

float bf(float f) { return roundTo(DType::BFloat16, f); }

// Deterministic bf16 values in about [-2, 2].
std::vector<float> bfValues(size_t n, int salt) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = bf(std::sin(0.37f * static_cast<float>(i) + static_cast<float>(salt)) * 2.0f);
  return v;
}

bool sameBits(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; }

TEST(ChainInterpreterTest, GivenRmsNormWhenInterpretedThenEachModeMatchesTheHandComputation) {
  const int64_t rows = 3, cols = 40;
  const double eps = 1e-6;
  const std::vector<float> x = bfValues(rows * cols, 1), w = bfValues(cols, 7);
  const ChainIR ir = rmsNormChain(DType::BFloat16, eps);
  const auto aten = interpretChain(ir, rows, cols, {x, w}, EvalMode::AtenOrder);
  const auto fused = interpretChain(ir, rows, cols, {x, w}, EvalMode::Fused);
  ASSERT_EQ(aten.size(), 1u);
  ASSERT_EQ(aten[0].size(), static_cast<size_t>(rows * cols));
  const float factor = static_cast<float>(rows) / static_cast<float>(rows * cols);
  for (int64_t r = 0; r < rows; ++r) {
    double acc = 0;
    for (int64_t c = 0; c < cols; ++c) acc += x[r * cols + c] * x[r * cols + c];  // exact: bf16 squares
    const float var = static_cast<float>(acc) * factor;
    const float rstd = 1.0f / std::sqrt(var + static_cast<float>(eps));
    for (int64_t c = 0; c < cols; ++c) {
      // The fp32 steps round nowhere else; the cast to bf16 rounds in both
      // modes (an explicit cast), so the modes agree bit for bit here.
      const float expected = bf(w[c] * bf(x[r * cols + c] * rstd));
      ASSERT_TRUE(sameBits(aten[0][r * cols + c], expected)) << r << "," << c;
      ASSERT_TRUE(sameBits(fused[0][r * cols + c], expected)) << r << "," << c;
    }
  }
}

TEST(ChainInterpreterTest, GivenSwigluWhenInterpretedThenAtenOrderRoundsTheSiluAndFusedDoesNot) {
  const int64_t rows = 4, cols = 64;
  const std::vector<float> g = bfValues(rows * cols, 2), u = bfValues(rows * cols, 5);
  const ChainIR ir = swigluChain(DType::BFloat16);
  const auto aten = interpretChain(ir, rows, cols, {g, u}, EvalMode::AtenOrder)[0];
  const auto fused = interpretChain(ir, rows, cols, {g, u}, EvalMode::Fused)[0];
  int differing = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    const float s = g[i] / (1.0f + std::exp(-g[i]));
    ASSERT_TRUE(sameBits(aten[i], bf(bf(s) * u[i]))) << i;
    ASSERT_TRUE(sameBits(fused[i], bf(s * u[i]))) << i;
    differing += aten[i] != fused[i];
  }
  EXPECT_GT(differing, 0) << "the modes never differ: is the intermediate rounding emulated?";
}

TEST(ChainInterpreterTest, GivenScalarOperandsWhenInterpretedThenTheyStayFloat32AndPowRoundsItsSquare) {
  // mul(x bf16, 0.044715) is a bf16 op whose number ATen's CUDA kernel takes as
  // an opmath (float32) scalar, not rounded to bf16 (measured: Note [Chain
  // dtypes]); the fp32 cast after it exposes the product unrounded in Fused mode.
  ChainIR ir;
  const int x = ir.addInput(DType::BFloat16, ShapeClass::Full);
  ir.markOutput(ir.addCast(ir.addBinary(OpKind::Mul, x, ir.addConstant(0.044715)), DType::Float32));
  const auto fused = interpretChain(ir, 1, 2, {{1.0f, 3.0f}}, EvalMode::Fused)[0];
  EXPECT_EQ(fused[0], 0.044715f);
  EXPECT_EQ(fused[1], 3.0f * 0.044715f);
  // pow(x, 3) and pow(x, -2) of a bf16 tensor: x * x rounded to bf16 first, as ATen's CUDA kernel does.
  ChainIR cube;
  const int c = cube.addInput(DType::BFloat16, ShapeClass::Full);
  cube.markOutput(cube.addUnary(OpKind::PowScalar, c, 3.0));
  cube.markOutput(cube.addUnary(OpKind::PowScalar, c, -2.0));
  const float v3 = 1.3046875f;  // a bf16 value whose square is not one
  ASSERT_NE(bf(v3 * v3), v3 * v3);
  const auto powers = interpretChain(cube, 1, 1, {{v3}}, EvalMode::Fused);
  EXPECT_TRUE(sameBits(powers[0][0], bf(bf(v3 * v3) * v3)));
  EXPECT_TRUE(sameBits(powers[1][0], bf(1.0f / bf(v3 * v3))));
  // A division by a scalar is a multiplication by its float32 reciprocal.
  ChainIR div;
  const int y = div.addInput(DType::Float32, ShapeClass::Full);
  div.markOutput(div.addBinary(OpKind::Div, y, div.addConstant(3.0)));
  div.markOutput(div.addBinary(OpKind::Div, y, div.addInput(DType::Float32, ShapeClass::Row)));
  const float v = 7.0f;
  const auto out = interpretChain(div, 1, 1, {{v}, {3.0f}}, EvalMode::AtenOrder);
  EXPECT_TRUE(sameBits(out[0][0], v * (1.0f / 3.0f)));
  EXPECT_TRUE(sameBits(out[1][0], v / 3.0f));
  EXPECT_FALSE(sameBits(out[0][0], out[1][0]));  // 7 * fl(1/3) != fl(7/3)
  // alpha: a fused multiply-add in float32.
  ChainIR alpha;
  const int a = alpha.addInput(DType::Float32, ShapeClass::Full);
  alpha.markOutput(alpha.addBinary(OpKind::Sub, a, alpha.addInput(DType::Float32, ShapeClass::Full), 0.5));
  EXPECT_EQ(interpretChain(alpha, 1, 1, {{1.0f}, {4.0f}}, EvalMode::AtenOrder)[0][0], -1.0f);
}

TEST(ChainInterpreterTest, GivenReductionsWhenInterpretedThenMeanUsesAtensFactorAndAmaxPropagatesNan) {
  ChainIR ir;
  const int x = ir.addInput(DType::Float32, ShapeClass::Full);
  ir.markOutput(ir.addReduce(OpKind::Sum, x, false));
  ir.markOutput(ir.addReduce(OpKind::Mean, x, true));
  ir.markOutput(ir.addReduce(OpKind::Amax, x, true));
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> in = {1, 2, 3, -4, 5, 6, nan, 0, 1e8f, 1, -1e8f, 1};
  const auto out = interpretChain(ir, 3, 4, {in}, EvalMode::AtenOrder);
  EXPECT_EQ(out[0][0], 2.0f);
  EXPECT_TRUE(std::isnan(out[0][1]));
  EXPECT_EQ(out[0][2], 2.0f);  // the double sum is exact: 1e8 + 1 - 1e8 + 1
  EXPECT_EQ(out[1][0], 2.0f * (3.0f / 12.0f));
  EXPECT_EQ(out[2][0], 3.0f);
  EXPECT_TRUE(std::isnan(out[2][1]));
  EXPECT_EQ(out[2][2], 1e8f);
  // bf16 reductions round their result in AtenOrder, not in Fused (a cast to f32 shows it).
  ChainIR b;
  const int bx = b.addInput(DType::BFloat16, ShapeClass::Full);
  b.markOutput(b.addCast(b.addReduce(OpKind::Sum, bx, true), DType::Float32));
  const std::vector<float> vals = {1.0f, 0.00390625f, 0.00390625f, 0.00390625f};  // 1 + 3 * 2^-8
  EXPECT_EQ(interpretChain(b, 1, 4, {vals}, EvalMode::AtenOrder)[0][0], 1.015625f);  // bf16: 1 + 2^-6
  EXPECT_EQ(interpretChain(b, 1, 4, {vals}, EvalMode::Fused)[0][0], 1.01171875f);
}

TEST(ChainInterpreterTest, GivenTheSameChainTwiceWhenInterpretedThenBitsAreEqualAndRowsIndependent) {
  const ChainIR ir = newGeluChain(DType::Float16);
  std::vector<float> x(5 * 33);
  for (size_t i = 0; i < x.size(); ++i) x[i] = roundTo(DType::Float16, std::cos(static_cast<float>(i)) * 4.0f);
  for (EvalMode mode : {EvalMode::AtenOrder, EvalMode::Fused}) {
    const auto first = interpretChain(ir, 5, 33, {x}, mode)[0];
    const auto second = interpretChain(ir, 5, 33, {x}, mode)[0];
    ASSERT_EQ(std::memcmp(first.data(), second.data(), first.size() * sizeof(float)), 0) << evalModeName(mode);
    const std::vector<float> row3(x.begin() + 3 * 33, x.begin() + 4 * 33);
    const auto alone = interpretChain(ir, 1, 33, {row3}, mode)[0];
    ASSERT_EQ(std::memcmp(alone.data(), first.data() + 3 * 33, alone.size() * sizeof(float)), 0);
  }
}

TEST(ChainInterpreterTest, GivenBadInputsWhenInterpretedThenTheErrorNamesTheInput) {
  const ChainIR ir = swigluChain(DType::BFloat16);
  const std::vector<float> ok(8, 1.0f);
  EXPECT_THROW(interpretChain(ir, 2, 4, {ok}, EvalMode::Fused), Error);  // one buffer missing
  EXPECT_THROW(interpretChain(ir, 2, 4, {ok, std::vector<float>(7, 1.0f)}, EvalMode::Fused), Error);
  std::vector<float> notBf16 = ok;
  notBf16[3] = 1.0f + 0x1p-12f;
  try {
    interpretChain(ir, 2, 4, {ok, notBf16}, EvalMode::Fused);
    ADD_FAILURE() << "a value bf16 cannot hold was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("chain input 1"), std::string::npos) << e.what();
  }
  EXPECT_THROW(interpretChain(ir, 0, 4, {{}, {}}, EvalMode::Fused), Error);
}

// HF's rotary embedding in its strided layout: x read through the
// projection's memory (a head every d, a position every heads * d), x1 and x2
// as views of the same memory, cos and sin shared by the heads.
TEST(ChainInterpreterTest, GivenRotaryInItsLayoutWhenInterpretedThenEachModeMatchesTheHandComputation) {
  const RotaryShape shape{1, 4, 16, 32};
  const int64_t h = shape.heads, s = shape.seq, d = shape.headDim, half = d / 2;
  const ChainIR ir = rotaryChain(DType::BFloat16, d);
  const ChainLayout layout = rotaryLayout(shape);
  const int64_t rows = rotaryRows(shape);
  const std::vector<float> projection = bfValues(static_cast<size_t>(s * h * d), 3);  // [s, h * d]
  const std::vector<float> cos = bfValues(static_cast<size_t>(s * d), 11), sin = bfValues(static_cast<size_t>(s * d), 13);
  // Each view's buffer starts at its data pointer and spans what its layout reaches.
  const auto span = [&](size_t arg) { return static_cast<size_t>(layoutSpan(ir, layout, arg, rows, d)); };
  const std::vector<float> x(projection.begin(), projection.begin() + static_cast<long>(span(0)));
  const std::vector<float> x2(projection.begin() + half, projection.begin() + half + static_cast<long>(span(2)));
  const std::vector<float> x1(projection.begin(), projection.begin() + static_cast<long>(span(3)));
  ASSERT_EQ(span(1), cos.size());
  const auto aten = interpretChain(ir, rows, d, layout, {x, cos, x2, x1, sin}, EvalMode::AtenOrder);
  const auto fused = interpretChain(ir, rows, d, layout, {x, cos, x2, x1, sin}, EvalMode::Fused);
  ASSERT_EQ(aten.size(), 1u);
  ASSERT_EQ(aten[0].size(), static_cast<size_t>(rows * d));
  for (int64_t head = 0; head < h; ++head) {
    for (int64_t pos = 0; pos < s; ++pos) {
      const int64_t row = head * s + pos;  // the output's values, row-major over (heads, positions)
      for (int64_t c = 0; c < d; ++c) {
        const float q = projection[static_cast<size_t>(pos * h * d + head * d + c)];
        const float other = projection[static_cast<size_t>(pos * h * d + head * d + (c + half) % d)];
        const float rotated = c < half ? -other : other;
        const float cv = cos[static_cast<size_t>(pos * d + c)], sv = sin[static_cast<size_t>(pos * d + c)];
        const float expectedAten = bf(bf(q * cv) + bf(rotated * sv));
        const float expectedFused = bf(q * cv + rotated * sv);
        ASSERT_TRUE(sameBits(aten[0][static_cast<size_t>(row * d + c)], expectedAten)) << head << "," << pos << "," << c;
        ASSERT_TRUE(sameBits(fused[0][static_cast<size_t>(row * d + c)], expectedFused)) << head << "," << pos << "," << c;
      }
    }
  }
  // A buffer shorter than its layout's span is refused.
  const std::vector<float> shortX(x.begin(), x.end() - 1);
  EXPECT_THROW(interpretChain(ir, rows, d, layout, {shortX, cos, x2, x1, sin}, EvalMode::AtenOrder), Error);
  // A width-fixed chain runs over its width only.
  EXPECT_THROW(interpretChain(ir, rows, 2 * d, {x, cos, x2, x1, sin}, EvalMode::AtenOrder), Error);
}

// Note [Softmax in a chain]: every node in float32, the result rounded once; against softmax and
// log_softmax computed here in double, with the mask broadcast over the heads as GPT-2's attention adds it.
// Note [GroupNorm in a chain] over Note [The group view]: each group of C / G channels of HxW elements is a row;
// the weight and bias repeat over each channel's HxW columns. float32 (no statistic rounding): within float32
// rounding of the group norm and SiLU computed in double.
TEST(ChainInterpreterTest, GivenAGroupNormAndSiluInTheGroupViewWhenInterpretedThenEachGroupIsNormalizedPerChannel) {
  const GroupNormShape shape{2, 8, 6, 4};  // C / G = 2, rows 8, cols 12
  const int64_t rows = groupNormRows(shape), cols = groupNormCols(shape);
  const ChainIR ir = groupNormActChain(DType::Float32, 1e-5, OpKind::Silu);
  const ChainLayout layout = groupNormActLayout(shape);
  std::vector<float> x(static_cast<size_t>(2 * 8 * 6)), w(8), b(8);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(std::sin(0.7 * static_cast<double>(i)) * 3.0 + 0.5);
  for (size_t c = 0; c < 8; ++c) {
    w[c] = 0.5f + 0.25f * static_cast<float>(c);
    b[c] = -1.0f + 0.3f * static_cast<float>(c);
  }
  for (EvalMode mode : {EvalMode::AtenOrder, EvalMode::Fused}) {
    const std::vector<std::vector<float>> out = interpretChain(ir, rows, cols, layout, {x, w, b}, mode);
    ASSERT_EQ(out.size(), 1u);
    ASSERT_EQ(out[0].size(), static_cast<size_t>(rows * cols));
    for (int64_t n = 0; n < 2; ++n) {
      for (int64_t g = 0; g < 4; ++g) {
        double sum = 0, sq = 0;
        for (int64_t e = 0; e < cols; ++e) sum += x[static_cast<size_t>((n * 4 + g) * cols + e)];
        const double mean = sum / static_cast<double>(cols);
        for (int64_t e = 0; e < cols; ++e) {
          const double d = x[static_cast<size_t>((n * 4 + g) * cols + e)] - mean;
          sq += d * d;
        }
        const double rstd = 1.0 / std::sqrt(sq / static_cast<double>(cols) + 1e-5);
        for (int64_t e = 0; e < cols; ++e) {
          const int64_t c = g * 2 + e / 6;
          const size_t at = static_cast<size_t>((n * 4 + g) * cols + e);
          const double y = (x[at] - mean) * rstd * w[static_cast<size_t>(c)] + b[static_cast<size_t>(c)];
          const double want = y / (1.0 + std::exp(-y));
          EXPECT_NEAR(out[0][at], want, 1e-5 * (1.0 + std::fabs(want))) << evalModeName(mode) << " n " << n << " g "
                                                                          << g << " column " << e;
        }
      }
    }
  }
}

// Note [Eval BatchNorm in a chain]: each (sample, channel) row normalized with its channel's running statistics and
// affine, repeated over the row's HxW columns; float32 within float32 rounding of the double computation.
TEST(ChainInterpreterTest, GivenAnEvalBatchNormAndReluWhenInterpretedThenEachRowTakesItsChannelsStatistics) {
  const GroupNormShape shape{2, 3, 5, 3};
  const ChainIR ir = batchNormActChain(DType::Float32, 1e-5, OpKind::Relu);
  const ChainLayout layout = batchNormActLayout(shape);
  std::vector<float> x(30), w = {0.5f, -1.25f, 2.0f}, b = {0.1f, 0.2f, -0.3f}, mean = {0.25f, -1.0f, 0.0f},
                            var = {1.0f, 0.25f, 4.0f};
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(std::cos(0.9 * static_cast<double>(i)) * 2.0);
  for (EvalMode mode : {EvalMode::AtenOrder, EvalMode::Fused}) {
    const auto out = interpretChain(ir, 6, 5, layout, {x, w, b, mean, var}, mode);
    ASSERT_EQ(out[0].size(), 30u);
    for (size_t i = 0; i < 30; ++i) {
      const size_t c = (i / 5) % 3;
      const double y = (x[i] - mean[c]) / std::sqrt(var[c] + 1e-5) * w[c] + b[c];
      EXPECT_NEAR(out[0][i], std::max(y, 0.0), 1e-6 * (1.0 + std::fabs(y))) << evalModeName(mode) << " element " << i;
    }
  }
}

TEST(ChainInterpreterTest, GivenSoftmaxChainsWhenInterpretedThenTheyMatchSoftmaxInDoubleWithinOneRounding) {
  const int64_t rows = 6, cols = 50;
  const std::vector<float> x = bfValues(rows * cols, 5);
  for (bool log : {false, true}) {
    for (DType d : {DType::Float32, DType::BFloat16}) {
      const ChainIR ir = softmaxChain(d, log);
      for (EvalMode mode : {EvalMode::AtenOrder, EvalMode::Fused}) {
        const auto out = interpretChain(ir, rows, cols, {x}, mode);
        for (int64_t r = 0; r < rows; ++r) {
          double m = -1e300, sum = 0;
          for (int64_t c = 0; c < cols; ++c) m = std::max(m, static_cast<double>(x[r * cols + c]));
          for (int64_t c = 0; c < cols; ++c) sum += std::exp(x[r * cols + c] - m);
          for (int64_t c = 0; c < cols; ++c) {
            const double shifted = x[r * cols + c] - m;
            const double want = log ? shifted - std::log(sum) : std::exp(shifted) / sum;
            const double bound = (d == DType::Float32 ? 1e-6 : 1.0 / 256) * (std::abs(want) + 1e-3);
            ASSERT_NEAR(out[0][r * cols + c], want, bound) << dtypeName(d) << " log " << log << " " << r << "," << c;
          }
        }
      }
    }
  }
  // The attention scores: scale, the mask of batch b for every head, softmax.
  const AttentionShape shape{2, 3, 4, 10};
  const double scale = 0.5;
  const ChainIR ir = attentionSoftmaxChain(DType::Float32, scale);
  const ChainLayout layout = attentionSoftmaxLayout(shape);
  const int64_t n = attentionRows(shape) * shape.keys;
  const std::vector<float> scores = bfValues(static_cast<size_t>(n), 9);
  const std::vector<float> mask = bfValues(static_cast<size_t>(shape.batch * shape.queries * shape.keys), 21);
  const auto out = interpretChain(ir, attentionRows(shape), shape.keys, layout, {scores, mask}, EvalMode::Fused);
  for (int64_t b = 0; b < shape.batch; ++b) {
    for (int64_t h = 0; h < shape.heads; ++h) {
      for (int64_t q = 0; q < shape.queries; ++q) {
        const int64_t row = (b * shape.heads + h) * shape.queries + q;
        std::vector<double> v(static_cast<size_t>(shape.keys));
        double m = -1e300, sum = 0;
        for (int64_t k = 0; k < shape.keys; ++k) {
          v[k] = static_cast<float>(scores[row * shape.keys + k] * scale) + mask[(b * shape.queries + q) * shape.keys + k];
          m = std::max(m, v[k]);
        }
        for (double e : v) sum += std::exp(e - m);
        for (int64_t k = 0; k < shape.keys; ++k) {
          ASSERT_NEAR(out[0][row * shape.keys + k], std::exp(v[k] - m) / sum, 1e-6) << b << "," << h << "," << q;
        }
      }
    }
  }
}

// Note [Chain op arithmetic]: the second vocabulary as ATen's CUDA functors compute it: hardsigmoid and
// hardswish through std::max / std::min (NaN stays NaN, hardswish's x * 0 keeps x's sign), maximum and minimum
// NaN if either operand is, else a < b ? b : a and b < a ? b : a.
TEST(ChainInterpreterTest, GivenTheSecondVocabularyWhenInterpretedThenEdgeValuesAreAtensFunctors) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> x = {-4.0f, -3.0f, 0.0f, 3.0f, 7.0f, nan, -0.0f, 1.5f};
  const std::vector<float> y = {1.0f, nan, -0.0f, 3.0f, -7.0f, 2.0f, 0.0f, 1.0f};
  const int64_t n = static_cast<int64_t>(x.size());
  auto unary = [&](OpKind op) {
    ChainIR ir;
    ir.markOutput(ir.addUnary(op, ir.addInput(DType::Float32, ShapeClass::Full)));
    return interpretChain(ir, 1, n, {x}, EvalMode::AtenOrder)[0];
  };
  auto binary = [&](OpKind op) {
    ChainIR ir;
    const int a = ir.addInput(DType::Float32, ShapeClass::Full);
    ir.markOutput(ir.addBinary(op, a, ir.addInput(DType::Float32, ShapeClass::Full)));
    return interpretChain(ir, 1, n, {x, y}, EvalMode::AtenOrder)[0];
  };
  const std::vector<float> hs = unary(OpKind::Hardsigmoid), hw = unary(OpKind::Hardswish);
  const std::vector<float> wantHs = {0.0f, 0.0f, 0.5f, 1.0f, 1.0f, nan, 0.5f, 4.5f * (1.0f / 6.0f)};
  const std::vector<float> wantHw = {-0.0f, -0.0f, 0.0f, 3.0f, 7.0f, nan, -0.0f, 1.5f * 4.5f * (1.0f / 6.0f)};
  const std::vector<float> mx = binary(OpKind::Maximum), mn = binary(OpKind::Minimum);
  const std::vector<float> wantMax = {1.0f, nan, 0.0f, 3.0f, 7.0f, nan, -0.0f, 1.5f};
  const std::vector<float> wantMin = {-4.0f, nan, 0.0f, 3.0f, -7.0f, nan, -0.0f, 1.0f};
  for (size_t i = 0; i < x.size(); ++i) {
    EXPECT_TRUE(sameBits(hs[i], wantHs[i]) || (std::isnan(hs[i]) && std::isnan(wantHs[i]))) << i << ": " << hs[i];
    EXPECT_TRUE(sameBits(hw[i], wantHw[i]) || (std::isnan(hw[i]) && std::isnan(wantHw[i]))) << i << ": " << hw[i];
    EXPECT_TRUE(sameBits(mx[i], wantMax[i]) || (std::isnan(mx[i]) && std::isnan(wantMax[i]))) << i << ": " << mx[i];
    EXPECT_TRUE(sameBits(mn[i], wantMin[i]) || (std::isnan(mn[i]) && std::isnan(wantMin[i]))) << i << ": " << mn[i];
  }
  const std::vector<float> s = unary(OpKind::Sin), c = unary(OpKind::Cos), e = unary(OpKind::Erf);
  const std::vector<float> l = unary(OpKind::Log1p), m1 = unary(OpKind::Expm1);
  EXPECT_FLOAT_EQ(s[3], std::sin(3.0f));
  EXPECT_FLOAT_EQ(c[3], std::cos(3.0f));
  EXPECT_FLOAT_EQ(e[7], std::erf(1.5f));
  EXPECT_FLOAT_EQ(l[7], std::log1p(1.5f));
  EXPECT_FLOAT_EQ(m1[0], std::expm1(-4.0f));
  EXPECT_TRUE(sameBits(l[6], -0.0f) && sameBits(m1[6], -0.0f));  // log1p and expm1 keep -0
  // Note [Softplus and Mish in a chain]: softplus is x itself past the threshold 20, log1p(exp(x)) below it.
  const std::vector<float> sp = unary(OpKind::Softplus), mi = unary(OpKind::Mish);
  EXPECT_FLOAT_EQ(sp[0], std::log1p(std::exp(-4.0f)));
  EXPECT_FLOAT_EQ(sp[2], std::log(2.0f));
  EXPECT_FLOAT_EQ(sp[7], std::log1p(std::exp(1.5f)));
  EXPECT_FLOAT_EQ(mi[7], 1.5f * std::tanh(std::log1p(std::exp(1.5f))));
  EXPECT_FLOAT_EQ(mi[0], -4.0f * std::tanh(std::log1p(std::exp(-4.0f))));
  EXPECT_TRUE(std::isnan(sp[5]) && std::isnan(mi[5]));
  ChainIR past;
  past.markOutput(past.addUnary(OpKind::Softplus, past.addInput(DType::Float32, ShapeClass::Full)));
  EXPECT_EQ(interpretChain(past, 1, 2, {{21.0f, 100.0f}}, EvalMode::AtenOrder)[0], (std::vector<float>{21.0f, 100.0f}));
  ChainIR leaky;
  leaky.markOutput(leaky.addUnary(OpKind::LeakyRelu, leaky.addInput(DType::Float32, ShapeClass::Full), 0.25));
  const std::vector<float> lr = interpretChain(leaky, 1, n, {x}, EvalMode::AtenOrder)[0];
  const std::vector<float> wantLr = {-1.0f, -0.75f, 0.0f, 3.0f, 7.0f, nan, -0.0f, 1.5f};
  for (size_t i = 0; i < x.size(); ++i) {
    EXPECT_TRUE(sameBits(lr[i], wantLr[i]) || (std::isnan(lr[i]) && std::isnan(wantLr[i]))) << i << ": " << lr[i];
  }
}

}  // namespace
}  // namespace hotkernel::chain
