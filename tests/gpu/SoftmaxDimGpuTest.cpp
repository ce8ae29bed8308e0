// Softmax and log_softmax over any dim (issue 19) against ATen on the GPU:
// every dtype and both ops over the last dim of a 3-d tensor (rows folded),
// a middle dim and dim 0 ([outer, dim, inner]: Note [Two softmax layouts]),
// each point through the five-stage harness and then its plan, made by the
// op's descriptor for the tensor's key, on the whole N-d tensor against
// at::cuda::_softmax over that dim; a middle-dim variant over a small memory
// cap tuned on a subset of its outer rows; and the fp32 [4096, 400000]
// softmax, whose whole tuning needs more than the default cap (a quarter of
// the device), tuned on a row subset and its full plan checked on every row.
// float32 over a long middle dim (where ATen's own sums drift) is accepted and within the bound of float64.
// Own binary, no override installed, so at::cuda::_softmax is ATen's.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/ops/_log_softmax_cuda_dispatch.h>
#include <ATen/ops/_softmax_cuda_dispatch.h>
#include <c10/cuda/CUDACachingAllocator.h>

#include <algorithm>
#include <iostream>
#include <limits>
#include <string>
#include <vector>

#include "hotkernel/kernels/FamilyDescriptor.h"
#include "hotkernel/kernels/SoftmaxDimFamily.h"
#include "hotkernel/kernels/SoftmaxFamily.h"
#include "hotkernel/optimizer/Harness.h"
#include "hotkernel/optimizer/PlanFactory.h"
#include "hotkernel/optimizer/SoftmaxDimTuner.h"
#include "hotkernel/optimizer/SoftmaxTuner.h"
#include "hotkernel/optimizer/TuningRows.h"
#include "hotkernel/runtime/Check.h"
#include "hotkernel/runtime/CudaDriver.h"
#include "hotkernel/runtime/KernelArgs.h"
#include "hotkernel/runtime/Nvrtc.h"

namespace hotkernel {
namespace {

using kernels::DType;
using kernels::SoftmaxDimFamily;
using kernels::SoftmaxDimParams;
using kernels::SoftmaxFamily;
using kernels::SoftmaxOp;
using kernels::SoftmaxParams;

#define REQUIRE_CUDA()                                              \
  if (!at::cuda::is_available() || at::cuda::device_count() == 0) { \
    GTEST_SKIP() << "no CUDA device";                               \
  }

std::string archOf() { return queryDevice(0).nvrtcArch(); }

at::Tensor atenOf(const at::Tensor& x, int64_t dim, SoftmaxOp op) {
  return op == SoftmaxOp::LogSoftmax ? at::cuda::_log_softmax(x, dim, false) : at::cuda::_softmax(x, dim, false);
}

// The largest excess of |out - ref| over the family's elementwise bound
// (Notes [Softmax bound], [Log-softmax tolerance]) with `dim` as the row
// length; NaN and infinities must match exactly. <= 0: within the bound.
double excessOverBound(const at::Tensor& out, const at::Tensor& ref, DType d, int64_t dim, SoftmaxOp op) {
  const SoftmaxFamily::Bound b =
      op == SoftmaxOp::LogSoftmax ? SoftmaxFamily::logSoftmaxTolerance(d) : SoftmaxFamily::softmaxBound(d, dim);
  const at::Tensor o = out.to(at::kDouble), r = ref.to(at::kDouble);
  const at::Tensor special = ~r.isfinite();
  EXPECT_TRUE(at::equal(special, ~o.isfinite())) << "special values differ";
  const at::Tensor finite = r.isfinite();
  const at::Tensor excess = ((o - r).abs() - (r.abs() * b.relative + b.absolute)).masked_fill(~finite, -1.0);
  return excess.max().item<double>();
}

// A tensor of `sizes` in `d` with rows of +inf, -inf and NaN in it, besides normal data.
at::Tensor drawInput(const std::vector<int64_t>& sizes, DType d) {
  at::Tensor x = at::randn(sizes, at::TensorOptions().device(at::kCUDA, 0)).mul_(4.0);
  at::Tensor flat = x.view({-1});
  if (flat.numel() > 64) {
    flat[3] = std::numeric_limits<float>::infinity();
    flat[17] = -std::numeric_limits<float>::infinity();
    flat[40] = std::numeric_limits<float>::quiet_NaN();
  }
  return x.to(scalarTypeOf(d));
}

struct Layout {
  const char* name;
  std::vector<int64_t> sizes;
  int64_t dim;
};

// The layouts of the issue: the last dim of a 3-d tensor, a middle dim, dim 0.
const std::vector<Layout>& layouts() {
  static const std::vector<Layout> l = {
      {"last of 3-d", {8, 33, 1000}, 2},
      {"middle", {8, 33, 1000}, 1},
      {"dim 0", {64, 24, 40}, 0},
  };
  return l;
}

// The points worth checking for a key: the family's first guess and its vec == 1 fallback.
template <typename Params>
std::vector<Params> firstAndScalar(const std::vector<Params>& space) {
  std::vector<Params> out = {space.front()};
  for (const Params& p : space) {
    if (p.vec == 1 && p != space.front()) {
      out.push_back(p);
      break;
    }
  }
  return out;
}

// Passes `layout` of `d` and `op` through the harness (the layout's spec and
// candidate) for each checked point, then launches the descriptor's plan on
// the whole tensor and compares it with ATen over the dim. "" when all pass.
std::string checkLayout(const Layout& layout, DType d, SoftmaxOp op) {
  const at::Tensor x = drawInput(layout.sizes, d);
  kernels::SoftmaxLayout l;
  HOTKERNEL_CHECK(kernels::softmaxLayoutOf(layout.sizes.data(), static_cast<int64_t>(layout.sizes.size()), layout.dim,
                                           &l),
                  "no layout");
  const std::string arch = archOf();
  const kernels::FamilyDescriptor& family = kernels::softmaxDescriptor(op);
  VariantKey key{static_cast<int32_t>(d), 0, l.outer, l.dim};
  key.inner = l.inner == 1 ? 0 : l.inner;
  std::string errors;
  auto runPoint = [&](const nlohmann::json& params, const RowOpSpec& spec, const HarnessCandidate& candidate,
                      int64_t rows, int64_t cols) {
    const std::string what = std::string(layout.name) + " " + dtypeName(d) + " " + softmaxOpName(op) + " " +
                             params.dump() + ": ";
    const HarnessReport h = runHarness(spec, candidate, d, rows, cols, 0);
    if (!h.passed) {
      errors += what + toString(h.failure()->stage) + " stage: " + h.failure()->detail + "\n";
      return;
    }
    const Plan plan = family.makePlan(key, params, candidate.cubin, 0);
    at::Tensor out = at::full_like(x, std::numeric_limits<float>::quiet_NaN());
    void* stream = at::cuda::getCurrentCUDAStream(0).stream();
    const bool launched =
        key.inner == 0
            ? plan.launcher->launch(RowKernelArgs{x.const_data_ptr(), out.mutable_data_ptr(), key.rows, key.cols},
                                    stream)
            : plan.launcher->launchArgs(KernelArgs()
                                            .pointer(x.const_data_ptr())
                                            .pointer(out.mutable_data_ptr())
                                            .int64(key.rows)
                                            .int64(key.cols)
                                            .int64(key.inner),
                                        stream);
    if (!launched) {
      errors += what + "the plan did not launch\n";
      return;
    }
    const double excess = excessOverBound(out, atenOf(x, layout.dim, op), d, l.dim, op);
    if (!(excess <= 0)) errors += what + "over the bound by " + std::to_string(excess) + "\n";
  };
  if (key.inner == 0) {
    const kernels::SoftmaxVariant v{d, key.rows, key.cols};
    for (const SoftmaxParams& p : firstAndScalar(SoftmaxFamily::parameterSpace(v, 0))) {
      const NvrtcOutput c = compileToCubin(SoftmaxFamily::source(), "softmax_lastdim.cu", arch,
                                           SoftmaxFamily::compileOptions(d, p, op));
      runPoint(p.toJson(), softmaxSpec(op), softmaxCandidate(d, p, c.cubin), v.rows, v.cols);
    }
  } else {
    const kernels::SoftmaxDimVariant v = kernels::softmaxDimVariantOf(key);
    for (const SoftmaxDimParams& p : firstAndScalar(SoftmaxDimFamily::parameterSpace(v))) {
      const NvrtcOutput c = compileToCubin(SoftmaxDimFamily::source(), "softmax_dim.cu", arch,
                                           SoftmaxDimFamily::compileOptions(d, p, op));
      runPoint(p.toJson(), softmaxDimSpec(op, v.inner), softmaxDimCandidate(v, p, c.cubin), v.outer,
               v.dim * v.inner);
    }
  }
  return errors;
}

TEST(SoftmaxDimGpuTest, GivenEveryDTypeOpAndLayoutWhenRunThroughTheHarnessAndAsAPlanThenAsAten) {
  REQUIRE_CUDA();
  if (!nvrtcAvailable()) GTEST_SKIP() << nvrtcUnavailableReason();
  for (DType d : kernels::kAllDTypes) {
    for (SoftmaxOp op : {SoftmaxOp::Softmax, SoftmaxOp::LogSoftmax}) {
      for (const Layout& layout : layouts()) EXPECT_EQ(checkLayout(layout, d, op), "");
    }
  }
}

TEST(SoftmaxDimGpuTest, GivenAMiddleDimPlanWhenRunInPlaceThenAsAten) {
  REQUIRE_CUDA();
  if (!nvrtcAvailable()) GTEST_SKIP() << nvrtcUnavailableReason();
  const kernels::SoftmaxDimVariant v{DType::BFloat16, 4, 77, 512};
  const SoftmaxDimParams p = SoftmaxDimFamily::parameterSpace(v).front();
  const NvrtcOutput c = compileToCubin(SoftmaxDimFamily::source(), "softmax_dim.cu", archOf(),
                                       SoftmaxDimFamily::compileOptions(v.dtype, p));
  const Plan plan = kernels::softmaxDescriptor(SoftmaxOp::Softmax)
                        .makePlan(kernels::softmaxDimKeyOf(v, 0), p.toJson(), c.cubin, 0);
  const at::Tensor x = drawInput({v.outer, v.dim, v.inner}, v.dtype);
  const at::Tensor ref = at::cuda::_softmax(x, 1, false);
  at::Tensor y = x.clone();
  ASSERT_TRUE(plan.launcher->launchArgs(
      KernelArgs().pointer(y.const_data_ptr()).pointer(y.mutable_data_ptr()).int64(v.outer).int64(v.dim).int64(v.inner),
      at::cuda::getCurrentCUDAStream(0).stream()));
  EXPECT_LE(excessOverBound(y, ref, v.dtype, v.dim, SoftmaxOp::Softmax), 0.0);
}

TEST(SoftmaxDimGpuTest, GivenEveryUnrollOfATileWhenRunThenTheOneRowAtATimeBits) {
  // Note [Rows in flight] (reduce_dim.cu): both passes load rows in batches, the pairs fold in the same order.
  // dim = 4099 leaves a remainder after every batch size.
  REQUIRE_CUDA();
  if (!nvrtcAvailable()) GTEST_SKIP() << nvrtcUnavailableReason();
  for (DType d : {DType::Float32, DType::BFloat16}) {
    for (SoftmaxOp op : {SoftmaxOp::Softmax, SoftmaxOp::LogSoftmax}) {
      const kernels::SoftmaxDimVariant v{d, 3, 4099, 256};
      const SoftmaxDimParams first = SoftmaxDimFamily::parameterSpace(v).front();
      const at::Tensor x = drawInput({v.outer, v.dim, v.inner}, v.dtype);
      at::Tensor one;
      for (int unroll : kernels::kMiddleDimUnrolls) {
        const SoftmaxDimParams p{first.tx, first.ty, first.vec, unroll};
        SCOPED_TRACE(std::string(kernels::dtypeName(d)) + (op == SoftmaxOp::LogSoftmax ? " log_softmax " : " softmax ") +
                     p.describe());
        ASSERT_TRUE(SoftmaxDimFamily::guardParams(v, p));
        const NvrtcOutput c = compileToCubin(SoftmaxDimFamily::source(), "softmax_dim.cu", archOf(),
                                             SoftmaxDimFamily::compileOptions(v.dtype, p, op));
        const Plan plan = kernels::softmaxDescriptor(op).makePlan(kernels::softmaxDimKeyOf(v, 0), p.toJson(), c.cubin, 0);
        at::Tensor y = at::empty_like(x);
        ASSERT_TRUE(plan.launcher->launchArgs(
            KernelArgs().pointer(x.const_data_ptr()).pointer(y.mutable_data_ptr()).int64(v.outer).int64(v.dim).int64(v.inner),
            at::cuda::getCurrentCUDAStream(0).stream()));
        if (unroll == 1) {
          // Note [Compensated middle-dim sums]: a thread's 256 rows in sequence stay within the family's bound of
          // float64 (ATen's own float32 result does not: Note [Middle-dim softmax bound]).
          EXPECT_LE(excessOverBound(y, atenOf(x.to(at::kDouble), 1, op), v.dtype, v.dim, op), 0.0);
          one = y;
          continue;
        }
        const at::ScalarType bits = d == DType::Float32 ? at::kInt : at::kShort;
        EXPECT_TRUE(at::equal(y.view(bits), one.view(bits)));
      }
    }
  }
}

// Note [Compensated middle-dim sums]: a tile of one thread along the dim folds all 4099 rows of a position in one
// chain (as ATen's kernel does); compensated, its softmax and log_softmax stay within the family's bound of float64,
// where a plain float32 running sum of that length drifts past it (docs/design/softmax.md, "Long dims in float32").
TEST(SoftmaxDimGpuTest, GivenTheLongestPerThreadChainWhenRunThenWithinTheBoundOfFloat64) {
  REQUIRE_CUDA();
  if (!nvrtcAvailable()) GTEST_SKIP() << nvrtcUnavailableReason();
  const kernels::SoftmaxDimVariant v{DType::Float32, 3, 4099, 256};
  const SoftmaxDimParams p{64, 1, 4, 4};
  ASSERT_TRUE(SoftmaxDimFamily::guardParams(v, p));
  const at::Tensor x = drawInput({v.outer, v.dim, v.inner}, v.dtype);
  for (SoftmaxOp op : {SoftmaxOp::Softmax, SoftmaxOp::LogSoftmax}) {
    SCOPED_TRACE(softmaxOpName(op));
    const NvrtcOutput c = compileToCubin(SoftmaxDimFamily::source(), "softmax_dim.cu", archOf(),
                                         SoftmaxDimFamily::compileOptions(v.dtype, p, op));
    const Plan plan = kernels::softmaxDescriptor(op).makePlan(kernels::softmaxDimKeyOf(v, 0), p.toJson(), c.cubin, 0);
    at::Tensor y = at::full_like(x, std::numeric_limits<float>::quiet_NaN());
    ASSERT_TRUE(plan.launcher->launchArgs(
        KernelArgs().pointer(x.const_data_ptr()).pointer(y.mutable_data_ptr()).int64(v.outer).int64(v.dim).int64(v.inner),
        at::cuda::getCurrentCUDAStream(0).stream()));
    EXPECT_LE(excessOverBound(y, atenOf(x.to(at::kDouble), 1, op), v.dtype, v.dim, op), 0.0);
  }
}

// Note [Middle-dim softmax bound]: float32 over a dim of thousands, where ATen's own sums are further from float64
// than the family's bound, is accepted by the harness and served within that bound of float64.
TEST(SoftmaxDimGpuTest, GivenALongFloat32MiddleDimWhenTunedThenAcceptedAndWithinTheBoundOfFloat64) {
  REQUIRE_CUDA();
  if (!nvrtcAvailable()) GTEST_SKIP() << nvrtcUnavailableReason();
  const kernels::SoftmaxDimVariant v{DType::Float32, 16, 4099, 256};
  TunerOptions o;
  o.minSpeedup = 0.5;
  o.searchEvaluations = 6;
  for (SoftmaxOp op : {SoftmaxOp::Softmax, SoftmaxOp::LogSoftmax}) {
    const TuneOutcome t = tuneSoftmaxDim(v, 0, o, op);
    ASSERT_TRUE(t.accepted) << softmaxOpName(op) << ": " << t.metrics.toJson().dump(2);
    const Plan plan = makePlan(t.family, kernels::softmaxDimKeyOf(v, 0), t.paramsJson, t.kernelName, t.cubin, 0);
    const at::Tensor x = drawInput({v.outer, v.dim, v.inner}, v.dtype);
    at::Tensor out = at::full_like(x, std::numeric_limits<float>::quiet_NaN());
    ASSERT_TRUE(plan.launcher->launchArgs(
        KernelArgs().pointer(x.const_data_ptr()).pointer(out.mutable_data_ptr()).int64(v.outer).int64(v.dim).int64(v.inner),
        at::cuda::getCurrentCUDAStream(0).stream()));
    EXPECT_LE(excessOverBound(out, atenOf(x.to(at::kDouble), 1, op), v.dtype, v.dim, op), 0.0) << softmaxOpName(op);
  }
}

// A cap that holds a quarter of the outer rows; any correct kernel not far
// slower than ATen is accepted, so that there is a plan to check.
TEST(SoftmaxDimGpuTest, GivenAMiddleDimVariantOverTheCapWhenTunedThenOnASubsetOfOuterRowsAndThePlanServesAll) {
  REQUIRE_CUDA();
  if (!nvrtcAvailable()) GTEST_SKIP() << nvrtcUnavailableReason();
  // A quarter of the outer rows must still fill the GPU (an H200 needs ~1056 of these rows).
  const kernels::SoftmaxDimVariant v{DType::Float32, 8192, 64, 512};
  TuningMemory memory;
  memory.bytesPerRow = 12 * v.dim * v.inner * 4;
  memory.fixedBytes = 2 * static_cast<int64_t>(at::cuda::getDeviceProperties(0)->l2CacheSize);
  TunerOptions o;
  o.memoryCapBytes = memory.bytes(v.outer / 4);
  o.minSpeedup = 0.5;
  o.searchEvaluations = 12;
  for (SoftmaxOp op : {SoftmaxOp::Softmax, SoftmaxOp::LogSoftmax}) {
    const TuneOutcome t = tuneSoftmaxDim(v, 0, o, op);
    ASSERT_TRUE(t.metrics.tunedRows.has_value()) << t.metrics.toJson().dump(2);
    EXPECT_EQ(*t.metrics.tunedRows, v.outer / 4);
    ASSERT_TRUE(t.accepted) << t.metrics.toJson().dump(2);
    EXPECT_EQ(t.kernelName, SoftmaxDimFamily::kKernelName);
    const VariantKey key = kernels::softmaxDimKeyOf(v, 0);
    const Plan plan = makePlan(t.family, key, t.paramsJson, t.kernelName, t.cubin, 0);
    const at::Tensor x = drawInput({v.outer, v.dim, v.inner}, v.dtype);
    at::Tensor out = at::full_like(x, std::numeric_limits<float>::quiet_NaN());
    ASSERT_TRUE(plan.launcher->launchArgs(KernelArgs()
                                              .pointer(x.const_data_ptr())
                                              .pointer(out.mutable_data_ptr())
                                              .int64(v.outer)
                                              .int64(v.dim)
                                              .int64(v.inner),
                                          at::cuda::getCurrentCUDAStream(0).stream()));
    EXPECT_LE(excessOverBound(out, atenOf(x, 1, op), v.dtype, v.dim, op), 0.0) << softmaxOpName(op);
  }
}

// Issue 19's variant: fp32 [4096, 400000] (6.5 GB) needs ~49 GiB to tune
// whole, over the default cap of a quarter of an H200; it is tuned on the
// rows that fit, and the full variant's plan serves every row.
TEST(SoftmaxDimGpuTest, GivenTheFourHundredThousandColumnSoftmaxUnderTheDefaultCapWhenTunedThenOnASubsetAndServed) {
  REQUIRE_CUDA();
  if (!nvrtcAvailable()) GTEST_SKIP() << nvrtcUnavailableReason();
  const kernels::SoftmaxVariant v{DType::Float32, 4096, 400000};
  const int64_t cap = static_cast<int64_t>(at::cuda::getDeviceProperties(0)->totalGlobalMem / 4);
  TuningMemory memory;
  memory.bytesPerRow = 12 * v.cols * 4;
  memory.fixedBytes = 2 * static_cast<int64_t>(at::cuda::getDeviceProperties(0)->l2CacheSize);
  if (memory.bytes(v.rows) <= cap) GTEST_SKIP() << "this GPU's default cap holds the whole variant";
  // The input and the output whole, the check's fp64 temporaries on one chunk of rows at a time.
  constexpr int64_t kCheckRows = 256;
  const int64_t testBytes = 2 * v.rows * v.cols * 4 + 8 * kCheckRows * v.cols * 8;
  if (static_cast<int64_t>(at::cuda::getDeviceProperties(0)->totalGlobalMem) < cap + testBytes) {
    GTEST_SKIP() << "this GPU cannot hold the cap and the test's tensors";
  }
  TunerOptions o;
  o.memoryCapBytes = cap;
  o.searchEvaluations = 12;
  o.minSpeedup = 0.5;
  const TuneOutcome t = tuneSoftmax(v, 0, o);
  ASSERT_TRUE(t.metrics.tunedRows.has_value()) << t.metrics.toJson().dump(2);
  EXPECT_LT(*t.metrics.tunedRows, v.rows);
  EXPECT_LE(memory.bytes(*t.metrics.tunedRows), cap);
  ASSERT_TRUE(t.accepted) << t.metrics.toJson().dump(2);
  const VariantKey key{static_cast<int32_t>(v.dtype), 0, v.rows, v.cols};
  const Plan plan = makePlan(t.family, key, t.paramsJson, t.kernelName, t.cubin, 0);
  const at::Tensor x = at::randn({v.rows, v.cols}, at::TensorOptions().device(at::kCUDA, 0)).mul_(4.0);
  at::Tensor out = at::full_like(x, std::numeric_limits<float>::quiet_NaN());
  ASSERT_TRUE(plan.launcher->launch(RowKernelArgs{x.const_data_ptr(), out.mutable_data_ptr(), v.rows, v.cols},
                                    at::cuda::getCurrentCUDAStream(0).stream()));
  // The tuner's tensors are gone: the check needs the memory (an H100 holds the cap and the tensors, not a fp64
  // copy of the whole variant).
  c10::cuda::CUDACachingAllocator::emptyCache();
  double excess = -1.0;
  for (int64_t r = 0; r < v.rows; r += kCheckRows) {
    const int64_t n = std::min(kCheckRows, v.rows - r);
    const at::Tensor ref = at::cuda::_softmax(x.narrow(0, r, n), -1, false);
    excess = std::max(excess, excessOverBound(out.narrow(0, r, n), ref, v.dtype, v.cols, SoftmaxOp::Softmax));
  }
  EXPECT_LE(excess, 0.0);
  std::cout << "fp32 [4096, 400000]: tuned on " << *t.metrics.tunedRows << " rows, "
            << t.metrics.toJson().value("kernel", nlohmann::json()).dump() << "\n";
}

}  // namespace
}  // namespace hotkernel
