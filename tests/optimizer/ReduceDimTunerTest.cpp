// The middle-dim reduction tuner's CPU parts (Note [Middle-dim reduction
// harness] in optimizer/search/ReduceDimTuner.cpp): its harness candidate
// reads any (rows, cols) shape as [rows, cols / inner, inner] and answers with
// ReduceDimFamily's geometry and guards; its spec gives [rows, inner] outputs
// and the (in, out, outer, reduced, inner) argument list; max.dim's and
// min.dim's specs, in both layouts, two outputs (values bit for bit, int64
// indices) and the indices after the values. No GPU: nothing is launched, no
// reference runs.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <vector>

#include "hotkernel/kernels/ReduceDimFamily.h"
#include "hotkernel/optimizer/ReduceDimTuner.h"
#include "hotkernel/optimizer/ReduceTuner.h"
#include "hotkernel/optimizer/FamilyTuner.h"
#include "hotkernel/optimizer/TuningRows.h"
#include "hotkernel/runtime/Check.h"

namespace hotkernel {
namespace {

using kernels::DType;
using kernels::ReduceDimFamily;
using kernels::ReduceDimParams;
using kernels::ReduceDimVariant;
using kernels::ReduceOp;

TEST(ReduceDimTunerTest, GivenACandidateWhenTheHarnessAsksAboutOtherShapesThenTheFamilyAnswersForThoseReducedExtents) {
  const ReduceDimVariant v{DType::BFloat16, 32, 4096, 1024, ReduceOp::Argmax};
  const ReduceDimParams p{128, 4, 8};
  const HarnessCandidate c = reduceDimCandidate(v, p, "cubin bytes");
  EXPECT_EQ(c.cubin, "cubin bytes");
  EXPECT_EQ(c.kernelName, ReduceDimFamily::kKernelName);
  EXPECT_EQ(c.description, "argmax_dim[tx=128 ty=4 vec=8 unroll=1]");
  EXPECT_EQ(c.alignment, 16u);         // 8 bf16
  EXPECT_EQ(c.outputAlignment, 64u);   // 8 int64
  for (auto [rows, reduced] : std::vector<std::pair<int64_t, int64_t>>{{32, 4096}, {1, 4096}, {33, 7}, {5, 1}}) {
    ReduceDimVariant w = v;
    w.outer = rows;
    w.reduced = reduced;
    ASSERT_TRUE(c.acceptsShape(rows, reduced * 1024)) << rows << "x" << reduced;
    const kernels::LaunchGeometry want = ReduceDimFamily::launchGeometry(w, p);
    const LaunchGeometry got = c.geometry(rows, reduced * 1024);
    EXPECT_EQ(got.gridX, want.gridX);
    EXPECT_EQ(got.blockX, want.blockX);
    EXPECT_EQ(got.sharedBytes, want.sharedBytes);
  }
  // Not a whole number of inner rows, fewer columns than inner, no rows.
  EXPECT_FALSE(c.acceptsShape(32, 4096 * 1024 + 8));
  EXPECT_FALSE(c.acceptsShape(32, 512));
  EXPECT_FALSE(c.acceptsShape(0, 4096 * 1024));
  // An inner extent the point's vector does not divide is another variant: refused there.
  const HarnessCandidate odd = reduceDimCandidate({DType::BFloat16, 32, 4096, 1020, ReduceOp::Argmax}, p, "x");
  EXPECT_FALSE(odd.acceptsShape(32, 4096 * 1020));
  alignas(128) static char buf[8192];
  EXPECT_TRUE(c.acceptsPointers(buf, buf + 4096));
  EXPECT_FALSE(c.acceptsPointers(buf + 2, buf + 4096));
  EXPECT_FALSE(c.acceptsPointers(buf, buf + 4096 + 8));
}

TEST(ReduceDimTunerTest, GivenTheSpecWhenOutputsAndArgumentsAreMadeThenRowsByInnerAndTheFiveArgumentAbi) {
  for (ReduceOp op : kernels::kAllReduceOps) {
    if (kernels::reduceOpInfo(op).pair) continue;  // below
    SCOPED_TRACE(kernels::reduceOpName(op));
    const RowOpSpec spec = reduceDimSpec(op, 8);
    ASSERT_EQ(spec.outputs.size(), 1u);
    EXPECT_EQ(spec.op, kernels::reduceAtenOpName(op));
    EXPECT_EQ(spec.outputs[0].perRowElements, 8);
    EXPECT_EQ(spec.outputs[0].exactInt64, kernels::reduceOpInfo(op).index);
    EXPECT_EQ(static_cast<bool>(spec.references64), op == ReduceOp::Sum || op == ReduceOp::Mean);
    const at::Tensor in = at::zeros({4, 3 * 8}, at::kHalf);
    const std::vector<at::Tensor> outs = allocateOutputs(spec, in);
    ASSERT_EQ(outs.size(), 1u);
    EXPECT_EQ(outs[0].sizes(), at::IntArrayRef({4, 8}));
    EXPECT_EQ(outs[0].scalar_type(), kernels::reduceOpInfo(op).index ? at::kLong : at::kHalf);
    const KernelArgs a = spec.kernelArgs(in, RowOpArgs{}, outs);
    ASSERT_EQ(a.size(), 5u);
    EXPECT_EQ(a.pointerAt(0), in.const_data_ptr());
    EXPECT_EQ(a.pointerAt(1), outs[0].const_data_ptr());
    EXPECT_EQ(a.int64At(2), 4);  // outer
    EXPECT_EQ(a.int64At(3), 3);  // reduced
    EXPECT_EQ(a.int64At(4), 8);  // inner
  }
  // Sums' near-max inputs are bounded by the reduced extent, not the row's length.
  const RowOpSpec sum = reduceDimSpec(ReduceOp::Sum, 8);
  EXPECT_DOUBLE_EQ(sum.nearMaxMagnitude(DType::Float16, 3 * 8), 65504.0 / 12.0);
  EXPECT_THROW(reduceDimSpec(ReduceOp::Sum, 1), Error);
}

TEST(ReduceDimTunerTest, GivenAPairOpInEitherLayoutWhenItsSpecIsMadeThenValuesBitForBitThenIndicesThenTheSizes) {
  for (ReduceOp op : {ReduceOp::Max, ReduceOp::Min}) {
    for (int64_t inner : {int64_t{0}, int64_t{8}}) {  // 0: the last-dim layout
      SCOPED_TRACE(std::string(kernels::reduceOpName(op)) + " inner " + std::to_string(inner));
      const RowOpSpec spec = inner == 0 ? reduceSpec(op) : reduceDimSpec(op, inner);
      EXPECT_EQ(spec.op, kernels::reduceAtenOpName(op));
      ASSERT_EQ(spec.outputs.size(), 2u);
      EXPECT_EQ(spec.outputs[0].name, "values");
      EXPECT_TRUE(spec.outputs[0].exactBits);
      EXPECT_TRUE(spec.outputs[0].perRowInInputDtype);
      EXPECT_FALSE(spec.outputs[0].exactInt64);
      EXPECT_EQ(spec.outputs[1].name, "indices");
      EXPECT_TRUE(spec.outputs[1].exactInt64);
      EXPECT_FALSE(static_cast<bool>(spec.references64));  // exact: no float64 check
      const at::Tensor in = at::zeros({4, 3 * std::max<int64_t>(inner, 1)}, at::kBFloat16);
      const std::vector<at::Tensor> outs = allocateOutputs(spec, in);
      ASSERT_EQ(outs.size(), 2u);
      const std::vector<int64_t> sizes = inner == 0 ? std::vector<int64_t>{4} : std::vector<int64_t>{4, 8};
      EXPECT_EQ(outs[0].sizes(), at::IntArrayRef(sizes));
      EXPECT_EQ(outs[1].sizes(), at::IntArrayRef(sizes));
      EXPECT_EQ(outs[0].scalar_type(), at::kBFloat16);
      EXPECT_EQ(outs[1].scalar_type(), at::kLong);
      const KernelArgs a = spec.kernelArgs(in, RowOpArgs{}, outs);
      ASSERT_EQ(a.size(), inner == 0 ? 5u : 6u);
      EXPECT_EQ(a.pointerAt(0), in.const_data_ptr());
      EXPECT_EQ(a.pointerAt(1), outs[0].const_data_ptr());
      EXPECT_EQ(a.pointerAt(2), outs[1].const_data_ptr());
      EXPECT_EQ(a.int64At(3), 4);
      EXPECT_EQ(a.int64At(4), 3);
      if (inner != 0) EXPECT_EQ(a.int64At(5), inner);
    }
  }
  // The other ops keep one output, compared as before.
  EXPECT_EQ(reduceSpec(ReduceOp::Argmax).outputs.size(), 1u);
  EXPECT_FALSE(reduceSpec(ReduceOp::Amax).outputs[0].exactBits);
}

TEST(ReduceDimTunerTest, GivenAPairCandidateWhenItsPointersAreGuardedThenTheValuesAlignToTheirVector) {
  const ReduceDimVariant v{DType::Float32, 32, 64, 1024, ReduceOp::Min};
  const HarnessCandidate c = reduceDimCandidate(v, {32, 8, 4}, "x");
  EXPECT_EQ(c.description, "min_dim[tx=32 ty=8 vec=4 unroll=1]");
  EXPECT_EQ(c.outputAlignment, 16u);  // 4 float values (the indices: one int64 at a time)
  alignas(128) static char buf[8192];
  EXPECT_TRUE(c.acceptsPointers(buf, buf + 4096));
  EXPECT_FALSE(c.acceptsPointers(buf, buf + 4096 + 4));
}

TEST(ReduceDimTunerTest, GivenTheValidPointsWhenTheFillRowsAreChosenThenTheWidestTileSetsHowManyCtasAnOuterRowTakes) {
  // Points on the search's axes: threads = tx * ty, rowsPerCta = ty, vec.
  const std::vector<FamilyPoint> valid{{32 * 4, 4, 1}, {128 * 2, 2, 8}, {64 * 8, 8, 4}};  // tiles of 32, 1024, 256
  // inner 4096 in tiles of 1024 elements: 4 CTAs an outer row.
  EXPECT_EQ(middleDimFillRows(4096, valid, 132), fillRowsOfCtas(132, 4));
  EXPECT_EQ(middleDimFillRows(4097, valid, 132), fillRowsOfCtas(132, 5));  // a partial tile is a CTA too
  EXPECT_EQ(middleDimFillRows(8, valid, 132), fillRowsOfCtas(132, 1));
  // Without the widest point, tiles of 256: 16 CTAs an outer row, so fewer rows fill the GPU.
  EXPECT_EQ(middleDimFillRows(4096, {valid[0], valid[2]}, 132), fillRowsOfCtas(132, 16));
  EXPECT_LT(middleDimFillRows(4096, {valid[0], valid[2]}, 132), middleDimFillRows(4096, valid, 132));
  EXPECT_EQ(middleDimFillRows(4096, {}, 132), fillRowsOfCtas(132, 4096));  // no point: one element a tile
}

}  // namespace
}  // namespace hotkernel
