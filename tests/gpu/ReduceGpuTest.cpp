// The last-dim reduction family on the GPU: parameter points compiled with
// NVRTC for the device and run through the five-stage harness against ATen's
// CUDA kernels (at::cuda::sum / mean / amax / argmax) at odd and extreme
// sizes in every dtype; every whitelisted point of bfloat16 at one shape; the
// special values the template's Note [What ATen's last-dim reductions
// compute] describes, checked against ATen exactly through a plan. No timing
// here: speed is measured by the tuner and bench/ops_bench.py --cases reductions.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <tbb/parallel_for.h>

#include <limits>
#include <sstream>

#include "hotkernel/kernels/ReduceFamily.h"
#include "hotkernel/optimizer/Harness.h"
#include "hotkernel/optimizer/PlanFactory.h"
#include "hotkernel/optimizer/ReduceTuner.h"
#include "hotkernel/runtime/CudaDriver.h"
#include "hotkernel/runtime/Nvrtc.h"

namespace hotkernel {
namespace {

using kernels::DType;
using kernels::ReduceFamily;
using kernels::ReduceOp;
using kernels::ReduceParams;
using kernels::ReduceVariant;

// Odd and extreme (rows, cols): one element, one column, lengths no vector
// width divides (13, 4097, 1001), short rows served several per CTA, a row
// of 10^6 elements, decode-like few long rows.
std::vector<std::pair<int64_t, int64_t>> oddShapes() {
  return {{1, 1}, {7, 1}, {7, 13}, {1, 4097}, {33, 4097}, {3, 1001}, {1000, 8}, {300, 128}, {257, 4096},
          {2, 16385}, {1, 1000000}, {4, 128256}};
}

struct Case {
  ReduceVariant v;
  ReduceParams params;
  std::string cubin, error;
  std::string describe() const {
    std::ostringstream os;
    os << kernels::reduceOpName(v.op) << " " << kernels::dtypeName(v.dtype) << " [" << v.rows << ", " << v.cols
       << "] " << params.describe();
    return os.str();
  }
};

void compileCases(std::vector<Case>& cases) {
  const std::string arch = queryDevice(0).nvrtcArch();
  const std::string source = ReduceFamily::source();
  tbb::parallel_for(size_t(0), cases.size(), [&](size_t i) {
    try {
      cases[i].cubin = compileToCubin(source, "reduce_lastdim.cu", arch,
                                      ReduceFamily::compileOptions(cases[i].v.dtype, cases[i].params, cases[i].v.op))
                           .cubin;
    } catch (const std::exception& e) {
      cases[i].error = e.what();
    }
  });
}

std::string failureOf(const HarnessReport& r) {
  const StageResult* f = r.failure();
  std::ostringstream os;
  if (f) os << toString(f->stage) << ": " << f->detail;
  os << " (seed " << r.seed << ")";
  return os.str();
}

class ReduceGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!at::cuda::is_available() || at::cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device";
  }
  static void* stream() { return at::cuda::getCurrentCUDAStream().stream(); }
  // One plan's result for `x` ([rows, cols] CUDA), [rows].
  static at::Tensor runPlan(const at::Tensor& x, ReduceOp op, const ReduceParams& p) {
    const DType d = x.scalar_type() == at::kFloat ? DType::Float32
                    : x.scalar_type() == at::kHalf ? DType::Float16
                                                   : DType::BFloat16;
    const ReduceVariant v{d, x.size(0), x.size(1), op};
    const std::string cubin =
        compileToCubin(ReduceFamily::source(), "reduce_lastdim.cu", queryDevice(0).nvrtcArch(),
                       ReduceFamily::compileOptions(d, p, op))
            .cubin;
    const Plan plan = makeReducePlan(VariantKey{static_cast<int32_t>(d), 0, v.rows, v.cols}, p, cubin, 0, op);
    at::Tensor out = op == ReduceOp::Argmax ? at::full({v.rows}, -7, x.options().dtype(at::kLong))
                                            : at::full({v.rows}, std::numeric_limits<float>::quiet_NaN(), x.options());
    EXPECT_TRUE(plan.launcher->launch(RowKernelArgs{x.const_data_ptr(), out.mutable_data_ptr(), v.rows, v.cols},
                                      stream()));
    return out;
  }
};

TEST_F(ReduceGpuTest, GivenEveryOpAndDTypeWhenTheHarnessRunsOnOddAndExtremeSizesThenEveryStagePasses) {
  std::vector<Case> cases;
  for (ReduceOp op : kernels::kAllReduceOps) {
    for (DType d : kernels::kAllDTypes) {
      for (auto [rows, cols] : oddShapes()) {
        const ReduceVariant v{d, rows, cols, op};
        ASSERT_TRUE(ReduceFamily::guardVariant(v)) << rows << "x" << cols;
        const std::vector<ReduceParams> space = ReduceFamily::parameterSpace(v);
        ASSERT_FALSE(space.empty());
        cases.push_back({v, space.front(), "", ""});  // the best guess
        if (space.size() > 1) cases.push_back({v, space.back(), "", ""});  // the vec == 1 end
      }
    }
  }
  compileCases(cases);
  for (const Case& c : cases) {
    SCOPED_TRACE(c.describe());
    ASSERT_TRUE(c.error.empty()) << c.error;
    const HarnessReport r = runHarness(reduceSpec(c.v.op), reduceCandidate(c.v, c.params, c.cubin), c.v.dtype,
                                       c.v.rows, c.v.cols, 0);
    EXPECT_TRUE(r.passed) << failureOf(r);
  }
}

TEST_F(ReduceGpuTest, GivenEveryBFloat16PointWhenTheHarnessRunsThenEveryStagePassesForEveryOp) {
  // [37, 4104]: 4104 = 8 x 513, every vector width divides it; 37 rows: a
  // partial group of rows for the several-rows points.
  std::vector<Case> cases;
  for (ReduceOp op : kernels::kAllReduceOps) {
    const ReduceVariant v{DType::BFloat16, 37, 4104, op};
    for (const ReduceParams& p : ReduceFamily::allParameterPoints(v.dtype)) {
      if (ReduceFamily::guardParams(v, p)) cases.push_back({v, p, "", ""});
    }
  }
  ASSERT_EQ(cases.size(), 4u * ReduceFamily::allParameterPoints(DType::BFloat16).size());
  compileCases(cases);
  for (const Case& c : cases) {
    SCOPED_TRACE(c.describe());
    ASSERT_TRUE(c.error.empty()) << c.error;
    const HarnessReport r = runHarness(reduceSpec(c.v.op), reduceCandidate(c.v, c.params, c.cubin), c.v.dtype,
                                       c.v.rows, c.v.cols, 0);
    EXPECT_TRUE(r.passed) << failureOf(r);
  }
}

TEST_F(ReduceGpuTest, GivenTiesNansAndInfinitiesWhenArgmaxAndAmaxRunThenTheyEqualAtenExactly) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  // Rows of 8: ties (first index), two NaNs (the first), NaN after the max,
  // all -inf (index 0), +0 / -0 ties, +inf, a lone maximum at the end.
  const std::vector<std::vector<float>> rows = {
      {1, 3, 2, 3, 3, 0, -1, 3},     {1, nan, 2, nan, 5, 0, -1, 7}, {9, 1, 2, 3, 4, 5, 6, nan},
      {-inf, -inf, -inf, -inf, -inf, -inf, -inf, -inf},            {-0.0f, 0, -0.0f, 0, -1, -2, -3, -4},
      {1, 2, inf, 3, inf, 4, 5, 6},  {-5, -4, -3, -2, -1, -1, -1, 0}};
  std::vector<float> flat;
  for (const auto& r : rows) flat.insert(flat.end(), r.begin(), r.end());
  const at::Tensor x32 =
      at::from_blob(flat.data(), {static_cast<int64_t>(rows.size()), 8}, at::kFloat).clone().to(at::kCUDA);
  // The expected indices, which ATen must give too (the Note's reading of GreaterOrNan).
  const at::Tensor expected = at::tensor(std::vector<int64_t>{1, 1, 7, 0, 0, 2, 7}, at::kLong);
  for (at::ScalarType t : {at::kFloat, at::kHalf, at::kBFloat16}) {
    SCOPED_TRACE(c10::toString(t));
    const at::Tensor x = x32.to(t);
    const at::Tensor atenIdx = atenReduceLastDim(x, ReduceOp::Argmax).cpu();
    EXPECT_TRUE(at::equal(atenIdx, expected)) << atenIdx;
    const at::Tensor atenMax = atenReduceLastDim(x, ReduceOp::Amax).cpu().to(at::kFloat);
    for (const ReduceParams& p : {ReduceParams{32, 1, 1, 1}, ReduceParams{128, 2, 1, 32}, ReduceParams{128, 1, 2, 16},
                                  ReduceParams{64, 4, 2, 1}}) {
      if (!ReduceFamily::guardParams({DType::Float32, 7, 8, ReduceOp::Sum}, p)) continue;
      SCOPED_TRACE(p.describe());
      EXPECT_TRUE(at::equal(runPlan(x, ReduceOp::Argmax, p).cpu(), expected));
      const at::Tensor mine = runPlan(x, ReduceOp::Amax, p).cpu().to(at::kFloat);
      // Equal values (+0 == -0) or NaN on both sides.
      EXPECT_TRUE(at::all((mine == atenMax) | (mine.isnan() & atenMax.isnan())).item<bool>()) << mine << atenMax;
      // A zero maximum comes out as +0 (Note [What ATen's last-dim reductions compute]).
      EXPECT_FALSE(std::signbit(mine[4].item<float>()));
    }
  }
}

TEST_F(ReduceGpuTest, GivenExactSumsWhenMeanRunsThenItMatchesAtensFactorBitForBit) {
  // Small integers: every partial sum is exact in float32 in any order, so the
  // only rounding left is mean's product with ATen's factor
  // fl(float(rows) / float(rows * cols)); cols = 3, 7, 1000: factors 1/cols
  // does not hold exactly.
  for (int64_t cols : {3, 7, 1000}) {
    const at::Tensor x = at::randint(-50, 50, {5, cols}, at::TensorOptions().device(at::kCUDA)).to(at::kFloat);
    const at::Tensor ref = atenReduceLastDim(x, ReduceOp::Mean);
    for (const ReduceParams& p : {ReduceParams{32, 1, 1, 1}, ReduceParams{256, 1, 4, 1}}) {
      const at::Tensor mine = runPlan(x, ReduceOp::Mean, p);
      EXPECT_TRUE(at::equal(mine.view(at::kInt), ref.view(at::kInt))) << cols << ": " << mine << ref;
    }
    const at::Tensor sum = runPlan(x, ReduceOp::Sum, {64, 1, 2, 1});
    EXPECT_TRUE(at::equal(sum, atenReduceLastDim(x, ReduceOp::Sum)));
  }
}

TEST_F(ReduceGpuTest, GivenWhatAtenReturnsThenDtypesAndShapesAreTheFamilysAssumptions) {
  const at::Tensor x = at::randn({4, 6, 10}, at::kCUDA).to(at::kBFloat16);
  EXPECT_EQ(at::sum(x, {-1}).scalar_type(), at::kBFloat16);
  EXPECT_EQ(at::mean(x, {-1}).scalar_type(), at::kBFloat16);
  EXPECT_EQ(at::amax(x, {-1}).scalar_type(), at::kBFloat16);
  EXPECT_EQ(at::argmax(x, -1).scalar_type(), at::kLong);
  EXPECT_EQ(at::sum(x, {-1}, true).sizes(), (at::IntArrayRef{4, 6, 1}));
  EXPECT_EQ(at::argmax(x, -1, false).sizes(), (at::IntArrayRef{4, 6}));
  // bf16 sums accumulate in float32: 256 ones then 256 values of 1/32 (which a
  // bf16 accumulator, one step 2 past 256, would drop) sum to 264 (exact in bf16).
  at::Tensor y = at::ones({1, 512}, at::TensorOptions().device(at::kCUDA).dtype(at::kBFloat16));
  y.slice(1, 256, 512).fill_(1.0 / 32.0);
  EXPECT_EQ(at::sum(y, {-1}).item<float>(), 264.0f);
  EXPECT_EQ(runPlan(y, ReduceOp::Sum, {256, 8, 1, 1}).item<float>(), 264.0f);
}

}  // namespace
}  // namespace hotkernel
