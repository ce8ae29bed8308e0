// The middle-dim reductions end to end in one process, as the runtime serves
// them (Note [Two layouts, one family] in kernels/src/ReduceDescriptor.cpp):
//  - every op in float32, float16 and bfloat16 on 3-d shapes whose inner
//    extent is small, odd (no vector) or large and whose reduced extent is 1,
//    7 or 4096: the family's first point compiled, passed through the
//    five-stage harness (Note [Middle-dim reduction harness]), published as
//    the op's plan for the variant's key, then x.<op>(dim=1) (keepdim both
//    ways, the dim spelled -2 too) hits the trampoline and matches ATen's CUDA
//    kernel (sums within the harness's bound, the rest exactly), with NaN and
//    ties (the first index) for the index ops;
//  - one variant through Engine::optimizeVariant (tuner, harness, decision in
//    the cache under the op's family, the plan published), then served.
//
// Own binary: the plans it publishes, the trampolines it installs and the
// runtime's cache directory (HOTKERNEL_CACHE_DIR, read once per process) must
// not leak into other GPU tests.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>

#include <cmath>
#include <iostream>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "ReduceOverride.h"
#include "RuntimeGpuTestSupport.h"
#include "hotkernel/cache/CacheStore.h"
#include "hotkernel/interpose/Engine.h"
#include "hotkernel/interpose/ServedOps.h"
#include "hotkernel/kernels/FamilyDescriptor.h"
#include "hotkernel/kernels/ReduceDimFamily.h"
#include "hotkernel/kernels/VariantOptions.h"
#include "hotkernel/optimizer/Harness.h"
#include "hotkernel/optimizer/ReduceDimTuner.h"
#include "hotkernel/runtime/CudaDriver.h"
#include "hotkernel/runtime/Nvrtc.h"

namespace hotkernel {
namespace {

using gputest::budgetOf;
using gputest::planOf;

using kernels::DType;
using kernels::ReduceDimFamily;
using kernels::ReduceDimParams;
using kernels::ReduceDimVariant;
using kernels::ReduceOp;

const std::string& cacheDir() { return gputest::runtimeCacheDir("hk-reduce-dim-runtime"); }

at::ScalarType torchType(DType d) { return scalarTypeOf(d); }

// x.<op>(dim, keepdim) through the dispatcher (the trampoline on CUDA).
at::Tensor callOp(ReduceOp op, const at::Tensor& x, int64_t dim, bool keepdim) {
  at::InferenceMode inference;
  switch (op) {
    case ReduceOp::Sum:
      return x.sum({dim}, keepdim);
    case ReduceOp::Mean:
      return x.mean({dim}, keepdim);
    case ReduceOp::Amax:
      return x.amax({dim}, keepdim);
    case ReduceOp::Amin:
      return x.amin({dim}, keepdim);
    case ReduceOp::Argmax:
      return x.argmax(dim, keepdim);
    case ReduceOp::Argmin:
      return x.argmin(dim, keepdim);
    case ReduceOp::Max:
    case ReduceOp::Min:
      break;  // two outputs: ReducePairRuntimeGpuTest.cpp
  }
  return {};
}

// Compiles `p` for (dtype, op) once per process.
const std::string& cubinOf(DType dtype, ReduceOp op, const ReduceDimParams& p) {
  static std::map<std::string, std::string> cubins;
  const std::vector<std::string> options = ReduceDimFamily::compileOptions(dtype, p, op);
  std::string id;
  for (const std::string& o : options) id += o + " ";
  auto it = cubins.find(id);
  if (it == cubins.end()) {
    it = cubins
             .emplace(id, compileToCubin(ReduceDimFamily::source(), "reduce_dim.cu", queryDevice(0).nvrtcArch(), options)
                              .cubin)
             .first;
  }
  return it->second;
}

// Whether `got` meets ATen's `ref` for `op` over the reduced extent of `x3`
// ([outer, reduced, inner]): exactly (NaN meets NaN) for the extrema and
// indices; sums within the harness's bound (Note [Middle-dim reduction harness]).
::testing::AssertionResult meetsAten(ReduceOp op, const at::Tensor& x3, const at::Tensor& got, const at::Tensor& ref) {
  if (got.sizes() != ref.sizes()) return ::testing::AssertionFailure() << got.sizes() << " vs " << ref.sizes();
  if (kernels::reduceOpInfo(op).index) {
    if (at::equal(got, ref)) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << (got != ref).sum().item<int64_t>() << " indices differ";
  }
  if (kernels::reduceOpInfo(op).exact) {
    if (at::all((got == ref) | (got.isnan() & ref.isnan())).item<bool>()) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << "extrema differ";
  }
  const int64_t reduced = x3.size(1);
  const kernels::ReduceTolerance td = ReduceDimFamily::tolerance(op, dtypeOfTensor(x3), reduced);
  const at::Tensor x64 = x3.to(at::kDouble);
  at::Tensor exact = x64.sum(1), absSum = x64.abs().sum(1);
  if (op == ReduceOp::Mean) {
    exact.div_(static_cast<double>(reduced));
    absSum.div_(static_cast<double>(reduced));
  }
  const at::Tensor r = ref.to(at::kDouble);
  const at::Tensor bound = (r - exact).abs() + absSum * td.sumRel + r.abs() * td.outRel + td.outAbs;
  const double excess = ((got.to(at::kDouble) - r).abs() - bound).max().item<double>();
  if (excess <= 0.0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "a sum exceeds its bound by " << excess;
}

struct Shape {
  int64_t outer, reduced, inner;
};

// inner: 6 (small), 3 and 1001 (odd: no vector), 2, 4096 (large), 1000; reduced: 1, 7, 4096.
const std::vector<Shape> kShapes = {{16, 1, 6}, {8, 7, 3}, {4, 4096, 2}, {3, 7, 4096}, {2, 4096, 1000}, {5, 7, 1001}};

TEST(ReduceDimRuntimeGpuTest, GivenHarnessValidatedPlansWhenEveryOpAndDTypeReducesDimOneThenTheTrampolineMatchesAten) {
  REQUIRE_CUDA_AND_NVRTC();
  (void)cacheDir();
  for (ReduceOp op : kernels::kAllReduceOps) {
    installServedOp(servedOp(kernels::reduceAtenOpName(op)), c10::DispatchKey::CUDA, nullptr);
  }
  at::manual_seed(19);
  for (ReduceOp op : kernels::kAllReduceOps) {
    if (kernels::reduceOpInfo(op).pair) continue;  // max.dim / min.dim: ReducePairRuntimeGpuTest.cpp
    const bool index = kernels::reduceOpInfo(op).index;
    const ServedOp& served = servedOp(kernels::reduceAtenOpName(op));
    for (DType dtype : kernels::kAllDTypes) {
      for (const Shape& s : kShapes) {
        SCOPED_TRACE(std::string(kernels::reduceOpName(op)) + " " + kernels::dtypeName(dtype) + " [" +
                     std::to_string(s.outer) + ", " + std::to_string(s.reduced) + ", " + std::to_string(s.inner) + "]");
        const ReduceDimVariant v{dtype, s.outer, s.reduced, s.inner, op};
        ASSERT_TRUE(ReduceDimFamily::guardVariant(v));
        const ReduceDimParams p = ReduceDimFamily::parameterSpace(v).front();
        const std::string& cubin = cubinOf(dtype, op, p);
        const HarnessReport report =
            runHarness(reduceDimSpec(op, s.inner), reduceDimCandidate(v, p, cubin), dtype, s.outer, s.reduced * s.inner, 0);
        ASSERT_TRUE(report.passed) << p.describe() << ": " << (report.failure() ? report.failure()->detail : "");
        const VariantKey key = kernels::reduceDimKeyOf(v, 0);
        plansOf(served).publish(kernels::reduceDescriptor(op).makePlan(key, p.toJson(), cubin, 0));

        const auto opts = at::TensorOptions().dtype(at::kFloat).device(at::kCUDA, 0);
        at::Tensor x = at::randn({s.outer, s.reduced, s.inner}, opts).mul_(3.0).to(torchType(dtype));
        if (index && s.reduced >= 7) {
          // NaN (the first one wins) and ties (bf16 / fp16 round many values together; a column of equal values: index 0).
          x.select(0, 0).select(1, 0).select(0, 3).fill_(std::numeric_limits<float>::quiet_NaN());
          x.select(0, 0).select(1, 0).select(0, 5).fill_(std::numeric_limits<float>::quiet_NaN());
          x.select(0, s.outer - 1).select(1, s.inner - 1).fill_(1.0);
        }
        const at::Tensor ref = atenReduceMiddleDim(x.view({s.outer, s.reduced * s.inner}), op, s.inner);
        const uint64_t hits = hitsOf(served);
        const at::Tensor out = callOp(op, x, 1, false);
        const at::Tensor kept = callOp(op, x, -2, true);
        EXPECT_EQ(hitsOf(served), hits + 2);
        EXPECT_EQ(out.sizes(), (at::IntArrayRef{s.outer, s.inner}));
        EXPECT_EQ(kept.sizes(), (at::IntArrayRef{s.outer, 1, s.inner}));
        EXPECT_EQ(out.scalar_type(), index ? at::kLong : torchType(dtype));
        EXPECT_TRUE(meetsAten(op, x, out, ref));
        EXPECT_TRUE(meetsAten(op, x, kept.view({s.outer, s.inner}), ref));
        if (index && s.reduced >= 7) {
          EXPECT_EQ(out[0][0].item<int64_t>(), 3);
          EXPECT_EQ(out[s.outer - 1][s.inner - 1].item<int64_t>(), 0);
        }
      }
    }
  }
  // Refused calls run ATen: a transposed input, two dims, sum with dtype=.
  const at::Tensor x = at::randn({4, 4096, 2}, at::TensorOptions().device(at::kCUDA, 0));
  const uint64_t misses = missesOf(servedOp("aten::sum.dim_IntList"));
  (void)x.transpose(0, 2).sum(1);
  (void)x.sum(at::IntArrayRef{0, 1});
  (void)x.sum({1}, false, at::kDouble);
  EXPECT_EQ(missesOf(servedOp("aten::sum.dim_IntList")), misses + 3);
}

TEST(ReduceDimRuntimeGpuTest, GivenEveryUnrollOfATileWhenServedThenTheResultsAreTheOneRowAtATimeBits) {
  // Note [Rows in flight]: loading rows in batches changes nothing in the fold's order. reduced = 4099 leaves
  // a remainder after every batch size; ties and a NaN make the index ops' order visible.
  REQUIRE_CUDA_AND_NVRTC();
  (void)cacheDir();
  at::manual_seed(23);
  for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Mean, ReduceOp::Argmax, ReduceOp::Amin}) {
    const ServedOp& served = servedOp(kernels::reduceAtenOpName(op));
    installServedOp(served, c10::DispatchKey::CUDA, nullptr);
    for (DType dtype : {DType::Float32, DType::BFloat16}) {
      SCOPED_TRACE(std::string(kernels::reduceOpName(op)) + " " + kernels::dtypeName(dtype));
      const ReduceDimVariant v{dtype, 3, 4099, 256, op};
      const VariantKey key = kernels::reduceDimKeyOf(v, 0);
      // Whole numbers for the index ops (many ties), fractions for the sums (the order of additions shows).
      at::Tensor x = at::randn({3, 4099, 256}, at::TensorOptions().device(at::kCUDA, 0));
      if (kernels::reduceOpInfo(op).index) x.round_();
      x = x.to(torchType(dtype));
      x.select(0, 1).select(1, 7).select(0, 4000).fill_(std::numeric_limits<float>::quiet_NaN());
      const ReduceDimParams first = ReduceDimFamily::parameterSpace(v).front();
      at::Tensor one;
      for (int unroll : kernels::kMiddleDimUnrolls) {
        const ReduceDimParams p{first.tx, first.ty, first.vec, unroll};
        ASSERT_TRUE(ReduceDimFamily::guardParams(v, p)) << p.describe();
        plansOf(served).publish(kernels::reduceDescriptor(op).makePlan(key, p.toJson(), cubinOf(dtype, op, p), 0));
        const uint64_t hits = hitsOf(served);
        const at::Tensor out = callOp(op, x, 1, false);
        ASSERT_EQ(hitsOf(served), hits + 1) << p.describe();
        if (unroll == 1) {
          one = out;
          continue;
        }
        // Bit for bit: the indices, or the values' bits (-0.0 and NaN payloads included).
        const at::ScalarType bits = kernels::reduceOpInfo(op).index ? at::kLong
                                    : dtype == DType::Float32    ? at::kInt
                                                                 : at::kShort;
        EXPECT_TRUE(at::equal(out.view(bits), one.view(bits))) << p.describe();
      }
    }
  }
}

TEST(ReduceDimRuntimeGpuTest, GivenColumnsOfInfinitiesZerosAndNaNsWhenTheExtremaFoldThemThenAtensIndicesAndBits) {
  // Note [Folding rows in order]: a thread's fold decides by "NaN first, then strictly beyond" from a start of
  // -inf (+inf) at its first row; the value extrema merge by selects (hk_merge_value). Columns where that start
  // is all there is (only -inf or +inf), ties of +0 and -0, NaNs late or twice, and extents that leave threads
  // without rows (reduced < ty) or with a remainder after every batch; the tiles span ty 1 to 32 and every
  // unroll. Indices as ATen's, values as ATen's bits (NaN where ATen's is NaN).
  REQUIRE_CUDA_AND_NVRTC();
  (void)cacheDir();
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  for (ReduceOp op : {ReduceOp::Argmax, ReduceOp::Argmin, ReduceOp::Amax, ReduceOp::Amin}) {
    const bool index = kernels::reduceOpInfo(op).index;
    const ServedOp& served = servedOp(kernels::reduceAtenOpName(op));
    installServedOp(served, c10::DispatchKey::CUDA, nullptr);
    for (DType dtype : {DType::Float32, DType::BFloat16}) {
      for (int64_t reduced : {int64_t{1}, int64_t{3}, int64_t{37}, int64_t{4099}}) {
        const int64_t outer = 2, inner = 64;
        const ReduceDimVariant v{dtype, outer, reduced, inner, op};
        const VariantKey key = kernels::reduceDimKeyOf(v, 0);
        at::Tensor x = at::randn({outer, reduced, inner}, at::TensorOptions().device(at::kCUDA, 0)).round_();
        auto col = [&](int64_t c) { return x.select(0, outer - 1).select(1, c); };  // [reduced] of one position
        col(0).fill_(-inf);
        col(1).fill_(inf);
        col(2).fill_(-inf);
        col(2)[reduced - 1].fill_(1.0f);
        col(3).fill_(inf);
        col(3)[reduced - 1].fill_(-1.0f);
        col(4).fill_(0.0f);
        if (reduced > 1) col(4).slice(0, 1, reduced, 2).fill_(-0.0f);  // +0, -0, +0, ...: ties, the first index
        col(5)[reduced - 1].fill_(nan);                                   // a NaN in the last row
        if (reduced >= 6) {
          col(6)[2].fill_(nan);
          col(6)[5].fill_(nan);  // two NaNs: the first
          col(7).fill_(-inf);
          col(7)[3].fill_(inf);
          col(7)[reduced - 1].fill_(inf);  // +inf twice after -inf: the first
        }
        x = x.to(torchType(dtype));
        const at::Tensor ref = atenReduceMiddleDim(x.view({outer, reduced * inner}), op, inner);
        for (int ty : {1, 4, 32}) {
          const int vec = dtype == DType::Float32 || ty == 32 ? 4 : 8;  // 16 bytes, or the shared memory's bound
          for (int unroll : kernels::kMiddleDimUnrolls) {
            const ReduceDimParams p{32, ty, vec, unroll};
            SCOPED_TRACE(std::string(kernels::reduceOpName(op)) + " " + kernels::dtypeName(dtype) + " reduced " +
                         std::to_string(reduced) + " " + p.describe());
            ASSERT_TRUE(ReduceDimFamily::guardParams(v, p));
            plansOf(served).publish(kernels::reduceDescriptor(op).makePlan(key, p.toJson(), cubinOf(dtype, op, p), 0));
            const uint64_t hits = hitsOf(served);
            const at::Tensor out = callOp(op, x, 1, false);
            ASSERT_EQ(hitsOf(served), hits + 1);
            EXPECT_TRUE(meetsAten(op, x, out, ref));
            if (!index) {
              // Bits, a NaN as a NaN (bfloat16's payload may differ: the harness's rule) and a zero as a zero:
              // where +0 and -0 tie (column 4, and the rounded random columns of few rows), the zero ATen's
              // amax / amin return depends on their own combining order, hotkernel's is the AND (OR) of the bits.
              const at::ScalarType bits = dtype == DType::Float32 ? at::kInt : at::kShort;
              const at::Tensor zero = ref == 0;
              const at::Tensor skip = ref.isnan() | zero;
              EXPECT_TRUE(at::equal(out.isnan(), ref.isnan()));
              EXPECT_TRUE(at::equal(out == 0, zero));
              EXPECT_TRUE(at::equal(out.view(bits).masked_fill(skip, 0), ref.view(bits).masked_fill(skip, 0)));
            }
          }
        }
        if (!index) continue;
        // What ATen gives those columns, so that a change on its side shows here.
        const at::Tensor last = ref.select(0, outer - 1).cpu();
        EXPECT_EQ(last[0].item<int64_t>(), 0);
        EXPECT_EQ(last[1].item<int64_t>(), 0);
        EXPECT_EQ(last[2].item<int64_t>(), op == ReduceOp::Argmax ? reduced - 1 : 0);
        EXPECT_EQ(last[3].item<int64_t>(), op == ReduceOp::Argmax ? 0 : reduced - 1);
        EXPECT_EQ(last[4].item<int64_t>(), 0);
        EXPECT_EQ(last[5].item<int64_t>(), reduced - 1);
        if (reduced >= 6) {
          EXPECT_EQ(last[6].item<int64_t>(), 2);
          EXPECT_EQ(last[7].item<int64_t>(), op == ReduceOp::Argmax ? 3 : 0);
        }
      }
    }
  }
}

TEST(ReduceDimRuntimeGpuTest, GivenAHotFp32MiddleDimAmaxWhenOptimizedThenItIsCachedUnderTheOpsFamilyAndServed) {
  REQUIRE_CUDA_AND_NVRTC();
  (void)cacheDir();
  const ReduceOp op = ReduceOp::Amax;
  const std::string name = kernels::reduceAtenOpName(op);
  installServedOp(servedOp(name), c10::DispatchKey::CUDA, nullptr);
  const ReduceDimVariant v{DType::Float32, 64, 512, 1024, op};
  const VariantKey key = kernels::reduceDimKeyOf(v, 0);
  const std::string variant = kernels::variantString(key);
  ASSERT_EQ(variant, "dtype=float32;rows=64;cols=512;inner=1024");
  const nlohmann::json summary =
      Engine::instance().optimizeVariant(name, key, [] { return true; }, budgetOf(name, key, 40.0));
  std::cout << name << " " << variant << ": " << summary.value("decision", "?") << " speed-up "
            << summary.value("speedup", 0.0) << std::endl;
  ASSERT_TRUE(summary["decision"] == "kernel" || summary["decision"] == "keep_aten") << summary.dump();
  const std::string fingerprint = Engine::instance().status()["fingerprint"];
  std::unique_ptr<cache::CacheStore> store = cache::CacheStore::open(cacheDir());
  const std::optional<cache::Entry> entry = store->get(fingerprint, name, variant);
  ASSERT_TRUE(entry.has_value());
  EXPECT_EQ(entry->family, kernels::reduceFamilyName(op));
  if (summary["decision"] == "kernel") {
    EXPECT_EQ(entry->kernelName, ReduceDimFamily::kKernelName);
    EXPECT_NO_THROW((void)ReduceDimParams::fromJson(nlohmann::json::parse(entry->params)));
    EXPECT_TRUE(!planOf(name, variant).is_null()) << Engine::instance().status()["plans"].dump();
  } else {
    std::cout << name << ": the tuner kept ATen; publishing the harness-validated first point" << std::endl;
    const ReduceDimParams p = ReduceDimFamily::parameterSpace(v).front();
    const std::string& cubin = cubinOf(v.dtype, op, p);
    const HarnessReport report =
        runHarness(reduceDimSpec(op, v.inner), reduceDimCandidate(v, p, cubin), v.dtype, v.outer, v.reduced * v.inner, 0);
    ASSERT_TRUE(report.passed) << (report.failure() ? report.failure()->detail : std::string());
    plansOf(servedOp(name)).publish(kernels::reduceDescriptor(op).makePlan(key, p.toJson(), cubin, 0));
  }
  ASSERT_NE(plansOf(servedOp(name)).load()->find(key), nullptr);

  // [64, 512, 32, 32] over dim 1 is the same variant: served, ATen's result and shape.
  at::Tensor x = at::randn({64, 512, 32, 32}, at::TensorOptions().device(at::kCUDA, 0));
  x.select(0, 2).select(1, 3).select(1, 4).fill_(std::numeric_limits<float>::quiet_NaN());
  const uint64_t hits = hitsOf(servedOp(name));
  const at::Tensor out = callOp(op, x, 1, false);
  EXPECT_EQ(hitsOf(servedOp(name)), hits + 1);
  ASSERT_EQ(out.sizes(), (at::IntArrayRef{64, 32, 32}));
  const at::Tensor ref = atenReduceMiddleDim(x.view({64, 512 * 1024}), op, 1024).view({64, 32, 32});
  EXPECT_TRUE(at::all((out == ref) | (out.isnan() & ref.isnan())).item<bool>());
  EXPECT_TRUE(std::isnan(out[2][3][4].item<float>()));
}

}  // namespace
}  // namespace hotkernel
