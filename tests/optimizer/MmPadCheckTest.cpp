// mm_pad_n's value check (Note [Padded GEMM checks]) on the CPU: a GEMM summed
// in another order passes, near cancellations included; a misplaced, unwritten
// or far-off element fails.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <string>

#include "hotkernel/kernels/DType.h"
#include "hotkernel/kernels/FamilyDescriptor.h"
#include "hotkernel/kernels/MmPadFamily.h"
#include "hotkernel/optimizer/CachedKernelCheck.h"
#include "hotkernel/optimizer/FamilyTuning.h"
#include "hotkernel/optimizer/MmPadTuner.h"

namespace hotkernel {
namespace {

using kernels::DType;

struct Gemm {
  at::Tensor self, weight, eager;
};

// self [64, 768], weight [13, 768] scaled by 1/sqrt(K): outputs of unit size, many near 0.
Gemm draw(at::ScalarType dtype, uint64_t seed) {
  at::manual_seed(seed);
  Gemm g;
  g.self = at::randn({64, 768}).to(dtype);
  g.weight = at::randn({13, 768}).div_(std::sqrt(768.0)).to(dtype);
  g.eager = at::mm(g.self.to(at::kFloat), g.weight.to(at::kFloat).t()).to(dtype);
  return g;
}

// The same products summed in float32 in another order: eight K chunks in reverse, each reversed.
at::Tensor otherOrderFloat(const Gemm& g) {
  const at::Tensor a = g.self.to(at::kFloat).flip(1), w = g.weight.to(at::kFloat).flip(1);
  at::Tensor sum = at::zeros({a.size(0), w.size(0)});
  for (int64_t k0 = 0; k0 < a.size(1); k0 += 96) sum.add_(at::mm(a.narrow(1, k0, 96), w.narrow(1, k0, 96).t()));
  return sum;
}
at::Tensor otherOrder(const Gemm& g) { return otherOrderFloat(g).to(g.self.scalar_type()); }

TEST(MmPadCheckTest, GivenTheProductsSummedInAnotherOrderWhenCheckedThenWithinTheBound) {
  for (const auto& [dtype, d] : {std::pair{at::kHalf, DType::Float16}, std::pair{at::kBFloat16, DType::BFloat16}}) {
    for (uint64_t seed : {1, 2, 3}) {
      const Gemm g = draw(dtype, seed);
      const at::Tensor got = otherOrder(g);
      EXPECT_EQ(mmValuesWithinBound(g.self, g.weight, at::Tensor(), got, g.eager, d), "") << seed;
      EXPECT_EQ(mmValuesWithinBound(g.self, g.weight, at::Tensor(), g.eager, g.eager, d), "") << seed;
    }
  }
}

TEST(MmPadCheckTest, GivenABiasWhenCheckedThenItIsPartOfTheReferenceAndTheBound) {
  const Gemm g = draw(at::kBFloat16, 11);
  const at::Tensor bias = at::randn({13}).to(at::kBFloat16);
  const at::Tensor eager = at::addmm(bias.to(at::kFloat), g.self.to(at::kFloat), g.weight.to(at::kFloat).t())
                               .to(at::kBFloat16);
  const at::Tensor got = otherOrderFloat(g).add_(bias.to(at::kFloat)).to(at::kBFloat16);  // rounded once
  EXPECT_EQ(mmValuesWithinBound(g.self, g.weight, bias, got, eager, DType::BFloat16), "");
  // A result that left the bias out is off by the bias everywhere.
  EXPECT_NE(mmValuesWithinBound(g.self, g.weight, bias, otherOrder(g), eager, DType::BFloat16), "");
}

TEST(MmPadCheckTest, GivenAMisplacedUnwrittenOrFarOffElementWhenCheckedThenItFails) {
  const Gemm g = draw(at::kHalf, 7);
  at::Tensor swapped = g.eager.clone();
  swapped.select(1, 3).copy_(g.eager.select(1, 4));
  EXPECT_NE(mmValuesWithinBound(g.self, g.weight, at::Tensor(), swapped, g.eager, DType::Float16), "");
  at::Tensor unwritten = g.eager.clone();
  unwritten.index_put_({5, 12}, NAN);
  const std::string why = mmValuesWithinBound(g.self, g.weight, at::Tensor(), unwritten, g.eager, DType::Float16);
  EXPECT_NE(why.find("1 element(s) outside the bound; first at [5, 12]"), std::string::npos) << why;
  at::Tensor off = g.eager.clone();
  off.index_put_({63, 0}, off.index({63, 0}).item<double>() + 0.05);  // ~50 float16 units at 1, far past the bound
  EXPECT_NE(mmValuesWithinBound(g.self, g.weight, at::Tensor(), off, g.eager, DType::Float16), "");
}

TEST(MmPadCheckTest, GivenAYieldPointThatSaysStopWhenCheckedThenInterrupted) {
  const Gemm g = draw(at::kHalf, 9);
  EXPECT_EQ(mmValuesWithinBound(g.self, g.weight, at::Tensor(), g.eager, g.eager, DType::Float16, [] { return false; }),
            "interrupted");
}

// A cached entry of either padded-GEMM family goes through the family's own check (ownCachedCheckOf), which refuses
// parameters outside the whitelist and unreadable ones before any GPU work: no device is needed to see it.
TEST(MmPadCheckTest, GivenACachedEntryWithParametersOutsideTheSpaceWhenCheckedThenRefusedBeforeAnyGpuWork) {
  for (const kernels::FamilyDescriptor* f : {&kernels::mmPadDescriptor(), &kernels::addmmPadDescriptor()}) {
    EXPECT_EQ(ownCachedCheckOf(*f), &checkCachedMmPad) << f->name;
    const VariantKey key = kernels::mmPadKeyOf({DType::Float16, 64, 1001, 256, f == &kernels::addmmPadDescriptor()}, 0);
    ASSERT_TRUE(f->servesKey(key)) << f->name;
    const std::string outside = checkCachedKernel(*f, key, R"({"threads":96,"vec":8})", "no cubin", TunerOptions{});
    EXPECT_NE(outside.find("not a point of " + std::string(f->name)), std::string::npos) << outside;
    const std::string unreadable = checkCachedKernel(*f, key, "{threads", "no cubin", TunerOptions{});
    EXPECT_NE(unreadable.find("unreadable"), std::string::npos) << unreadable;
  }
  // The row families keep the harness path (no own check).
  EXPECT_EQ(ownCachedCheckOf(*kernels::familyForOp("aten::_softmax")), nullptr);
}

}  // namespace
}  // namespace hotkernel
