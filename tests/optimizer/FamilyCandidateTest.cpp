// The harness candidates the family tuners build (Note [A family's harness
// candidate] in optimizer/search/FamilyCandidate.h): for any shape the harness
// may try, the launch geometry and the shape guard are the family's for the
// tuned variant with that shape, the rest of the variant kept; name, kernel
// and alignments are the family's. No GPU: nothing is launched.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "hotkernel/kernels/CrossEntropyFamily.h"
#include "hotkernel/kernels/LayerNormFamily.h"
#include "hotkernel/kernels/ReduceFamily.h"
#include "hotkernel/kernels/RmsNormFamily.h"
#include "hotkernel/kernels/SoftmaxFamily.h"
#include "hotkernel/optimizer/CrossEntropyTuner.h"
#include "hotkernel/optimizer/NormTuner.h"
#include "hotkernel/optimizer/ReduceTuner.h"
#include "hotkernel/optimizer/SoftmaxTuner.h"

namespace hotkernel {
namespace {

using kernels::DType;

// Shapes around the tuned one: smaller and larger rows, a row the point's
// registers cannot hold, lengths that are not a multiple of the vector width,
// one element, no rows.
const std::vector<std::pair<int64_t, int64_t>> kShapes = {
    {4096, 4096}, {1, 4096},  {7, 4104},  {4096, 1},   {3, 4097},      {1000, 8},
    {2, 128256},  {1, 16384}, {9, 65536}, {0, 4096},   {5, 1 << 20},   {33, 1000}};

// Checks `c` against Family for variant `v` with each shape of kShapes.
template <typename Family, typename Variant, typename Params>
void expectFamilys(const HarnessCandidate& c, const Variant& v, const Params& p, const std::string& name) {
  EXPECT_EQ(c.cubin, "cubin bytes");
  EXPECT_EQ(c.kernelName, Family::kKernelName);
  EXPECT_EQ(c.description, name + "[" + p.describe() + "]");
  EXPECT_EQ(c.alignment, Family::requiredAlignment(v.dtype, p));
  int accepted = 0, refused = 0;
  for (auto [rows, cols] : kShapes) {
    SCOPED_TRACE("[" + std::to_string(rows) + ", " + std::to_string(cols) + "]");
    Variant w = v;
    w.rows = rows;
    w.cols = cols;
    const bool want = Family::guardVariant(w) && Family::guardParams(w, p);
    EXPECT_EQ(c.acceptsShape(rows, cols), want);
    (want ? accepted : refused) += 1;
    if (!want) continue;
    const kernels::LaunchGeometry g = Family::launchGeometry(w, p);
    const LaunchGeometry got = c.geometry(rows, cols);
    EXPECT_EQ(got.gridX, g.gridX);
    EXPECT_EQ(got.blockX, g.blockX);
    EXPECT_EQ(got.sharedBytes, g.sharedBytes);
  }
  // The shapes exercise both answers.
  EXPECT_GT(accepted, 0);
  EXPECT_GT(refused, 0);
}

TEST(FamilyCandidateTest, GivenRmsNormPointsWhenTheHarnessAsksAboutOtherShapesThenTheFamilyAnswers) {
  for (bool weight : {true, false}) {
    const kernels::RmsNormVariant v{DType::BFloat16, 4096, 4096, weight};
    for (const kernels::NormParams& p : kernels::RmsNormFamily::parameterSpace(v)) {
      SCOPED_TRACE(p.describe());
      const HarnessCandidate c = rmsNormCandidate(v, p, "cubin bytes", /*colsSpecialized=*/false);
      expectFamilys<kernels::RmsNormFamily>(c, v, p, "rms_norm");
      EXPECT_EQ(c.outputAlignment, 0u);
      EXPECT_FALSE(c.acceptsPointers(reinterpret_cast<const void*>(4096), reinterpret_cast<const void*>(4096)))
          << "in place";
    }
  }
}

TEST(FamilyCandidateTest, GivenLayerNormPointsWhenTheHarnessAsksAboutOtherShapesThenTheFamilyAnswers) {
  const kernels::LayerNormVariant v{DType::Float16, 4096, 4096, true, false};
  for (const kernels::NormParams& p : kernels::LayerNormFamily::parameterSpace(v)) {
    SCOPED_TRACE(p.describe());
    expectFamilys<kernels::LayerNormFamily>(layerNormCandidate(v, p, "cubin bytes", false), v, p, "layer_norm");
  }
}

// Note [Specialized columns] in kernels/norm/rms_norm.cu: a cubin compiled for
// the variant's columns runs on no other column count, whatever the family's
// guard would accept; the rows still vary.
TEST(FamilyCandidateTest, GivenNormCubinsForTheVariantsColumnsWhenTheHarnessAsksAboutOtherShapesThenOnlyThoseColumns) {
  const kernels::RmsNormVariant v{DType::BFloat16, 4096, 4096, true};
  const kernels::LayerNormVariant lv{DType::BFloat16, 4096, 4096, true, true};
  for (const kernels::NormParams& p : kernels::RmsNormFamily::parameterSpace(v)) {
    SCOPED_TRACE(p.describe());
    for (const HarnessCandidate& c :
         {rmsNormCandidate(v, p, "cubin", true), layerNormCandidate(lv, p, "cubin", true)}) {
      EXPECT_TRUE(c.acceptsShape(4096, 4096));
      EXPECT_TRUE(c.acceptsShape(1, 4096));
      EXPECT_TRUE(c.acceptsShape(4097, 4096));
      EXPECT_FALSE(c.acceptsShape(33, 4096 - 8));
      EXPECT_FALSE(c.acceptsShape(33, 4096 + 8));
      EXPECT_FALSE(c.acceptsShape(5, 1));
    }
    // The unspecialized candidate accepts a neighbour the family guards accept.
    EXPECT_TRUE(rmsNormCandidate(v, p, "cubin", false).acceptsShape(33, 4096 - 64));
  }
}

TEST(FamilyCandidateTest, GivenCrossEntropyPointsWhenTheHarnessAsksAboutOtherShapesThenTheReductionIsKept) {
  for (auto r : {kernels::CrossEntropyReduction::None, kernels::CrossEntropyReduction::Mean}) {
    const kernels::CrossEntropyVariant v{DType::BFloat16, 32, 128256, r};
    for (const kernels::CrossEntropyParams& p : kernels::CrossEntropyFamily::parameterSpace(v, 90)) {
      SCOPED_TRACE(p.describe());
      const HarnessCandidate c = crossEntropyCandidate(v, p, "cubin bytes");
      expectFamilys<kernels::CrossEntropyFamily>(c, v, p, "cross_entropy");
      EXPECT_EQ(c.outputAlignment, 2u);  // one bf16 loss
    }
  }
}

TEST(FamilyCandidateTest, GivenReducePointsWhenTheHarnessAsksAboutOtherShapesThenTheOpIsKept) {
  for (auto op : {kernels::ReduceOp::Sum, kernels::ReduceOp::Argmax}) {
    const kernels::ReduceVariant v{DType::BFloat16, 4096, 32000, op};
    for (const kernels::ReduceParams& p : kernels::ReduceFamily::parameterSpace(v)) {
      SCOPED_TRACE(p.describe());
      const HarnessCandidate c = reduceCandidate(v, p, "cubin bytes");
      expectFamilys<kernels::ReduceFamily>(c, v, p, kernels::reduceFamilyName(op));
      EXPECT_EQ(c.outputAlignment, kernels::ReduceFamily::outputElementSize(op, v.dtype));
    }
  }
}

TEST(FamilyCandidateTest, GivenSoftmaxPointsWhenTheHarnessAsksAboutOtherShapesThenTheFamilyAnswers) {
  const kernels::SoftmaxVariant v{DType::BFloat16, 4096, 32000};
  for (const kernels::SoftmaxParams& p : kernels::SoftmaxFamily::parameterSpace(v, 90)) {
    SCOPED_TRACE(p.describe());
    expectFamilys<kernels::SoftmaxFamily>(softmaxCandidate(v.dtype, p, "cubin bytes"), v, p, "softmax_lastdim");
  }
}

}  // namespace
}  // namespace hotkernel
