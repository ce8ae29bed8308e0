// The reduction trampolines (aten::sum.dim_IntList, aten::mean.dim,
// aten::amax, aten::argmax, aten::amin, aten::argmin, aten::max.dim,
// aten::min.dim) route plan hits to the plan's launcher with the (in, out,
// rows, cols) ABI over the last dim(s), or the (in, out, outer, reduced,
// inner) one over a middle dim (max.dim / min.dim: the indices after the
// values), and return ATen's shapes and dtypes; everything the families
// refuse, and any failed launch, runs the original kernel.
// Exercised on the CPU dispatch key with a launcher that plays the kernel ABI
// on the host (the CUDA key runs the same trampolines; see
// tests/gpu/ReduceRuntimeGpuTest.cpp). Own binary: the overrides of sum & co
// stay out of the other interpose tests.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <atomic>

#include "HigherKeyCall.h"
#include "ReduceOverride.h"
#include "hotkernel/interpose/ServedOps.h"
#include "hotkernel/kernels/DType.h"

namespace hotkernel {
namespace {

using kernels::ReduceOp;

constexpr int32_t kF32 = static_cast<int32_t>(kernels::DType::Float32);

// Plays hk_reduce_lastdim's ABI: row r's result is r + 0.25 (float32), or r
// (int64) for the index ops; records what it got.
class AbiLauncher : public KernelLauncher {
 public:
  explicit AbiLauncher(bool argmax) : argmax_(argmax) {}
  bool launch(const RowKernelArgs& a, void* stream) const noexcept override {
    ++calls;
    if (fail || stream != nullptr) return false;
    rows = a.rows;
    cols = a.cols;
    in = a.in;
    for (int64_t r = 0; r < a.rows; ++r) {
      if (argmax_) {
        static_cast<int64_t*>(a.out)[r] = r;
      } else {
        static_cast<float*>(a.out)[r] = static_cast<float>(r) + 0.25f;
      }
    }
    return true;
  }
  size_t alignment() const override { return 16; }
  std::string describe() const override { return "abi"; }
  mutable std::atomic<int> calls{0};
  mutable int64_t rows = 0, cols = 0;
  mutable const void* in = nullptr;
  std::atomic<bool> fail{false};

 private:
  bool argmax_;
};

at::Tensor pattern(int64_t rows) { return at::arange(rows, at::kFloat).add_(0.25); }

// Plays the pair ops' ABIs through launchArgs: (in, values, indices, rows,
// cols) writes row r's value r + 0.25 and index r; (in, values, indices,
// outer, reduced, inner) position (o, i)'s value 100 o + i + 0.5 and index
// 100 o + i. Records the pointers; its row ABI fails.
class PairAbiLauncher : public KernelLauncher {
 public:
  bool launch(const RowKernelArgs&, void*) const noexcept override { return false; }
  bool launchArgs(const KernelArgs& a, void* stream) const noexcept override {
    ++calls;
    if (fail || stream != nullptr || (a.size() != 5 && a.size() != 6)) return false;
    in = a.pointerAt(0);
    values = a.pointerAt(1);
    indices = a.pointerAt(2);
    const int64_t outer = a.int64At(3), inner = a.size() == 6 ? a.int64At(5) : 1;
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t i = 0; i < inner; ++i) {
        const int64_t at = o * inner + i, index = a.size() == 6 ? 100 * o + i : o;
        static_cast<int64_t*>(const_cast<void*>(indices))[at] = index;
        static_cast<float*>(const_cast<void*>(values))[at] = static_cast<float>(index) + (a.size() == 6 ? 0.5f : 0.25f);
      }
    }
    return true;
  }
  size_t alignment() const override { return 16; }
  std::string describe() const override { return "pair abi"; }
  mutable std::atomic<int> calls{0};
  mutable const void *in = nullptr, *values = nullptr, *indices = nullptr;
  std::atomic<bool> fail{false};
};

// The pairs' planned variants: float32 [5, 40] over the last dim, [3, 4, 10] over dim 1.
VariantKey pairLastKey() { return VariantKey{kF32, -1, 5, 40}; }
VariantKey pairMiddleKey() {
  VariantKey key{kF32, -1, 3, 4};
  key.inner = 10;
  return key;
}

// Plays hk_reduce_dim's ABI (in, out, outer, reduced, inner) through
// launchArgs: position (o, i)'s result is 100 o + i + 0.5 (float32), or
// 100 o + i (int64) for the index ops; records the arguments. Its row ABI
// (launch) fails: a middle-dim plan never gets a row launch.
class DimAbiLauncher : public KernelLauncher {
 public:
  explicit DimAbiLauncher(bool index) : index_(index) {}
  bool launch(const RowKernelArgs&, void*) const noexcept override {
    ++rowLaunches;
    return false;
  }
  bool launchArgs(const KernelArgs& a, void* stream) const noexcept override {
    ++calls;
    if (stream != nullptr || a.size() != 5) return false;
    in = a.pointerAt(0);
    outer = a.int64At(2);
    reduced = a.int64At(3);
    inner = a.int64At(4);
    void* out = const_cast<void*>(a.pointerAt(1));
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t i = 0; i < inner; ++i) {
        if (index_) {
          static_cast<int64_t*>(out)[o * inner + i] = 100 * o + i;
        } else {
          static_cast<float*>(out)[o * inner + i] = static_cast<float>(100 * o + i) + 0.5f;
        }
      }
    }
    return true;
  }
  size_t alignment() const override { return 16; }
  std::string describe() const override { return "dim abi"; }
  mutable std::atomic<int> calls{0}, rowLaunches{0};
  mutable int64_t outer = 0, reduced = 0, inner = 0;
  mutable const void* in = nullptr;

 private:
  bool index_;
};

// What DimAbiLauncher writes for `outer` x `inner` positions, as a float32 or int64 [outer, inner].
at::Tensor dimPattern(int64_t outer, int64_t inner, bool index) {
  const at::Tensor p = at::arange(outer, at::kLong).mul_(100).unsqueeze(1) + at::arange(inner, at::kLong).unsqueeze(0);
  return index ? p : p.to(at::kFloat).add_(0.5);
}

// The planned middle-dim variant: float32 [2, 5, 12] over dim 1.
VariantKey middleKey() {
  VariantKey key{kF32, -1, 2, 5};
  key.inner = 12;
  return key;
}

// A float32 sum of a few dozen normal values against its float64 result: an
// absolute floor, since a sum near 0 has no relative accuracy.
bool near(const at::Tensor& got, const at::Tensor& ref) {
  return at::allclose(got.to(at::kDouble), ref.to(at::kDouble), 1e-5, 1e-4);
}

class ReduceOverrideTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    for (ReduceOp op : kernels::kAllReduceOps) {
      ReduceOverride::install(c10::DispatchKey::CPU, op);
      if (kernels::reduceOpInfo(op).pair) {
        pairLaunchers_[op == ReduceOp::Min] = std::make_shared<PairAbiLauncher>();
        plansOf(servedOp(kernels::reduceAtenOpName(op)))
            .publish(Plan{pairLastKey(), pairLaunchers_[op == ReduceOp::Min], "pair abi 5x40"});
        plansOf(servedOp(kernels::reduceAtenOpName(op)))
            .publish(Plan{pairMiddleKey(), pairLaunchers_[op == ReduceOp::Min], "pair abi 3x4x10"});
        continue;
      }
      launchers_[static_cast<int>(op)] = std::make_shared<AbiLauncher>(kernels::reduceOpInfo(op).index);
      plansOf(servedOp(kernels::reduceAtenOpName(op))).publish(
          Plan{VariantKey{kF32, -1, 6, 48}, launchers_[static_cast<int>(op)], "abi 6x48"});
      dimLaunchers_[static_cast<int>(op)] = std::make_shared<DimAbiLauncher>(kernels::reduceOpInfo(op).index);
      plansOf(servedOp(kernels::reduceAtenOpName(op))).publish(
          Plan{middleKey(), dimLaunchers_[static_cast<int>(op)], "dim abi 2x5x12"});
    }
  }
  void SetUp() override {
    for (auto& l : launchers_) {
      if (l) l->fail = false;
    }
    for (auto& l : pairLaunchers_) l->fail = false;
    setServedOpsEnabled(true);
  }
  static PairAbiLauncher& pairLauncher(ReduceOp op) { return *pairLaunchers_[op == ReduceOp::Min]; }
  static std::shared_ptr<PairAbiLauncher> pairLaunchers_[2];  // max, min
  static AbiLauncher& launcher(ReduceOp op) { return *launchers_[static_cast<int>(op)]; }
  static DimAbiLauncher& dimLauncher(ReduceOp op) { return *dimLaunchers_[static_cast<int>(op)]; }
  static std::shared_ptr<AbiLauncher> launchers_[kernels::kReduceOpCount];
  static std::shared_ptr<DimAbiLauncher> dimLaunchers_[kernels::kReduceOpCount];
};
std::shared_ptr<AbiLauncher> ReduceOverrideTest::launchers_[kernels::kReduceOpCount];
std::shared_ptr<DimAbiLauncher> ReduceOverrideTest::dimLaunchers_[kernels::kReduceOpCount];
std::shared_ptr<PairAbiLauncher> ReduceOverrideTest::pairLaunchers_[2];

// One call of `op` over `dim` (sum, mean, amax, amin: a one-element dim list).
at::Tensor reduceOver(ReduceOp op, const at::Tensor& x, int64_t dim, bool keepdim) {
  switch (op) {
    case ReduceOp::Sum:
      return at::sum(x, {dim}, keepdim);
    case ReduceOp::Mean:
      return at::mean(x, {dim}, keepdim);
    case ReduceOp::Amax:
      return at::amax(x, {dim}, keepdim);
    case ReduceOp::Amin:
      return at::amin(x, {dim}, keepdim);
    case ReduceOp::Argmax:
      return at::argmax(x, dim, keepdim);
    case ReduceOp::Argmin:
      return at::argmin(x, dim, keepdim);
    case ReduceOp::Max:
    case ReduceOp::Min:
      break;  // pairs: their own tests
  }
  return {};
}

TEST_F(ReduceOverrideTest, GivenAPlannedMiddleDimVariantWhenEveryOpReducesDimOneThenTheFiveArgumentAbiServesWithAtensShapes) {
  const at::Tensor x = at::randn({2, 5, 12});
  for (ReduceOp op : kernels::kAllReduceOps) {
    if (kernels::reduceOpInfo(op).pair) continue;
    SCOPED_TRACE(kernels::reduceOpName(op));
    const bool index = kernels::reduceOpInfo(op).index;
    DimAbiLauncher& l = dimLauncher(op);
    const int before = l.calls.load();
    const uint64_t hits = hitsOf(servedOp(kernels::reduceAtenOpName(op)));
    const at::Tensor out = reduceOver(op, x, 1, false);
    EXPECT_EQ(l.calls.load(), before + 1);
    EXPECT_EQ(hitsOf(servedOp(kernels::reduceAtenOpName(op))), hits + 1);
    EXPECT_EQ(l.rowLaunches.load(), 0);
    EXPECT_EQ(l.in, x.const_data_ptr());
    EXPECT_EQ(l.outer, 2);
    EXPECT_EQ(l.reduced, 5);
    EXPECT_EQ(l.inner, 12);
    EXPECT_EQ(out.sizes(), (at::IntArrayRef{2, 12}));
    EXPECT_EQ(out.scalar_type(), index ? at::kLong : at::kFloat);
    EXPECT_TRUE(out.is_contiguous());
    EXPECT_TRUE(at::equal(out, dimPattern(2, 12, index)));
    // keepdim, and the dim spelled negatively.
    const at::Tensor kept = reduceOver(op, x, -2, true);
    EXPECT_EQ(kept.sizes(), (at::IntArrayRef{2, 1, 12}));
    EXPECT_TRUE(at::equal(kept.reshape({2, 12}), dimPattern(2, 12, index)));
    EXPECT_EQ(l.calls.load(), before + 2);
  }
}

TEST_F(ReduceOverrideTest, GivenAFourDimensionalTensorWithThePlannedExtentsWhenReducedOverDimOneThenThePlanServes) {
  // [2, 5, 3, 4] over dim 1: outer 2, reduced 5, inner 3 * 4 = 12.
  const at::Tensor x = at::randn({2, 5, 3, 4});
  const int before = dimLauncher(ReduceOp::Amax).calls.load();
  const at::Tensor out = at::amax(x, {1});
  EXPECT_EQ(dimLauncher(ReduceOp::Amax).calls.load(), before + 1);
  EXPECT_EQ(out.sizes(), (at::IntArrayRef{2, 3, 4}));
  EXPECT_TRUE(at::equal(out.reshape({2, 12}), dimPattern(2, 12, false)));
}

TEST_F(ReduceOverrideTest, GivenMiddleDimCallsTheFamilyRefusesWhenCalledThenOriginalResultsAndNoLaunch) {
  const at::Tensor x = at::randn({2, 5, 12});
  const at::Tensor nc = at::randn({5, 2, 12}).transpose(0, 1);  // [2, 5, 12], not contiguous
  ASSERT_FALSE(nc.is_contiguous());
  const at::Tensor other = at::randn({2, 6, 12});  // no plan
  const at::Tensor x64 = x.to(at::kDouble);
  const int sumBefore = dimLauncher(ReduceOp::Sum).calls.load();
  const int argmaxBefore = dimLauncher(ReduceOp::Argmax).calls.load();
  const int amaxBefore = dimLauncher(ReduceOp::Amax).calls.load();
  // dim=None, two dims, a dtype= argument, a non-contiguous input, an unplanned shape.
  EXPECT_TRUE(near(at::sum(x, at::IntArrayRef{0, 1}), x64.sum(at::IntArrayRef{0, 1})));
  EXPECT_TRUE(near(at::sum(x, {1}, false, at::kFloat), x64.sum(1)));
  EXPECT_TRUE(near(at::sum(nc, {1}), nc.to(at::kDouble).sum(1)));
  EXPECT_TRUE(near(at::sum(other, {1}), other.to(at::kDouble).sum(1)));
  EXPECT_EQ(at::argmax(x).item<int64_t>(), x.reshape({-1}).argmax().item<int64_t>());
  EXPECT_TRUE(at::equal(at::argmax(nc, 1), std::get<1>(nc.max(1))));
  EXPECT_TRUE(at::equal(at::amax(nc, {1}), std::get<0>(nc.max(1))));
  EXPECT_TRUE(at::equal(at::amax(x, at::IntArrayRef{0, 1}), std::get<0>(x.reshape({10, 12}).max(0))));
  EXPECT_EQ(dimLauncher(ReduceOp::Sum).calls.load(), sumBefore);
  EXPECT_EQ(dimLauncher(ReduceOp::Argmax).calls.load(), argmaxBefore);
  EXPECT_EQ(dimLauncher(ReduceOp::Amax).calls.load(), amaxBefore);
}

TEST_F(ReduceOverrideTest, GivenAKeysetWithAKeyAboveCpuWhenCalledForTheCpuKeyThenTheOriginalsRun) {
  // As torch.compile's Python dispatcher calls them: the trampoline's keyset's highest key is not CPU.
  const c10::DispatchKeySet cpu(c10::DispatchKey::CPU);
  at::Tensor x = at::randn({7, 9});
  torch::jit::Stack out = callCpuKernelUnderAHigherKey(
      "aten::sum", "dim_IntList", {x, std::vector<int64_t>{1}, false, c10::IValue()});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(at::equal(out[0].toTensor(), ReduceOverride::callOriginalSum(cpu, x, {{1}}, false, std::nullopt)));
  out = callCpuKernelUnderAHigherKey("aten::mean", "dim", {x, std::vector<int64_t>{1}, true, c10::IValue()});
  EXPECT_TRUE(at::equal(out[0].toTensor(), ReduceOverride::callOriginalMean(cpu, x, {{1}}, true, std::nullopt)));
  out = callCpuKernelUnderAHigherKey("aten::amax", "", {x, std::vector<int64_t>{1}, false});
  EXPECT_TRUE(at::equal(out[0].toTensor(), ReduceOverride::callOriginalExtremum(ReduceOp::Amax, cpu, x, {1}, false)));
  out = callCpuKernelUnderAHigherKey("aten::argmax", "", {x, std::optional<int64_t>(1), false});
  EXPECT_TRUE(at::equal(out[0].toTensor(), ReduceOverride::callOriginalIndex(ReduceOp::Argmax, cpu, x, 1, false)));
  out = callCpuKernelUnderAHigherKey("aten::max", "dim", {x, int64_t{1}, false});
  ASSERT_EQ(out.size(), 2u);
  auto [values, indices] = ReduceOverride::callOriginalPair(ReduceOp::Max, cpu, x, 1, false);
  EXPECT_TRUE(at::equal(out[0].toTensor(), values));
  EXPECT_TRUE(at::equal(out[1].toTensor(), indices));
}

TEST_F(ReduceOverrideTest, GivenInstalledTwiceWhenInstallingThenIdempotentForEveryOp) {
  for (ReduceOp op : kernels::kAllReduceOps) {
    EXPECT_NO_THROW(ReduceOverride::install(c10::DispatchKey::CPU, op));
    EXPECT_TRUE(ReduceOverride::state(op).installedFor(c10::DispatchKey::CPU));
  }
  EXPECT_STREQ(ReduceOverride::opName(ReduceOp::Sum), "aten::sum.dim_IntList");
  // What the runtime asks before it tunes a hot variant (Note [Only served ops are tuned]).
  EXPECT_TRUE(servedOpInstalled(servedOp("aten::argmax"), c10::DispatchKey::CPU));
  EXPECT_FALSE(servedOpInstalled(servedOp("aten::argmax"), c10::DispatchKey::CUDA));
  EXPECT_FALSE(servedOpInstalled(servedOp("aten::_softmax"), c10::DispatchKey::CPU));
}

TEST_F(ReduceOverrideTest, GivenAPlannedVariantWhenSummedOverTheLastDimThenThePlanServesWithAtensShapes) {
  const at::Tensor x = at::randn({2, 3, 48});
  const uint64_t hits = hitsOf(servedOp(kernels::reduceAtenOpName(ReduceOp::Sum)));
  const at::Tensor out = at::sum(x, {-1});
  EXPECT_EQ(hitsOf(servedOp(kernels::reduceAtenOpName(ReduceOp::Sum))), hits + 1);
  EXPECT_EQ(out.sizes(), (at::IntArrayRef{2, 3}));
  EXPECT_EQ(out.scalar_type(), at::kFloat);
  EXPECT_TRUE(at::equal(out.reshape({6}), pattern(6)));
  EXPECT_EQ(launcher(ReduceOp::Sum).rows, 6);
  EXPECT_EQ(launcher(ReduceOp::Sum).cols, 48);
  EXPECT_EQ(launcher(ReduceOp::Sum).in, x.const_data_ptr());
  // keepdim, and the last dim spelled positively.
  EXPECT_EQ(at::sum(x, {-1}, /*keepdim=*/true).sizes(), (at::IntArrayRef{2, 3, 1}));
  EXPECT_TRUE(at::equal(at::sum(x, {2}).reshape({6}), pattern(6)));
  EXPECT_EQ(hitsOf(servedOp(kernels::reduceAtenOpName(ReduceOp::Sum))), hits + 3);
}

TEST_F(ReduceOverrideTest, GivenPlannedVariantsWhenMeanAmaxAndArgmaxRunThenEachOpsPlanServes) {
  const at::Tensor x = at::randn({6, 48});
  EXPECT_TRUE(at::equal(at::mean(x, {-1}), pattern(6)));
  EXPECT_TRUE(at::equal(at::amax(x, {-1}), pattern(6)));
  const at::Tensor idx = at::argmax(x, -1);
  EXPECT_EQ(idx.scalar_type(), at::kLong);
  EXPECT_TRUE(at::equal(idx, at::arange(6, at::kLong)));
  EXPECT_EQ(at::argmax(x, -1, /*keepdim=*/true).sizes(), (at::IntArrayRef{6, 1}));
  EXPECT_GE(launcher(ReduceOp::Mean).calls.load(), 1);
  EXPECT_GE(launcher(ReduceOp::Amax).calls.load(), 1);
}

TEST_F(ReduceOverrideTest, GivenThePlannedRowsAsTheLastTwoDimsWhenReducedThenThePlanServesWithAtensShapes) {
  // [6, 4, 12] over dims (-2, -1): the [6, 48] variant (Note [What the reduction overrides refuse]).
  const at::Tensor x = at::randn({6, 4, 12});
  const int before = launcher(ReduceOp::Sum).calls.load();
  const at::Tensor out = at::sum(x, at::IntArrayRef{-2, -1});
  EXPECT_EQ(launcher(ReduceOp::Sum).calls.load(), before + 1);
  EXPECT_EQ(launcher(ReduceOp::Sum).cols, 48);
  EXPECT_TRUE(at::equal(out, pattern(6)));
  EXPECT_EQ(at::amin(x, at::IntArrayRef{2, 1}, /*keepdim=*/true).sizes(), (at::IntArrayRef{6, 1, 1}));
  // Not the last k dims: the original.
  const at::Tensor y = at::randn({6, 48, 1});
  EXPECT_TRUE(near(at::sum(y, at::IntArrayRef{0, 1}), y.to(at::kDouble).sum(at::IntArrayRef{0, 1})));
  EXPECT_EQ(launcher(ReduceOp::Sum).calls.load(), before + 1);
}

TEST_F(ReduceOverrideTest, GivenPlannedVariantsWhenAminAndArgminRunThenTheirOwnRowsServe) {
  // The two ops added as rows of the served-op table (Note [The served-op table]).
  const at::Tensor x = at::randn({2, 3, 48});
  const int aminBefore = launcher(ReduceOp::Amin).calls.load();
  const int amaxBefore = launcher(ReduceOp::Amax).calls.load();
  const uint64_t hits = hitsOf(servedOp("aten::amin"));
  const at::Tensor m = at::amin(x, {-1});
  EXPECT_EQ(m.sizes(), (at::IntArrayRef{2, 3}));
  EXPECT_TRUE(at::equal(m.reshape({6}), pattern(6)));
  EXPECT_EQ(launcher(ReduceOp::Amin).calls.load(), aminBefore + 1);
  EXPECT_EQ(launcher(ReduceOp::Amax).calls.load(), amaxBefore);
  EXPECT_EQ(hitsOf(servedOp("aten::amin")), hits + 1);
  const at::Tensor idx = at::argmin(x, 2, /*keepdim=*/true);
  EXPECT_EQ(idx.scalar_type(), at::kLong);
  EXPECT_EQ(idx.sizes(), (at::IntArrayRef{2, 3, 1}));
  EXPECT_TRUE(at::equal(idx.reshape({6}), at::arange(6, at::kLong)));
  EXPECT_GE(launcher(ReduceOp::Argmin).calls.load(), 1);
  // Refused calls run the originals: another dim, argmin(dim=None), a variant without a plan.
  EXPECT_TRUE(at::equal(at::amin(x, {1}), std::get<0>(x.min(1))));
  EXPECT_EQ(at::argmin(x).item<int64_t>(), x.reshape({-1}).argmin().item<int64_t>());
  const at::Tensor y = at::randn({7, 48});
  EXPECT_TRUE(at::equal(at::argmin(y, -1), std::get<1>(y.min(-1))));
  EXPECT_TRUE(at::equal(at::amin(y, {-1}), std::get<0>(y.min(-1))));
}

TEST_F(ReduceOverrideTest, GivenCallsTheFamilyRefusesOrWithoutAPlanWhenCalledThenOriginalResults) {
  const at::Tensor x = at::randn({6, 48});
  const at::Tensor t = at::randn({48, 6}).t();  // [6, 48], not contiguous
  const at::Tensor y = at::randn({7, 48});
  const at::Tensor ints = at::arange(12, at::kLong).reshape({3, 4});
  // The expectations first: float64 sums go through the trampoline too (refused: double).
  const at::Tensor x64 = x.to(at::kDouble);
  const at::Tensor byCol = x64.sum(0).to(at::kFloat), all = x64.sum().to(at::kFloat), byRow64 = x64.sum(-1);
  const at::Tensor tRows = t.to(at::kDouble).sum(-1).to(at::kFloat), yRows = y.to(at::kDouble).sum(-1).to(at::kFloat);
  const int before = launcher(ReduceOp::Sum).calls.load();
  const uint64_t misses = missesOf(servedOp(kernels::reduceAtenOpName(ReduceOp::Sum)));
  // Another dim, several dims, a dtype= argument, a transposed input, an unplanned shape, integers.
  const at::Tensor outByCol = at::sum(x, {0}), outAll = at::sum(x, at::IntArrayRef{0, 1});
  const at::Tensor asDouble = at::sum(x, {-1}, false, at::kDouble);
  const at::Tensor outT = at::sum(t, {-1}), outY = at::sum(y, {-1}), outInts = at::sum(ints, {-1});
  EXPECT_EQ(launcher(ReduceOp::Sum).calls.load(), before);
  EXPECT_EQ(missesOf(servedOp(kernels::reduceAtenOpName(ReduceOp::Sum))), misses + 6);
  EXPECT_TRUE(near(outByCol, byCol));
  EXPECT_TRUE(near(outAll, all));
  EXPECT_EQ(asDouble.scalar_type(), at::kDouble);
  EXPECT_TRUE(near(asDouble, byRow64));
  EXPECT_TRUE(near(outT, tRows));
  EXPECT_TRUE(near(outY, yRows));
  EXPECT_TRUE(at::equal(outInts, at::tensor(std::vector<int64_t>{6, 22, 38}, at::kLong)));
  // argmax(dim=None): flattened, ATen's.
  const int argmaxBefore = launcher(ReduceOp::Argmax).calls.load();
  EXPECT_EQ(at::argmax(x).item<int64_t>(), x.reshape({-1}).argmax().item<int64_t>());
  EXPECT_EQ(launcher(ReduceOp::Argmax).calls.load(), argmaxBefore);
  // amax over the first dim and mean over another dim go to ATen.
  EXPECT_TRUE(at::equal(at::amax(x, {0}), std::get<0>(x.max(0))));
  EXPECT_TRUE(near(at::mean(x, {0}, true), x64.mean(0, true).to(at::kFloat)));
}

TEST_F(ReduceOverrideTest, GivenAFailingLaunchOrDisabledOverridesWhenCalledThenOriginalResults) {
  const at::Tensor x = at::randn({6, 48});
  const at::Tensor expected = x.to(at::kDouble).sum(-1).to(at::kFloat);
  launcher(ReduceOp::Sum).fail = true;
  const uint64_t misses = missesOf(servedOp(kernels::reduceAtenOpName(ReduceOp::Sum)));
  EXPECT_TRUE(near(at::sum(x, {-1}), expected));
  EXPECT_EQ(missesOf(servedOp(kernels::reduceAtenOpName(ReduceOp::Sum))), misses + 1);
  launcher(ReduceOp::Sum).fail = false;
  EXPECT_TRUE(setServedOpsEnabled(false));
  EXPECT_FALSE(servedOpsEnabled());
  const int before = launcher(ReduceOp::Argmax).calls.load();
  EXPECT_TRUE(near(at::sum(x, {-1}), expected));
  EXPECT_TRUE(at::equal(at::argmax(x, -1), std::get<1>(x.max(-1))));
  EXPECT_EQ(launcher(ReduceOp::Argmax).calls.load(), before);
  setServedOpsEnabled(true);
}

TEST_F(ReduceOverrideTest, GivenMisalignedInputWhenCalledThenOriginalResult) {
  // A view starting one float in: 4-byte aligned, not 16 (the launcher's alignment).
  const at::Tensor base = at::randn({6 * 48 + 1});
  const at::Tensor x = base.narrow(0, 1, 6 * 48).view({6, 48});
  ASSERT_NE(reinterpret_cast<uintptr_t>(x.const_data_ptr()) % 16, 0u);
  const int before = launcher(ReduceOp::Sum).calls.load();
  EXPECT_TRUE(near(at::sum(x, {-1}), x.to(at::kDouble).sum(-1).to(at::kFloat)));
  EXPECT_EQ(launcher(ReduceOp::Sum).calls.load(), before);
}

TEST_F(ReduceOverrideTest, GivenPlannedPairVariantsWhenMaxAndMinRunOverTheLastDimThenValuesAndIndicesFromOneLaunch) {
  const at::Tensor x = at::randn({5, 40});
  for (ReduceOp op : {ReduceOp::Max, ReduceOp::Min}) {
    SCOPED_TRACE(kernels::reduceOpName(op));
    PairAbiLauncher& l = pairLauncher(op);
    const int before = l.calls.load();
    const uint64_t hits = hitsOf(servedOp(kernels::reduceAtenOpName(op)));
    auto [values, indices] = op == ReduceOp::Max ? at::max(x, -1) : at::min(x, 1);
    EXPECT_EQ(l.calls.load(), before + 1);
    EXPECT_EQ(hitsOf(servedOp(kernels::reduceAtenOpName(op))), hits + 1);
    EXPECT_EQ(l.in, x.const_data_ptr());
    EXPECT_EQ(l.values, values.const_data_ptr());
    EXPECT_EQ(l.indices, indices.const_data_ptr());
    EXPECT_EQ(values.scalar_type(), at::kFloat);
    EXPECT_EQ(indices.scalar_type(), at::kLong);
    EXPECT_EQ(values.sizes(), (at::IntArrayRef{5}));
    EXPECT_TRUE(at::equal(values, pattern(5)));
    EXPECT_TRUE(at::equal(indices, at::arange(5, at::kLong)));
    auto [keptValues, keptIndices] = op == ReduceOp::Max ? at::max(x, 1, true) : at::min(x, -1, true);
    EXPECT_EQ(keptValues.sizes(), (at::IntArrayRef{5, 1}));
    EXPECT_EQ(keptIndices.sizes(), (at::IntArrayRef{5, 1}));
    EXPECT_TRUE(at::equal(keptIndices.reshape({5}), at::arange(5, at::kLong)));
    EXPECT_EQ(l.calls.load(), before + 2);
  }
}

TEST_F(ReduceOverrideTest, GivenPlannedPairVariantsWhenMaxAndMinRunOverAMiddleDimThenTheSixArgumentAbiServes) {
  const at::Tensor x = at::randn({3, 4, 10});
  for (ReduceOp op : {ReduceOp::Max, ReduceOp::Min}) {
    SCOPED_TRACE(kernels::reduceOpName(op));
    PairAbiLauncher& l = pairLauncher(op);
    const int before = l.calls.load();
    auto [values, indices] = op == ReduceOp::Max ? at::max(x, 1) : at::min(x, -2);
    EXPECT_EQ(l.calls.load(), before + 1);
    EXPECT_EQ(values.sizes(), (at::IntArrayRef{3, 10}));
    EXPECT_TRUE(values.is_contiguous() && indices.is_contiguous());
    EXPECT_TRUE(at::equal(values, dimPattern(3, 10, false)));
    EXPECT_TRUE(at::equal(indices, dimPattern(3, 10, true)));
    auto [keptValues, keptIndices] = op == ReduceOp::Max ? at::max(x, 1, true) : at::min(x, 1, true);
    EXPECT_EQ(keptValues.sizes(), (at::IntArrayRef{3, 1, 10}));
    EXPECT_TRUE(at::equal(keptIndices.reshape({3, 10}), dimPattern(3, 10, true)));
  }
}

TEST_F(ReduceOverrideTest, GivenAServedMaxUnderAutogradWhenBackwardRunsThenTheGradientFollowsTheTrampolinesIndices) {
  // The trampoline replaces only the kernel below autograd: max.dim's
  // backward scatters into the indices the trampoline returned (here the
  // launcher's: row r's index r).
  const at::Tensor x = at::randn({5, 40}).requires_grad_(true);
  auto [values, indices] = at::max(x, -1);
  ASSERT_TRUE(values.requires_grad());
  values.sum().backward();
  const at::Tensor want = at::zeros({5, 40}).index_put_({at::arange(5, at::kLong), at::arange(5, at::kLong)},
                                                        at::ones({5}));
  EXPECT_TRUE(at::equal(x.grad(), want));
}

TEST_F(ReduceOverrideTest, GivenPairCallsTheFamilyRefusesOrAFailingLaunchWhenCalledThenAtensResults) {
  const at::Tensor x = at::randn({5, 40});
  const at::Tensor t = at::randn({40, 5}).t();  // [5, 40], not contiguous
  const at::Tensor x64 = x.to(at::kDouble), t64 = t.to(at::kDouble);
  // float64 references: computed before counting (float64 is refused, but it is a call).
  const auto [xMax, xArg] = x64.max(-1);
  const auto [tMin, tArg] = t64.min(-1);
  const auto [colMax, colArg] = x64.max(0);
  const int before = pairLauncher(ReduceOp::Max).calls.load() + pairLauncher(ReduceOp::Min).calls.load();
  // The out= overload (max.dim_max) has no trampoline.
  at::Tensor values = at::empty({5}), indices = at::empty({5}, at::kLong);
  at::max_out(values, indices, x, -1);
  EXPECT_TRUE(at::equal(values, xMax.to(at::kFloat)));
  EXPECT_TRUE(at::equal(indices, xArg));
  // A non-contiguous input, an unplanned dim (dim 0: a middle-dim key without a plan).
  auto [nv, ni] = at::min(t, -1);
  EXPECT_TRUE(at::equal(nv, tMin.to(at::kFloat)));
  EXPECT_TRUE(at::equal(ni, tArg));
  auto [cv, ci] = at::max(x, 0);
  EXPECT_TRUE(at::equal(cv, colMax.to(at::kFloat)));
  EXPECT_TRUE(at::equal(ci, colArg));
  EXPECT_EQ(pairLauncher(ReduceOp::Max).calls.load() + pairLauncher(ReduceOp::Min).calls.load(), before);
  // A failing launch: ATen's pair.
  pairLauncher(ReduceOp::Max).fail = true;
  const uint64_t misses = missesOf(servedOp("aten::max.dim"));
  auto [fv, fi] = at::max(x, -1);
  EXPECT_TRUE(at::equal(fv, xMax.to(at::kFloat)));
  EXPECT_TRUE(at::equal(fi, xArg));
  EXPECT_EQ(missesOf(servedOp("aten::max.dim")), misses + 1);
}

TEST(ReduceKeyOfTest, GivenTensorsWhenKeyedThenFlattenedRowsDeviceMinusOneAndAtensOutputSizes) {
  const at::Tensor x = at::randn({2, 3, 48});
  std::optional<ReduceCallKey> k = reduceKeyOf(ReduceOp::Mean, x, std::vector<int64_t>{-1}, false, false);
  ASSERT_TRUE(k.has_value());
  EXPECT_TRUE(k->key == (VariantKey{kF32, -1, 6, 48}));
  EXPECT_EQ(k->outSizes, (std::vector<int64_t>{2, 3}));
  k = reduceKeyOf(ReduceOp::Argmax, x.to(at::kBFloat16), std::vector<int64_t>{2}, true, false);
  ASSERT_TRUE(k.has_value());
  EXPECT_EQ(k->key.dtype, static_cast<int32_t>(kernels::DType::BFloat16));
  EXPECT_EQ(k->outSizes, (std::vector<int64_t>{2, 3, 1}));
  EXPECT_FALSE(reduceKeyOf(ReduceOp::Sum, x, std::nullopt, false, false).has_value());
  EXPECT_FALSE(reduceKeyOf(ReduceOp::Sum, x, std::vector<int64_t>{-1}, false, true).has_value());
  EXPECT_FALSE(reduceKeyOf(ReduceOp::Sum, x.to(at::kDouble), std::vector<int64_t>{-1}, false, false).has_value());
  EXPECT_FALSE(reduceKeyOf(ReduceOp::Amax, at::randn({0, 4}), std::vector<int64_t>{-1}, false, false).has_value());
  EXPECT_FALSE(reduceKeyOf(ReduceOp::Amax, at::Tensor(), std::vector<int64_t>{-1}, false, false).has_value());
}

TEST(ReduceKeyOfTest, GivenOneMiddleDimWhenKeyedThenOuterReducedInnerAndAtensOutputSizes) {
  const at::Tensor x = at::randn({2, 3, 5, 7});
  std::optional<ReduceCallKey> k = reduceKeyOf(ReduceOp::Sum, x, std::vector<int64_t>{1}, false, false);
  ASSERT_TRUE(k.has_value());
  VariantKey want{kF32, -1, 2, 3};
  want.inner = 35;
  EXPECT_TRUE(k->key == want);
  EXPECT_EQ(k->outSizes, (std::vector<int64_t>{2, 5, 7}));
  k = reduceKeyOf(ReduceOp::Argmin, x, std::vector<int64_t>{-4}, true, false);
  ASSERT_TRUE(k.has_value());
  EXPECT_EQ(k->key.rows, 1);
  EXPECT_EQ(k->key.cols, 2);
  EXPECT_EQ(k->key.inner, 105);
  EXPECT_EQ(k->outSizes, (std::vector<int64_t>{1, 3, 5, 7}));
  EXPECT_FALSE(reduceKeyOf(ReduceOp::Sum, x, std::vector<int64_t>{0, 1}, false, false).has_value());
  EXPECT_FALSE(reduceKeyOf(ReduceOp::Sum, x, std::vector<int64_t>{1}, false, true).has_value());
  EXPECT_FALSE(reduceKeyOf(ReduceOp::Amax, x.transpose(1, 2), std::vector<int64_t>{1}, false, false).has_value());
  EXPECT_FALSE(reduceKeyOf(ReduceOp::Amax, at::randn({4, 6, 1}), std::vector<int64_t>{1}, false, false).has_value());
}

}  // namespace
}  // namespace hotkernel
