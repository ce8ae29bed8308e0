// The cross_entropy family on the GPU: parameter points compiled with NVRTC
// for the device, launched with the family's ABI, compared with ATen's
// cross_entropy_loss (the composite: _log_softmax, then nll_loss_forward) under
// the family's tolerance (Note [Cross entropy tolerance]): every point of the
// whitelist in every dtype and reduction, odd and extreme sizes, ignore_index
// rows (all of them ignored too), special values, the documented NaN for an
// out-of-range labels, determinism and the self-resetting counter. Its own
// binary: no override is installed here, so at:: calls are ATen's kernels.
// No timing (the tuner and bench/ measure speed).
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/ops/cross_entropy_loss_compositeimplicitautograd_dispatch.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <sstream>

#include "hotkernel/kernels/CrossEntropyFamily.h"
#include "hotkernel/optimizer/CrossEntropyTuner.h"
#include "hotkernel/optimizer/Harness.h"
#include "hotkernel/runtime/CudaDriver.h"
#include "hotkernel/runtime/CudaKernelLauncher.h"
#include "hotkernel/runtime/Nvrtc.h"

namespace hotkernel {
namespace {

using kernels::CrossEntropyFamily;
using kernels::CrossEntropyParams;
using kernels::CrossEntropyReduction;
using kernels::CrossEntropyTolerance;
using kernels::CrossEntropyVariant;
using kernels::DType;
using R = CrossEntropyReduction;

constexpr R kAllReductions[] = {R::None, R::Mean, R::Sum};
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

at::ScalarType scalar(DType d) {
  return d == DType::Float32 ? at::kFloat : d == DType::Float16 ? at::kHalf : at::kBFloat16;
}

LaunchGeometry geometry(const CrossEntropyVariant& v, const CrossEntropyParams& p) {
  const kernels::LaunchGeometry g = CrossEntropyFamily::launchGeometry(v, p);
  return LaunchGeometry{g.gridX, g.blockX, g.sharedBytes};
}

int computeCapability() {
  const DeviceInfo info = queryDevice(0);
  return info.ccMajor * 10 + info.ccMinor;
}

// One compiled point for one (dtype, reduction).
struct Compiled {
  DType dtype;
  R reduction;
  CrossEntropyParams params;
  std::string cubin, error;
  std::string describe() const {
    return std::string(kernels::dtypeName(dtype)) + " " + kernels::reductionName(reduction) + " " +
           params.describe();
  }
};

void compileAll(std::vector<Compiled>& points) {
  const std::string arch = queryDevice(0).nvrtcArch();
  const std::string source = CrossEntropyFamily::source();
  tbb::parallel_for(size_t{0}, points.size(), [&](size_t i) {
    Compiled& c = points[i];
    try {
      c.cubin = compileToCubin(source, "cross_entropy.cu", arch,
                               CrossEntropyFamily::compileOptions(c.dtype, c.params, c.reduction))
                    .cubin;
    } catch (const std::exception& e) {
      c.error = e.what();
    }
  });
}

// The family's kernel for one call: out as ATen shapes it ([rows] or 0-dim),
// pre-filled with NaN; the workspace's losses NaN and its counter zeroed
// when the family says so. `work` may be passed in to test its reuse;
// `gridX` (0: the family's) replaces the grid's CTA count.
at::Tensor runKernel(const CudaKernelLauncher& launcher, const CrossEntropyVariant& v, const CrossEntropyParams& p,
                     const at::Tensor& x, const at::Tensor& labels, int64_t ignoreIndex,
                     at::Tensor* work = nullptr, unsigned gridX = 0) {
  at::Tensor out = v.reduction == R::None ? at::full({v.rows}, kNaN, x.options()) : at::full({}, kNaN, x.options());
  at::Tensor ws;
  if (work != nullptr && work->defined()) {
    ws = *work;
  } else if (CrossEntropyFamily::workspaceFloats(v) > 0) {
    ws = at::full({CrossEntropyFamily::workspaceFloats(v)}, kNaN, x.options().dtype(at::kFloat));
    if (CrossEntropyFamily::needsCounter(v, p)) ws.narrow(0, v.rows, 1).zero_();
    if (work != nullptr) *work = ws;
  }
  const void* wsPtr = ws.defined() ? ws.data_ptr() : nullptr;
  LaunchGeometry grid = geometry(v, p);
  if (gridX > 0) grid.gridX = gridX;
  EXPECT_TRUE(CrossEntropyFamily::guardPointers(x.const_data_ptr(), labels.const_data_ptr(), out.data_ptr(), wsPtr,
                                                v, p));
  const bool launched = launcher.launchWith(KernelArgs()
                                                .pointer(x.const_data_ptr())
                                                .pointer(labels.const_data_ptr())
                                                .pointer(out.mutable_data_ptr())
                                                .pointer(wsPtr)
                                                .int64(v.rows)
                                                .int64(v.cols)
                                                .int64(ignoreIndex),
                                            at::cuda::getCurrentCUDAStream().stream(), grid);
  EXPECT_TRUE(launched);
  return out;
}

at::Tensor reference(const at::Tensor& x, const at::Tensor& labels, R r, int64_t ignoreIndex) {
  return at::compositeimplicitautograd::cross_entropy_loss(x, labels, std::nullopt, static_cast<int64_t>(r),
                                                           ignoreIndex, 0.0);
}

// Whether `got` is within the family's tolerance of `ref` (NaN meets NaN,
// infinities equal); "" when it is, else what differs.
std::string check(const at::Tensor& got, const at::Tensor& ref, const CrossEntropyVariant& v, const at::Tensor& x,
                  const at::Tensor& labels, int64_t ignoreIndex) {
  const CrossEntropyTolerance tol = CrossEntropyFamily::tolerance(v.dtype, v.cols);
  if (got.scalar_type() != ref.scalar_type() || got.sizes() != ref.sizes()) {
    return "shape or dtype differs from ATen's: " + std::string(c10::toString(got.scalar_type())) + " vs " +
           std::string(c10::toString(ref.scalar_type()));
  }
  if (v.reduction == R::None) {
    at::Tensor g = got.to(at::kDouble).cpu(), r = ref.to(at::kDouble).cpu();
    const double* gp = g.const_data_ptr<double>();
    const double* rp = r.const_data_ptr<double>();
    for (int64_t i = 0; i < v.rows; ++i) {
      if (!tol.rowWithin(gp[i], rp[i])) {
        std::ostringstream os;
        os << "row " << i << ": got " << gp[i] << ", ATen " << rp[i];
        return os.str();
      }
    }
    return "";
  }
  // The reduced bound needs the reference's per-row losses over the rows not ignored.
  at::Tensor rows = reference(x, labels, R::None, ignoreIndex).to(at::kDouble);
  at::Tensor kept = labels != ignoreIndex;
  const int64_t count = kept.sum().item<int64_t>();
  at::Tensor absKept = at::where(kept, rows.abs(), at::zeros_like(rows));
  const double sumAbs = absKept.sum().item<double>();
  const double maxAbs = count > 0 ? absKept.max().item<double>() : 0.0;
  const double g = got.item<double>(), r = ref.item<double>();
  if (std::isnan(g) || std::isnan(r) || std::isinf(g) || std::isinf(r)) {
    if ((std::isnan(g) && std::isnan(r)) || g == r) return "";
    std::ostringstream os;
    os << "got " << g << ", ATen " << r;
    return os.str();
  }
  const double bound = tol.reducedBound(v.reduction, count, sumAbs, maxAbs, r);
  if (std::fabs(g - r) <= bound) return "";
  std::ostringstream os;
  os << "got " << g << ", ATen " << r << ", bound " << bound << " (" << count << " rows kept)";
  return os.str();
}

// Logits with a spread of scales; labels uniform over the classes, every
// `ignoreEvery`-th row (0: none) set to ignoreIndex.
at::Tensor makeLogits(int64_t rows, int64_t cols, DType d) {
  return (at::randn({rows, cols}, at::kCUDA) * 3.0).to(scalar(d));
}
at::Tensor makeTargets(int64_t rows, int64_t cols, int64_t ignoreIndex, int ignoreEvery) {
  at::Tensor t = at::randint(0, cols, {rows}, at::TensorOptions().device(at::kCUDA).dtype(at::kLong));
  if (ignoreEvery > 0) t.slice(0, 0, rows, ignoreEvery).fill_(ignoreIndex);
  return t;
}

class CrossEntropyGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!at::cuda::is_available() || at::cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device";
  }
  static std::shared_ptr<CudaKernelLauncher> load(const Compiled& c, const CrossEntropyVariant& v) {
    return CudaKernelLauncher::load(0, c.cubin, CrossEntropyFamily::kKernelName, geometry(v, c.params),
                                    CrossEntropyFamily::requiredAlignment(c.dtype, c.params), c.describe());
  }
};

// Every point of the whitelist the device runs, in every dtype and reduction,
// on [37, 4104] (37 rows: several CTAs and CTA groups, so the counter path
// runs; 4104 = 8 x 513 classes: every vector width, a tail in every slice)
// with every 5th row ignored, and once with every row ignored.
TEST_F(CrossEntropyGpuTest, GivenEveryPointWhenRunInEveryDTypeAndReductionThenMatchesAtenCrossEntropy) {
  const int cc = computeCapability();
  std::vector<Compiled> points;
  for (DType d : kernels::kAllDTypes) {
    for (R r : kAllReductions) {
      for (const CrossEntropyParams& p : CrossEntropyFamily::allParameterPoints(d)) {
        if (p.minComputeCapability() <= cc) points.push_back({d, r, p, "", ""});
      }
    }
  }
  compileAll(points);
  const int64_t rows = 37, cols = 4104, ignoreIndex = -100;
  std::map<DType, std::pair<at::Tensor, at::Tensor>> inputs;
  const at::Tensor labels = makeTargets(rows, cols, ignoreIndex, 5);
  const at::Tensor allIgnored = at::full({rows}, ignoreIndex, labels.options());
  for (DType d : kernels::kAllDTypes) inputs[d] = {makeLogits(rows, cols, d), labels};
  for (const Compiled& c : points) {
    SCOPED_TRACE(c.describe());
    ASSERT_TRUE(c.error.empty()) << c.error;
    const CrossEntropyVariant v{c.dtype, rows, cols, c.reduction};
    ASSERT_TRUE(CrossEntropyFamily::guardParams(v, c.params));
    const auto launcher = load(c, v);
    const at::Tensor& x = inputs[c.dtype].first;
    for (const at::Tensor& t : {labels, allIgnored}) {
      const at::Tensor got = runKernel(*launcher, v, c.params, x, t, ignoreIndex);
      const at::Tensor ref = reference(x, t, c.reduction, ignoreIndex);
      EXPECT_EQ(check(got, ref, v, x, t, ignoreIndex), "") << (t.equal(allIgnored) ? "all rows ignored" : "");
    }
  }
}

// Odd and extreme sizes with the family's own choices (every point of
// parameterSpace on this device): one row, one class, classes no vector
// width divides, short rows several per CTA, decode shapes, 4096 rows of
// 32000 classes and rows of a million classes (one of them odd); ignore_index
// the default -100 and a valid class.
TEST_F(CrossEntropyGpuTest, GivenOddSizesWhenRunWithTheFamilysSpaceThenMatchesAten) {
  const int cc = computeCapability();
  const std::vector<std::pair<int64_t, int64_t>> shapes = {
      {1, 1},    {7, 1},      {1, 13},      {7, 13},      {3, 1001},    {300, 128},  {1000, 50},
      {1, 4097}, {2, 100003}, {1, 128256}, {32, 128256}, {257, 4096}, {4096, 32000}, {1, 1000003},
      {3, 1000000}};
  std::vector<Compiled> points;
  std::vector<std::pair<int64_t, int64_t>> pointShapes;
  for (DType d : kernels::kAllDTypes) {
    for (R r : kAllReductions) {
      for (auto [rows, cols] : shapes) {
        for (const CrossEntropyParams& p : CrossEntropyFamily::parameterSpace({d, rows, cols, r}, cc)) {
          points.push_back({d, r, p, "", ""});
          pointShapes.push_back({rows, cols});
        }
      }
    }
  }
  compileAll(points);
  for (size_t i = 0; i < points.size(); ++i) {
    const Compiled& c = points[i];
    const auto [rows, cols] = pointShapes[i];
    SCOPED_TRACE(c.describe() + " [" + std::to_string(rows) + ", " + std::to_string(cols) + "]");
    ASSERT_TRUE(c.error.empty()) << c.error;
    const CrossEntropyVariant v{c.dtype, rows, cols, c.reduction};
    const auto launcher = load(c, v);
    const at::Tensor x = makeLogits(rows, cols, c.dtype);
    const int64_t ignoreIndex = i % 2 == 0 ? -100 : 0;  // class 0 ignored: a valid class index
    const at::Tensor t = makeTargets(rows, cols, ignoreIndex, 3);
    const at::Tensor got = runKernel(*launcher, v, c.params, x, t, ignoreIndex);
    EXPECT_EQ(check(got, reference(x, t, c.reduction, ignoreIndex), v, x, t, ignoreIndex), "");
  }
}

// The big shape once per dtype and reduction (the first point of the space):
// 8192 x 128256 (2 GiB of bf16 logits).
TEST_F(CrossEntropyGpuTest, GivenTheLargeVocabularyBatchWhenRunThenMatchesAten) {
  const int cc = computeCapability();
  const int64_t rows = 8192, cols = 128256;
  for (DType d : {DType::BFloat16, DType::Float16}) {
    const at::Tensor x = makeLogits(rows, cols, d);
    const at::Tensor t = makeTargets(rows, cols, -100, 7);
    for (R r : kAllReductions) {
      const CrossEntropyVariant v{d, rows, cols, r};
      std::vector<Compiled> points = {{d, r, CrossEntropyFamily::parameterSpace(v, cc).front(), "", ""}};
      compileAll(points);
      SCOPED_TRACE(points[0].describe());
      ASSERT_TRUE(points[0].error.empty()) << points[0].error;
      const at::Tensor got = runKernel(*load(points[0], v), v, points[0].params, x, t, -100);
      EXPECT_EQ(check(got, reference(x, t, r, -100), v, x, t, -100), "");
    }
  }
}

// Note [Cross entropy special values] against ATen: rows holding NaN, +inf,
// only -inf, a -inf label's logit, a huge logit, an ignored NaN row.
TEST_F(CrossEntropyGpuTest, GivenSpecialValuesWhenRunThenNanAndInfinitiesWhereAtenHasThem) {
  const int cc = computeCapability();
  const int64_t rows = 8, cols = 5000, ignoreIndex = -100;
  for (DType d : kernels::kAllDTypes) {
    at::Tensor x = at::randn({rows, cols}, at::kCUDA);
    at::Tensor t = makeTargets(rows, cols, ignoreIndex, 0);
    x[0][17] = kNaN;
    x[1][4000] = kInf;
    x[2].fill_(-kInf);
    t[3] = 11;
    x[3][11] = -kInf;
    x[4][123] = d == DType::Float16 ? 60000.0f : 3e38f;
    x[5][7] = kNaN;
    t[5] = ignoreIndex;
    x = x.to(scalar(d));
    for (R r : kAllReductions) {
      const CrossEntropyVariant v{d, rows, cols, r};
      std::vector<Compiled> points;
      for (const CrossEntropyParams& p : CrossEntropyFamily::parameterSpace(v, cc)) points.push_back({d, r, p, "", ""});
      compileAll(points);
      for (const Compiled& c : points) {
        SCOPED_TRACE(c.describe());
        ASSERT_TRUE(c.error.empty()) << c.error;
        const at::Tensor got = runKernel(*load(c, v), v, c.params, x, t, ignoreIndex);
        const at::Tensor ref = reference(x, t, r, ignoreIndex);
        EXPECT_EQ(check(got, ref, v, x, t, ignoreIndex), "");
        if (r == R::None) {
          EXPECT_TRUE(got[0].isnan().item<bool>());
          EXPECT_TRUE(got[2].isnan().item<bool>());
          EXPECT_EQ(got[3].item<float>(), kInf);
          EXPECT_EQ(got[5].item<float>(), 0.0f);
        }
      }
    }
  }
}

// A label outside [0, cols) that is not ignore_index: ATen asserts on the
// device (not run here: it would lose the context); the family writes NaN.
TEST_F(CrossEntropyGpuTest, GivenAnOutOfRangeTargetWhenRunThenThatRowIsNanAndSoIsTheReduction) {
  const int cc = computeCapability();
  const int64_t rows = 6, cols = 300;
  for (R r : kAllReductions) {
    const CrossEntropyVariant v{DType::BFloat16, rows, cols, r};
    std::vector<Compiled> points = {{v.dtype, r, CrossEntropyFamily::parameterSpace(v, cc).front(), "", ""}};
    compileAll(points);
    ASSERT_TRUE(points[0].error.empty()) << points[0].error;
    const at::Tensor x = makeLogits(rows, cols, v.dtype);
    at::Tensor t = makeTargets(rows, cols, -100, 0);
    t[1] = cols;
    t[4] = -1;
    const at::Tensor got = runKernel(*load(points[0], v), v, points[0].params, x, t, -100);
    if (r == R::None) {
      EXPECT_TRUE(got[1].isnan().item<bool>());
      EXPECT_TRUE(got[4].isnan().item<bool>());
      EXPECT_FALSE(got[0].isnan().item<bool>());
      EXPECT_GT(got[0].item<float>(), 0.0f);
    } else {
      EXPECT_TRUE(got.isnan().item<bool>()) << kernels::reductionName(r);
    }
  }
}

// The decode cluster points (Note [Cross entropy parameter ranking]): clusters
// of 16 CTAs (non-portable: the launcher's opt-in) and the cluster-8 point the
// H200 served [32, 128256] with, through the five-stage harness as the tuner
// runs them (special values, a sweep of shapes, determinism, edge cases).
TEST_F(CrossEntropyGpuTest, GivenDecodeClusterPointsWhenRunThroughTheHarnessThenAllFiveStagesPass) {
  const int cc = computeCapability();
  if (cc < 90) {
    // No cluster is offered below sm_90.
    for (const CrossEntropyParams& p : CrossEntropyFamily::parameterSpace({DType::BFloat16, 32, 128256, R::Mean}, cc)) {
      EXPECT_EQ(p.cluster, 1) << p.describe();
    }
    return;
  }
  struct Case {
    CrossEntropyVariant v;
    CrossEntropyParams p;
  };
  const std::vector<Case> cases = {
      {{DType::BFloat16, 32, 128256, R::Mean}, {256, 8, 4, 1, 16}},
      {{DType::BFloat16, 1, 128256, R::None}, {512, 8, 2, 1, 16}},
      {{DType::BFloat16, 32, 128256, R::Sum}, {256, 8, 2, 1, 8}},
      {{DType::Float32, 3, 100000, R::Mean}, {512, 4, 4, 1, 16}},
  };
  const std::string arch = queryDevice(0).nvrtcArch();
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(kernels::dtypeName(c.v.dtype)) + " [" + std::to_string(c.v.rows) + ", " +
                 std::to_string(c.v.cols) + "] " + kernels::reductionName(c.v.reduction) + " " + c.p.describe());
    ASSERT_TRUE(CrossEntropyFamily::guardParams(c.v, c.p));
    const std::string cubin = compileToCubin(CrossEntropyFamily::source(), "cross_entropy.cu", arch,
                                             CrossEntropyFamily::compileOptions(c.v.dtype, c.p, c.v.reduction))
                                  .cubin;
    const HarnessReport r = runHarness(crossEntropySpec(c.v.reduction), crossEntropyCandidate(c.v, c.p, cubin),
                                       c.v.dtype, c.v.rows, c.v.cols, 0);
    EXPECT_TRUE(r.passed) << (r.failure() ? std::string(toString(r.failure()->stage)) + ": " + r.failure()->detail
                                          : std::string("?"));
    EXPECT_EQ(r.stages.size(), 5u);
  }
}

// Note [Deterministic cross entropy reduction]: bitwise identical over runs,
// and the counter the last CTA resets serves the next launch on the same
// workspace without zeroing it again.
TEST_F(CrossEntropyGpuTest, GivenRepeatedRunsOnOneWorkspaceWhenReducingThenBitwiseIdentical) {
  const int cc = computeCapability();
  const int64_t rows = 1000, cols = 32000;
  for (R r : {R::Mean, R::Sum}) {
    const CrossEntropyVariant v{DType::BFloat16, rows, cols, r};
    std::vector<Compiled> points;
    for (const CrossEntropyParams& p : CrossEntropyFamily::parameterSpace(v, cc)) points.push_back({v.dtype, r, p, "", ""});
    compileAll(points);
    const at::Tensor x = makeLogits(rows, cols, v.dtype);
    const at::Tensor t = makeTargets(rows, cols, -100, 4);
    for (const Compiled& c : points) {
      SCOPED_TRACE(c.describe());
      ASSERT_TRUE(c.error.empty()) << c.error;
      const auto launcher = load(c, v);
      at::Tensor work;
      const at::Tensor first = runKernel(*launcher, v, c.params, x, t, -100, &work);
      for (int run = 0; run < 3; ++run) {
        const at::Tensor again = runKernel(*launcher, v, c.params, x, t, -100, &work);
        EXPECT_TRUE(again.view(at::kShort).equal(first.view(at::kShort))) << "run " << run;
      }
      if (CrossEntropyFamily::needsCounter(v, c.params)) {
        EXPECT_EQ(work.narrow(0, rows, 1).view(at::kInt).item<int32_t>(), 0) << "counter left non-zero";
      }
      EXPECT_EQ(check(first, reference(x, t, r, -100), v, x, t, -100), "");
    }
  }
}


// The cluster kernel's rows after a cluster's first (Note [Cross entropy over
// a cluster]: a cluster barrier before the next row's pushes, the pairs'
// double buffer by row parity, a ticket a row): never run with the family's
// grid (a cluster a row), so here with grids of one, two and three clusters
// for 37 rows, in every reduction, twice on one workspace. Each result is
// bitwise the one-cluster-a-row grid's (the row's merge and the ticket
// order do not depend on the grid) and the counter is left at 0.
TEST_F(CrossEntropyGpuTest, GivenClusterPointsWhenTheGridHoldsFewerClustersThanRowsThenClustersServeSeveralRows) {
  const int cc = computeCapability();
  if (cc < 90) GTEST_SKIP() << "thread-block clusters need sm_90";
  const int64_t rows = 37, cols = 20000, ignoreIndex = -100;
  std::vector<Compiled> points;
  for (R r : kAllReductions) {
    for (const CrossEntropyParams& p :
         {CrossEntropyParams{256, 8, 2, 1, 16}, CrossEntropyParams{256, 8, 4, 1, 8}, CrossEntropyParams{256, 8, 2, 1, 2}}) {
      points.push_back({DType::BFloat16, r, p, "", ""});
    }
  }
  compileAll(points);
  const at::Tensor x = makeLogits(rows, cols, DType::BFloat16);
  const at::Tensor t = makeTargets(rows, cols, ignoreIndex, 5);
  for (const Compiled& c : points) {
    SCOPED_TRACE(c.describe());
    ASSERT_TRUE(c.error.empty()) << c.error;
    const CrossEntropyVariant v{c.dtype, rows, cols, c.reduction};
    ASSERT_TRUE(CrossEntropyFamily::guardParams(v, c.params));
    const auto launcher = load(c, v);
    const at::Tensor full = runKernel(*launcher, v, c.params, x, t, ignoreIndex);
    EXPECT_EQ(check(full, reference(x, t, c.reduction, ignoreIndex), v, x, t, ignoreIndex), "");
    for (unsigned clusters : {1u, 2u, 3u}) {
      at::Tensor work;
      for (int run = 0; run < 2; ++run) {
        const at::Tensor got =
            runKernel(*launcher, v, c.params, x, t, ignoreIndex, &work, clusters * static_cast<unsigned>(c.params.cluster));
        EXPECT_TRUE(got.view(at::kShort).equal(full.view(at::kShort)))
            << clusters << " clusters, run " << run << ": " << check(got, full, v, x, t, ignoreIndex);
      }
      if (work.defined()) {
        EXPECT_EQ(work.narrow(0, rows, 1).view(at::kInt).item<int32_t>(), 0) << clusters << " clusters: counter";
      }
    }
  }
}

// Note [One row needs no reduction pass]: with one row, sum is the row's
// loss and mean the loss over a count of 1 (or 0 / 0 = NaN when the row is
// ignored), bit for bit what the reduction pass computed (0 + loss: a -0
// loss reads +0), and the workspace is left as it was. Cluster and one-CTA
// points, every dtype, a kept and an ignored labels.
TEST_F(CrossEntropyGpuTest, GivenOneRowWhenReducedThenTheResultIsItsLossBitForBitAndTheWorkspaceIsUntouched) {
  const int cc = computeCapability();
  constexpr size_t kPointsPerShape = 4;
  for (DType d : kernels::kAllDTypes) {
    for (int64_t cols : {int64_t{4097}, int64_t{128256}}) {
      std::vector<CrossEntropyParams> params;
      for (const CrossEntropyParams& p : CrossEntropyFamily::parameterSpace({d, 1, cols, R::Mean}, cc)) {
        if (params.size() < kPointsPerShape) params.push_back(p);
      }
      // A one-CTA point too, whatever the space ranks first.
      for (const CrossEntropyParams& p : CrossEntropyFamily::parameterSpace({d, 1, cols, R::Mean}, cc)) {
        if (p.cluster <= 1 && std::find(params.begin(), params.end(), p) == params.end()) {
          params.push_back(p);
          break;
        }
      }
      std::vector<Compiled> points;
      for (const CrossEntropyParams& p : params) {
        for (R r : kAllReductions) points.push_back({d, r, p, "", ""});
      }
      compileAll(points);
      const at::Tensor x = makeLogits(1, cols, d);
      for (size_t i = 0; i < points.size(); i += 3) {
        for (int64_t ignoreIndex : {int64_t{-100}, int64_t{5}}) {
          SCOPED_TRACE(points[i].describe() + " cols " + std::to_string(cols) + " ignore_index " +
                       std::to_string(ignoreIndex));
          const at::Tensor t = at::full({1}, 5, at::TensorOptions().device(at::kCUDA).dtype(at::kLong));
          const bool ignored = ignoreIndex == 5;
          float loss = 0.0f;
          for (size_t k = 0; k < 3; ++k) {
            const Compiled& c = points[i + k];
            ASSERT_TRUE(c.error.empty()) << c.error;
            const CrossEntropyVariant v{d, 1, cols, c.reduction};
            EXPECT_EQ(CrossEntropyFamily::workspaceFloats(v), 0) << "one row needs no workspace";
            // A NaN buffer passed anyway must stay untouched; the call the
            // trampoline makes (no workspace: a null pointer) gives the same bits.
            at::Tensor work = at::full({2}, kNaN, at::TensorOptions().device(at::kCUDA).dtype(at::kFloat));
            const at::Tensor got = runKernel(*load(c, v), v, c.params, x, t, ignoreIndex, &work);
            const at::Tensor gotWithout = runKernel(*load(c, v), v, c.params, x, t, ignoreIndex);
            EXPECT_TRUE(at::equal(got.reshape({-1}).view(at::kByte), gotWithout.reshape({-1}).view(at::kByte)))
                << kernels::reductionName(c.reduction) << ": with and without a workspace";
            const float g = got.to(at::kFloat).reshape({-1})[0].item<float>();
            if (c.reduction == R::None) {
              loss = g;
              EXPECT_EQ(ignored, loss == 0.0f) << "loss " << loss;
              continue;
            }
            EXPECT_TRUE(work.isnan().all().item<bool>()) << kernels::reductionName(c.reduction)
                                                         << ": the workspace was written";
            if (c.reduction == R::Mean && ignored) {
              EXPECT_TRUE(std::isnan(g)) << "mean of an ignored row: " << g;
              continue;
            }
            const float want = 0.0f + loss;
            uint32_t gotBits = 0, wantBits = 0;
            std::memcpy(&gotBits, &g, sizeof g);
            std::memcpy(&wantBits, &want, sizeof want);
            EXPECT_EQ(gotBits, wantBits) << kernels::reductionName(c.reduction) << ": got " << g << ", loss " << loss;
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace hotkernel
