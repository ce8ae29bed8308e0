// The rms_norm and layer_norm families on the GPU: parameter points compiled
// with NVRTC for the device, launched through their plans, every output (out,
// and the float32 rstd / mean) compared with the ATen op under the family's
// tolerance table, at odd and extreme sizes, in every dtype, with and without
// weight (and bias). No timing here: speed is measured by the tuner and bench/.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/ops/_fused_rms_norm_cuda_dispatch.h>
#include <ATen/ops/native_layer_norm_cuda_dispatch.h>
#include <tbb/parallel_for.h>

#include <limits>
#include <optional>
#include <sstream>
#include <type_traits>

#include "hotkernel/kernels/FamilyDescriptor.h"
#include "hotkernel/kernels/LayerNormFamily.h"
#include "hotkernel/kernels/RmsNormFamily.h"
#include "hotkernel/kernels/VariantOptions.h"
#include "hotkernel/optimizer/PlanFactory.h"
#include "hotkernel/runtime/CudaDriver.h"
#include "hotkernel/runtime/CudaKernelLauncher.h"
#include "hotkernel/runtime/Nvrtc.h"

namespace hotkernel {
namespace {

using kernels::DType;
using kernels::LayerNormFamily;
using kernels::NormParams;
using kernels::NormTolerance;
using kernels::RmsNormFamily;

at::ScalarType scalar(DType d) {
  return d == DType::Float32 ? at::kFloat : d == DType::Float16 ? at::kHalf : at::kBFloat16;
}

// Odd and extreme (rows, cols): one element, one column, rows of a few
// elements, lengths no vector width divides (4097, 13, 16385), short rows
// served several per CTA, a row of 10^6 elements (the guard accepts rows up
// to 2^30: streaming points), and a long register-resident row (24576).
std::vector<std::pair<int64_t, int64_t>> oddShapes() {
  return {{1, 1}, {7, 1}, {7, 13}, {1, 4097}, {33, 4097}, {1000, 8}, {300, 128},
          {257, 4096}, {4, 24576}, {2, 16385}, {1, 1000000}};
}

// Elements of `got` outside `bound` of `ref` (NaN must meet NaN, infinities
// must be equal), compared in float64 on the device.
struct Mismatch {
  int64_t count = 0;
  double maxAbsError = 0;
  std::string first;
};

Mismatch compare(const at::Tensor& got, const at::Tensor& ref, const at::Tensor& bound) {
  at::Tensor g = got.reshape({-1}).to(at::kDouble), r = ref.reshape({-1}).to(at::kDouble);
  at::Tensor b = bound.reshape({-1}).to(at::kDouble).expand_as(r);
  at::Tensor bothNan = g.isnan() & r.isnan();
  at::Tensor sameInf = (g.isinf() | r.isinf()) & (g == r);
  at::Tensor diff = (g - r).abs();
  at::Tensor ok = bothNan | sameInf | (diff <= b);
  Mismatch m;
  m.count = (~ok).sum().item<int64_t>();
  at::Tensor finite = at::where(ok & ~bothNan & ~sameInf, diff, at::zeros_like(diff));
  m.maxAbsError = finite.numel() ? finite.max().item<double>() : 0.0;
  if (m.count > 0) {
    const int64_t i = (~ok).nonzero().select(1, 0)[0].item<int64_t>();
    std::ostringstream os;
    os << "element " << i << ": got " << g[i].item<double>() << ", ATen " << r[i].item<double>() << ", bound "
       << b[i].item<double>();
    m.first = os.str();
  }
  return m;
}

at::Tensor outBound(const NormTolerance& t, const at::Tensor& ref) {
  return ref.to(at::kDouble).abs() * t.outRel + t.outAbs;
}
at::Tensor rstdBound(const NormTolerance& t, const at::Tensor& refRstd) {
  return refRstd.to(at::kDouble).abs() * t.statRel;
}
// NormTolerance::meanWithin: statRel * (|ref| + 1 / refRstd), the row's scale.
at::Tensor meanBound(const NormTolerance& t, const at::Tensor& refMean, const at::Tensor& refRstd) {
  at::Tensor r = refRstd.to(at::kDouble);
  at::Tensor scale = at::where((r > 0) & r.isfinite(), r.reciprocal(), at::zeros_like(r));
  return (refMean.to(at::kDouble).abs() + scale) * t.statRel;
}

// One compiled point of a family for one variant.
struct Case {
  DType dtype;
  int64_t rows, cols;
  bool hasWeight, hasBias;
  NormParams params;
  std::string cubin, error;
  // Compiled for this column count (HK_COLS, what the optimizer compiles:
  // Note [Specialized columns] in kernels/norm/rms_norm.cu), else for any.
  bool specialized = true;

  std::string describe() const {
    std::ostringstream os;
    os << kernels::dtypeName(dtype) << " [" << rows << ", " << cols << "] " << params.describe()
       << (hasWeight ? " weight" : "") << (hasBias ? " bias" : "") << (specialized ? " HK_COLS" : " any cols");
    return os.str();
  }
  int64_t specializedCols() const { return specialized ? cols : 0; }
  VariantKey key() const {
    VariantKey k{static_cast<int32_t>(dtype), 0, rows, cols};
    k.options = (hasWeight ? kernels::variant_options::kWeight : 0) | (hasBias ? kernels::variant_options::kBias : 0);
    return k;
  }
};

// The points worth checking for one variant: all of parameterSpace for the
// common configuration (`all`), else its first and last point (the best guess
// and the vec == 1 / streaming end).
std::vector<NormParams> pointsFor(const std::vector<NormParams>& space, bool all) {
  if (all || space.size() <= 2) return space;
  return {space.front(), space.back()};
}

template <typename OptionsFn>
void compileCases(std::vector<Case>& cases, const std::string& source, const char* program, OptionsFn options) {
  const std::string arch = queryDevice(0).nvrtcArch();
  tbb::parallel_for(size_t(0), cases.size(), [&](size_t i) {
    try {
      cases[i].cubin = compileToCubin(source, program, arch, options(cases[i])).cubin;
    } catch (const std::exception& e) {
      cases[i].error = e.what();
    }
  });
}

// Appends `p` on `v` (which the family's guard must accept) to `cases`.
void addCase(std::vector<Case>& cases, const kernels::RmsNormVariant& v, const NormParams& p, bool specialized) {
  ASSERT_TRUE(RmsNormFamily::guardParams(v, p)) << v.rows << "x" << v.cols << " " << p.describe();
  cases.push_back(Case{v.dtype, v.rows, v.cols, v.hasWeight, false, p, "", ""});
  cases.back().specialized = specialized;
}
void addCase(std::vector<Case>& cases, const kernels::LayerNormVariant& v, const NormParams& p, bool specialized) {
  ASSERT_TRUE(LayerNormFamily::guardParams(v, p)) << v.rows << "x" << v.cols << " " << p.describe();
  cases.push_back(Case{v.dtype, v.rows, v.cols, v.hasWeight, v.hasBias, p, "", ""});
  cases.back().specialized = specialized;
}

// The split-row points of the family's space for every dtype, each shape and with and without the
// column arrays: the cluster points (`grid` false) or the grid-split ones, every other one compiled
// for any columns where the arrays are absent. Each variant must have at least one.
template <typename Family, typename Variant>
void addSpaceSplitPoints(std::vector<Case>& cases, const std::vector<std::pair<int64_t, int64_t>>& shapes,
                         int computeCapability, bool grid) {
  for (DType d : kernels::kAllDTypes) {
    for (auto [rows, cols] : shapes) {
      for (bool arrays : {true, false}) {
        Variant v{d, rows, cols};
        v.hasWeight = arrays;
        if constexpr (std::is_same_v<Variant, kernels::LayerNormVariant>) v.hasBias = arrays;
        int split = 0;
        for (const NormParams& p : Family::parameterSpace(v, computeCapability)) {
          if (grid ? p.split == 1 : p.cluster == 1) continue;
          addCase(cases, v, p, arrays || split % 2 == 0);
          ++split;
        }
        EXPECT_GT(split, 0) << kernels::dtypeName(d) << " [" << rows << ", " << cols << "]: no split-row point";
      }
    }
  }
}

// A grid-split plan's workspace as a fresh one looks to the kernel: NaN partials, the counter (its
// last float) at 0; undefined for a plan without one.
at::Tensor workspaceFor(const Plan& plan, const at::Tensor& like) {
  if (plan.workspaceFloats <= 0) return at::Tensor();
  at::Tensor work = at::full({plan.workspaceFloats}, std::numeric_limits<float>::quiet_NaN(), like.options().dtype(at::kFloat));
  work[plan.workspaceFloats - 1].zero_();
  return work;
}
float* partialsOf(const at::Tensor& work) { return work.defined() ? work.mutable_data_ptr<float>() : nullptr; }
void* counterOf(const at::Tensor& work) { return work.defined() ? partialsOf(work) + (work.numel() - 1) : nullptr; }
// Whether the kernel left the counter at 0 (what the next launch on the workspace needs).
bool counterCleared(const at::Tensor& work) { return !work.defined() || work[-1].view(at::kInt).item<int32_t>() == 0; }

class NormGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!at::cuda::is_available() || at::cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device";
  }
  static void* stream() { return at::cuda::getCurrentCUDAStream().stream(); }
  // Rows around zero mean with a spread of scales; weights of both signs up to 1 in magnitude.
  static at::Tensor input(const Case& c) {
    return (at::randn({c.rows, c.cols}, at::kCUDA) * 2 + 0.5).to(scalar(c.dtype));
  }
  static at::Tensor column(const Case& c, double scale, double shift) {
    return (at::rand({c.cols}, at::kCUDA) * scale + shift).to(scalar(c.dtype));
  }
  // Compiles `cases` (rms_norm), runs each plan and compares out and rstd with ATen's _fused_rms_norm.
  static void checkRmsNormCases(std::vector<Case>& cases) {
    compileCases(cases, RmsNormFamily::source(), "rms_norm.cu",
                 [](const Case& c) {
                   return RmsNormFamily::compileOptions(c.dtype, c.params, c.hasWeight, c.specializedCols());
                 });
    int i = 0;
    for (const Case& c : cases) {
      SCOPED_TRACE(c.describe());
      ASSERT_TRUE(c.error.empty()) << c.error;
      Plan plan = kernels::rmsNormDescriptor().makePlan(c.key(), c.params.toJson(), c.cubin, 0);
      at::Tensor x = input(c);
      std::optional<at::Tensor> weight;
      if (c.hasWeight) weight = column(c, 2.0, -1.0);
      // Every other case uses eps = None (ATen's FLT_EPSILON default).
      const std::optional<double> eps = (i++ % 2) ? std::optional<double>(1e-5) : std::nullopt;
      const float kernelEps = eps ? static_cast<float>(*eps) : RmsNormFamily::defaultEps(c.dtype);
      at::Tensor out = at::full_like(x, std::numeric_limits<float>::quiet_NaN());
      at::Tensor rstd = at::full({c.rows}, std::numeric_limits<float>::quiet_NaN(), x.options().dtype(at::kFloat));
      ASSERT_EQ(plan.workspaceFloats, RmsNormFamily::workspaceFloats({c.dtype, c.rows, c.cols, c.hasWeight}, c.params));
      const at::Tensor work = workspaceFor(plan, x);
      // Twice for a grid-split point (the second launch finds the counter the first left), once otherwise.
      for (int launch = 0; launch < (work.defined() ? 2 : 1); ++launch) {
        ASSERT_TRUE(plan.launcher->launchArgs(KernelArgs()
                                                  .pointer(x.const_data_ptr())
                                                  .pointer(weight ? weight->const_data_ptr() : nullptr)
                                                  .pointer(out.mutable_data_ptr())
                                                  .pointer(rstd.mutable_data_ptr())
                                                  .int64(c.rows)
                                                  .int64(c.cols)
                                                  .float32(kernelEps)
                                                  .pointer(partialsOf(work))
                                                  .pointer(counterOf(work)),
                                              stream()));
        // Stop before another launch if the kernel left the counter set (it would not find 0).
        ASSERT_TRUE(counterCleared(work)) << "launch " << launch;
      }
      auto [refOut, refRstd] = at::cuda::_fused_rms_norm(x, {c.cols}, weight, eps);
      // What the family documents ATen returns: rstd float32 per row, shape [rows, 1].
      ASSERT_EQ(refRstd.scalar_type(), at::kFloat);
      ASSERT_EQ(refRstd.sizes(), (at::IntArrayRef{c.rows, 1}));
      ASSERT_EQ(refOut.scalar_type(), x.scalar_type());
      const NormTolerance tol = RmsNormFamily::tolerance(c.dtype, c.cols);
      const Mismatch mo = compare(out, refOut, outBound(tol, refOut));
      EXPECT_EQ(mo.count, 0) << "out: " << mo.first;
      const Mismatch mr = compare(rstd, refRstd, rstdBound(tol, refRstd));
      EXPECT_EQ(mr.count, 0) << "rstd: " << mr.first;
      EXPECT_FALSE(out.isnan().any().item<bool>());
      EXPECT_FALSE(rstd.isnan().any().item<bool>());
    }
  }
  // Compiles `cases` (layer_norm), runs each plan and compares out, mean and rstd with ATen's native_layer_norm.
  static void checkLayerNormCases(std::vector<Case>& cases) {
    compileCases(cases, LayerNormFamily::source(), "layer_norm.cu", [](const Case& c) {
      return LayerNormFamily::compileOptions(c.dtype, c.params, c.hasWeight, c.hasBias, c.specializedCols());
    });
    for (const Case& c : cases) {
      SCOPED_TRACE(c.describe());
      ASSERT_TRUE(c.error.empty()) << c.error;
      Plan plan = kernels::layerNormDescriptor().makePlan(c.key(), c.params.toJson(), c.cubin, 0);
      at::Tensor x = input(c);
      std::optional<at::Tensor> weight, bias;
      if (c.hasWeight) weight = column(c, 2.0, -1.0);
      if (c.hasBias) bias = column(c, 1.0, -0.5);
      const double eps = 1e-5;
      at::Tensor out = at::full_like(x, std::numeric_limits<float>::quiet_NaN());
      const auto statOpts = x.options().dtype(at::kFloat);
      at::Tensor mean = at::full({c.rows}, std::numeric_limits<float>::quiet_NaN(), statOpts);
      at::Tensor rstd = at::full({c.rows}, std::numeric_limits<float>::quiet_NaN(), statOpts);
      ASSERT_EQ(plan.workspaceFloats,
                LayerNormFamily::workspaceFloats({c.dtype, c.rows, c.cols, c.hasWeight, c.hasBias}, c.params));
      const at::Tensor work = workspaceFor(plan, x);
      for (int launch = 0; launch < (work.defined() ? 2 : 1); ++launch) {
        ASSERT_TRUE(plan.launcher->launchArgs(KernelArgs()
                                                  .pointer(x.const_data_ptr())
                                                  .pointer(weight ? weight->const_data_ptr() : nullptr)
                                                  .pointer(bias ? bias->const_data_ptr() : nullptr)
                                                  .pointer(out.mutable_data_ptr())
                                                  .pointer(mean.mutable_data_ptr())
                                                  .pointer(rstd.mutable_data_ptr())
                                                  .int64(c.rows)
                                                  .int64(c.cols)
                                                  .float32(static_cast<float>(eps))
                                                  .pointer(partialsOf(work))
                                                  .pointer(counterOf(work)),
                                              stream()));
        ASSERT_TRUE(counterCleared(work)) << "launch " << launch;
      }
      auto [refOut, refMean, refRstd] = at::cuda::native_layer_norm(x, {c.cols}, weight, bias, eps);
      // What the family documents ATen returns on CUDA: mean and rstd float32, shape [rows, 1].
      ASSERT_EQ(refMean.scalar_type(), at::kFloat);
      ASSERT_EQ(refRstd.scalar_type(), at::kFloat);
      ASSERT_EQ(refMean.sizes(), (at::IntArrayRef{c.rows, 1}));
      const NormTolerance tol = LayerNormFamily::tolerance(c.dtype, c.cols);
      const Mismatch mo = compare(out, refOut, outBound(tol, refOut));
      EXPECT_EQ(mo.count, 0) << "out: " << mo.first;
      const Mismatch mm = compare(mean, refMean, meanBound(tol, refMean, refRstd));
      EXPECT_EQ(mm.count, 0) << "mean: " << mm.first;
      const Mismatch mr = compare(rstd, refRstd, rstdBound(tol, refRstd));
      EXPECT_EQ(mr.count, 0) << "rstd: " << mr.first;
      EXPECT_FALSE(out.isnan().any().item<bool>());
    }
  }
};

TEST_F(NormGpuTest, GivenRmsNormPointsWhenRunOnOddSizesThenOutAndRstdMatchAten) {
  std::vector<Case> cases;
  for (DType d : kernels::kAllDTypes) {
    for (auto [rows, cols] : oddShapes()) {
      for (bool w : {true, false}) {
        const kernels::RmsNormVariant v{d, rows, cols, w};
        ASSERT_TRUE(RmsNormFamily::guardVariant(v)) << rows << "x" << cols;
        for (const NormParams& p : pointsFor(RmsNormFamily::parameterSpace(v), w)) {
          cases.push_back(Case{d, rows, cols, w, false, p, "", ""});
          cases.back().specialized = w || cases.size() % 2 == 0;  // the template's both paths
        }
      }
    }
  }
  checkRmsNormCases(cases);
}

// Note [Split norm rows over a cluster]: the split-row points sm_90 spaces start with for few long rows,
// every cluster size streamed, register slices, and rows with fewer vectors than CTAs (ranks with an
// empty slice), against ATen.
TEST_F(NormGpuTest, GivenRmsNormSplitRowPointsWhenRunOnFewLongRowsThenOutAndRstdMatchAten) {
  const DeviceInfo info = queryDevice(0);
  if (info.ccMajor < 9) GTEST_SKIP() << "thread-block clusters need sm_90";
  std::vector<Case> cases;
  auto add = [&](const kernels::RmsNormVariant& v, const NormParams& p, bool specialized) {
    addCase(cases, v, p, specialized);
  };
  addSpaceSplitPoints<RmsNormFamily, kernels::RmsNormVariant>(
      cases, {{1, 65536}, {3, 1048576 + 8}, {8, 300000}, {5, 131072 + 8}}, 90, /*grid=*/false);
  for (DType d : kernels::kAllDTypes) {
    const int widest = static_cast<int>(16 / kernels::elementSize(d));
    for (int cluster : {2, 4, 8, 16}) {
      add({d, 2, 262144 + 8 * widest, true}, NormParams{1024, widest, 0, 1, cluster}, true);
    }
    add({d, 3, 30000, true}, NormParams{512, widest, 4, 1, 4}, true);  // up to 7,500 vectors: 4 CTAs of 2,048
    add({d, 2, 24, true}, NormParams{256, 1, 1, 1, 16}, false);        // 24 vectors: 8 CTAs with nothing to do
    add({d, 7, 13, false}, NormParams{1024, 1, 1, 1, 8}, true);        // odd, scalar
  }
  checkRmsNormCases(cases);
}

// Note [Split norm rows over a cooperative grid]: the grid-split points the spaces start with for
// few long rows, every split and CTA size, rows with fewer vectors than CTAs (ranks with an empty
// slice) and chunks the CTAs divide unevenly, each launched twice on one workspace, against ATen.
TEST_F(NormGpuTest, GivenRmsNormGridSplitPointsWhenRunOnFewLongRowsThenOutAndRstdMatchAtenAndTheCounterIsLeftAtZero) {
  const DeviceInfo info = queryDevice(0);
  if (info.ccMajor < 7) GTEST_SKIP() << "the grid split needs sm_70";
  std::vector<Case> cases;
  auto add = [&](const kernels::RmsNormVariant& v, const NormParams& p, bool specialized) {
    addCase(cases, v, p, specialized);
  };
  // Columns every dtype's widest vector divides, some unevenly over the CTAs.
  addSpaceSplitPoints<RmsNormFamily, kernels::RmsNormVariant>(
      cases, {{1, 65536}, {3, 1048576 + 64}, {4, 2097152}, {5, 131072 + 24}}, info.ccMajor * 10 + info.ccMinor,
      /*grid=*/true);
  for (DType d : kernels::kAllDTypes) {
    const int widest = static_cast<int>(16 / kernels::elementSize(d));
    for (int split : {4, 8, 16, 32, 64}) {
      for (int threads : {512, 1024}) {
        add({d, 2, 262144 + 5 * widest, true}, NormParams{threads, widest, 0, 1, 1, split}, split % 16 != 0);
      }
    }
    add({d, 2, 24 * widest, true}, NormParams{1024, widest, 0, 1, 1, 64}, true);  // 24 vectors: 40 idle CTAs a row
  }
  checkRmsNormCases(cases);
}

// Note [Cooperative launches]: a grid wider than the GPU keeps resident (1024 CTAs of 1024 threads,
// one an SM) is refused at launch, not left to hang; the stream and the context stay usable.
TEST_F(NormGpuTest, GivenAGridSplitWiderThanTheGpuKeepsResidentWhenLaunchedThenRefusedAndTheContextStaysUsable) {
  const DeviceInfo info = queryDevice(0);
  if (info.ccMajor < 7) GTEST_SKIP() << "the grid split needs sm_70";
  ASSERT_LT(info.smCount, 1024) << "a GPU with 1024 SMs keeps this grid resident";
  Case c{DType::BFloat16, 16, 65536, true, false, NormParams{1024, 8, 0, 1, 1, 64}, "", ""};
  c.cubin = compileToCubin(RmsNormFamily::source(), "rms_norm.cu", info.nvrtcArch(),
                           RmsNormFamily::compileOptions(c.dtype, c.params, true, c.cols))
                .cubin;
  Plan plan = kernels::rmsNormDescriptor().makePlan(c.key(), c.params.toJson(), c.cubin, 0);
  const auto* launcher = dynamic_cast<const CudaKernelLauncher*>(plan.launcher.get());
  ASSERT_NE(launcher, nullptr);
  EXPECT_TRUE(launcher->geometry().cooperative);
  EXPECT_EQ(launcher->geometry().gridX, 1024u);
  const at::Tensor x = input(c), w = column(c, 2.0, -1.0);
  at::Tensor out = at::empty_like(x);
  at::Tensor rstd = at::empty({c.rows}, x.options().dtype(at::kFloat));
  at::Tensor work = at::zeros({plan.workspaceFloats}, x.options().dtype(at::kFloat));
  const KernelArgs args = KernelArgs()
                              .pointer(x.const_data_ptr())
                              .pointer(w.const_data_ptr())
                              .pointer(out.mutable_data_ptr())
                              .pointer(rstd.mutable_data_ptr())
                              .int64(c.rows)
                              .int64(c.cols)
                              .float32(1e-6f)
                              .pointer(partialsOf(work))
                              .pointer(counterOf(work));
  EXPECT_EQ(launcher->launchStatus(args, stream(), launcher->geometry()), CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE);
  // The stream still runs work, and nothing of the refused launch ran.
  EXPECT_EQ(cudaStreamSynchronize(at::cuda::getCurrentCUDAStream().stream()), cudaSuccess);
  EXPECT_EQ(work[plan.workspaceFloats - 1].item<float>(), 0.0f);
  EXPECT_TRUE(at::allclose(at::rms_norm(x, {c.cols}, w, 1e-6).to(at::kFloat),
                           std::get<0>(at::cuda::_fused_rms_norm(x, {c.cols}, w, 1e-6)).to(at::kFloat)));
}

TEST_F(NormGpuTest, GivenLayerNormPointsWhenRunOnOddSizesThenOutMeanAndRstdMatchAten) {
  std::vector<Case> cases;
  const std::pair<bool, bool> configs[] = {{true, true}, {false, false}, {true, false}, {false, true}};
  for (DType d : kernels::kAllDTypes) {
    for (auto [rows, cols] : oddShapes()) {
      for (auto [w, b] : configs) {
        const kernels::LayerNormVariant v{d, rows, cols, w, b};
        ASSERT_TRUE(LayerNormFamily::guardVariant(v)) << rows << "x" << cols;
        for (const NormParams& p : pointsFor(LayerNormFamily::parameterSpace(v), w && b)) {
          cases.push_back(Case{d, rows, cols, w, b, p, "", ""});
          cases.back().specialized = (w && b) || cases.size() % 2 == 0;  // the template's both paths
        }
      }
    }
  }
  checkLayerNormCases(cases);
}

// Note [Split layer norm rows]: as the rms_norm split-row test, with weight and bias on and off.
TEST_F(NormGpuTest, GivenLayerNormSplitRowPointsWhenRunOnFewLongRowsThenOutMeanAndRstdMatchAten) {
  const DeviceInfo info = queryDevice(0);
  if (info.ccMajor < 9) GTEST_SKIP() << "thread-block clusters need sm_90";
  std::vector<Case> cases;
  auto add = [&](const kernels::LayerNormVariant& v, const NormParams& p, bool specialized) {
    addCase(cases, v, p, specialized);
  };
  addSpaceSplitPoints<LayerNormFamily, kernels::LayerNormVariant>(
      cases, {{1, 65536}, {3, 1048576 + 8}, {8, 300000}, {5, 131072 + 8}}, 90, /*grid=*/false);
  for (DType d : kernels::kAllDTypes) {
    const int widest = static_cast<int>(16 / kernels::elementSize(d));
    for (int cluster : {2, 4, 8, 16}) {
      add({d, 2, 262144 + 8 * widest, true, false}, NormParams{1024, widest, 0, 1, cluster}, true);
    }
    add({d, 3, 30000, false, true}, NormParams{512, widest, 4, 1, 4}, true);  // up to 7,500 vectors: 4 CTAs of 2,048
    add({d, 2, 24, true, true}, NormParams{256, 1, 1, 1, 16}, false);         // 24 vectors: 8 CTAs with nothing to do
    add({d, 7, 13, false, false}, NormParams{1024, 1, 1, 1, 8}, true);        // odd, scalar
  }
  checkLayerNormCases(cases);
}

// Note [Split layer norm rows] over a cooperative grid: the grid-split points of few long rows,
// every split and CTA size, uneven and empty slices, each launched twice on one workspace, against
// ATen (rows offset far from zero: the harness's shifted stage, which the tuner runs).
TEST_F(NormGpuTest, GivenLayerNormGridSplitPointsWhenRunOnFewLongRowsThenOutMeanAndRstdMatchAtenAndTheCounterIsLeftAtZero) {
  const DeviceInfo info = queryDevice(0);
  if (info.ccMajor < 7) GTEST_SKIP() << "the grid split needs sm_70";
  std::vector<Case> cases;
  auto add = [&](const kernels::LayerNormVariant& v, const NormParams& p, bool specialized) {
    addCase(cases, v, p, specialized);
  };
  addSpaceSplitPoints<LayerNormFamily, kernels::LayerNormVariant>(
      cases, {{4, 2097152}, {3, 1048576 + 64}}, info.ccMajor * 10 + info.ccMinor, /*grid=*/true);
  for (DType d : kernels::kAllDTypes) {
    const int widest = static_cast<int>(16 / kernels::elementSize(d));
    for (int split : {4, 16, 64}) {
      for (int threads : {512, 1024}) {
        add({d, 2, 262144 + 5 * widest, true, true}, NormParams{threads, widest, 0, 1, 1, split}, split != 16);
      }
    }
    add({d, 2, 24 * widest, true, false}, NormParams{1024, widest, 0, 1, 1, 64}, true);  // 40 idle CTAs a row
  }
  checkLayerNormCases(cases);
}

// Leading dims fold into rows; the 3-D call's statistics come back as [a, b, 1].
TEST_F(NormGpuTest, GivenThreeDimensionalInputWhenRunAsFoldedRowsThenMatchesAtenOnEveryRow) {
  const int64_t a = 3, b = 5, cols = 768;
  Case c{DType::BFloat16, a * b, cols, true, false, {}, "", ""};
  const kernels::RmsNormVariant v{c.dtype, c.rows, c.cols, true};
  c.params = RmsNormFamily::parameterSpace(v).front();
  c.cubin = compileToCubin(RmsNormFamily::source(), "rms_norm.cu", queryDevice(0).nvrtcArch(),
                           RmsNormFamily::compileOptions(c.dtype, c.params, true, c.cols))
                .cubin;
  Plan plan = kernels::rmsNormDescriptor().makePlan(c.key(), c.params.toJson(), c.cubin, 0);
  at::Tensor x = at::randn({a, b, cols}, at::kCUDA).to(at::kBFloat16);
  at::Tensor w = at::randn({cols}, at::kCUDA).to(at::kBFloat16);
  at::Tensor out = at::empty_like(x);
  at::Tensor rstd = at::empty({a, b, 1}, x.options().dtype(at::kFloat));
  ASSERT_TRUE(plan.launcher->launchArgs(KernelArgs()
                                            .pointer(x.const_data_ptr())
                                            .pointer(w.const_data_ptr())
                                            .pointer(out.mutable_data_ptr())
                                            .pointer(rstd.mutable_data_ptr())
                                            .int64(c.rows)
                                            .int64(c.cols)
                                            .float32(1e-6f)
                                            .pointer(nullptr)
                                            .pointer(nullptr),
                                        stream()));
  auto [refOut, refRstd] = at::cuda::_fused_rms_norm(x, {cols}, w, 1e-6);
  EXPECT_EQ(refRstd.sizes(), rstd.sizes());
  const NormTolerance tol = RmsNormFamily::tolerance(c.dtype, c.cols);
  EXPECT_EQ(compare(out, refOut, outBound(tol, refOut)).count, 0);
  EXPECT_EQ(compare(rstd, refRstd, rstdBound(tol, refRstd)).count, 0);
}

}  // namespace
}  // namespace hotkernel
