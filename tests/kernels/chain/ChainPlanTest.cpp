// Tests of a chain plan's launch guard and of the entries a plan is refused
// for before any module loads (ChainPlan.h): no GPU needed, the plan's
// kernel is never launched.

#include "hotkernel/chain/ChainPlan.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "hotkernel/chain/ChainEntry.h"
#include "hotkernel/chain/ChainJson.h"
#include "hotkernel/chain/NamedChains.h"
#include "hotkernel/runtime/Check.h"

namespace hotkernel::chain {
namespace {

// A plan of rms_norm bf16 [64, 4096] at vec 8 without a loaded module: enough for its guard.
ChainPlan rmsPlan() {
  ChainPlan plan;
  plan.variant = ChainVariant{rmsNormChain(DType::BFloat16, 1e-6), 64, 4096, 0};
  plan.params = ChainKernelParams{256, 8, 1, 0};
  plan.layout = chainKernelLayout(plan.variant.ir, plan.params);
  return plan;
}

void* at(std::vector<char>& buffer, size_t offset) { return buffer.data() + offset; }

// 64-byte aligned offsets inside one host buffer: x [64, 4096] bf16, weight [4096] bf16, out [64, 4096] bf16.
struct Buffers {
  std::vector<char> bytes = std::vector<char>(3 * 64 * 4096 * 2 + 1024);
  size_t base = (64 - reinterpret_cast<uintptr_t>(bytes.data()) % 64) % 64;
  const void* x() { return at(bytes, base); }
  const void* weight() { return at(bytes, base + 64 * 4096 * 2); }
  void* out() { return at(bytes, base + 64 * 4096 * 2 + 4096 * 2 + 64); }
};

TEST(ChainPlanTest, GivenAFittingCallWhenCheckedThenItIsAccepted) {
  const ChainPlan plan = rmsPlan();
  Buffers b;
  EXPECT_EQ(chainLaunchRefusal(plan, {{b.x(), 0}, {b.weight(), 0}}, {b.out()}), "");
}

TEST(ChainPlanTest, GivenAVariantWhenItsSpansAreMadeThenEachTensorParameterSpansItsBytesAndTheRestNone) {
  const ChainPlan plan = rmsPlan();
  const std::vector<uint64_t> spans = chainSpanBytes(plan.variant, plan.layout);
  ASSERT_EQ(spans.size(), plan.layout.size());
  std::vector<uint64_t> tensors;
  for (size_t k = 0; k < spans.size(); ++k) {
    const ChainArg::Kind kind = plan.layout[k].kind;
    if (kind == ChainArg::Kind::Input || kind == ChainArg::Kind::Output) {
      tensors.push_back(spans[k]);
    } else {
      EXPECT_EQ(spans[k], 0u) << "parameter " << k;
    }
  }
  // x [64, 4096], weight [4096], out [64, 4096], bf16.
  EXPECT_EQ(tensors, (std::vector<uint64_t>{64 * 4096 * 2, 4096 * 2, 64 * 4096 * 2}));
}

TEST(ChainPlanTest, GivenCallsThatDoNotFitWhenCheckedThenEachIsRefusedWithItsReason) {
  // A plan with its spans made (as makeChainPlan makes it) and one without (computed at the check): the same reasons.
  ChainPlan withSpans = rmsPlan();
  withSpans.spanBytes = chainSpanBytes(withSpans.variant, withSpans.layout);
  for (const ChainPlan& plan : {rmsPlan(), withSpans}) {
    SCOPED_TRACE(plan.spanBytes.empty() ? "spans computed at the check" : "spans made with the plan");
    Buffers b;
    const char* x = static_cast<const char*>(b.x());
    auto refusal = [&](std::vector<ChainInputValue> in, std::vector<void*> out) {
      return chainLaunchRefusal(plan, in, out);
    };
    EXPECT_EQ(refusal({{b.x(), 0}}, {b.out()}), "too few inputs");
    EXPECT_NE(refusal({{b.x(), 0}, {b.weight(), 0}, {b.x(), 0}}, {b.out()}).find("takes 2 inputs and 1 outputs"),
              std::string::npos);
    EXPECT_EQ(refusal({{b.x(), 0}, {b.weight(), 0}}, {}), "too few outputs");
    EXPECT_EQ(refusal({{nullptr, 0}, {b.weight(), 0}}, {b.out()}), "input 0 is null");
    EXPECT_EQ(refusal({{b.x(), 0}, {b.weight(), 0}}, {nullptr}), "output 0 is null");
    // One bf16 element off: vec 8 loads need 16 bytes.
    EXPECT_EQ(refusal({{x + 2, 0}, {b.weight(), 0}}, {b.out()}), "input 0 is not aligned to 16 bytes");
    EXPECT_EQ(refusal({{b.x(), 0}, {b.weight(), 0}}, {static_cast<char*>(b.out()) + 2}),
              "output 0 is not aligned to 16 bytes");
    // The output over the input (in place), or over its tail.
    EXPECT_EQ(refusal({{b.x(), 0}, {b.weight(), 0}}, {const_cast<char*>(x)}), "output 0 overlaps input 0");
    EXPECT_EQ(refusal({{b.x(), 0}, {b.weight(), 0}}, {const_cast<char*>(x) + 64 * 4096 * 2 - 16}),
              "output 0 overlaps input 0");
    // Just past the weight's end: no overlap.
    EXPECT_EQ(refusal({{b.x(), 0}, {b.weight(), 0}}, {const_cast<char*>(x) + 64 * 4096 * 2 + 4096 * 2}), "");
  }
}

TEST(ChainPlanTest, GivenTwoOutputsWhenTheyOverlapThenRefused) {
  ChainPlan plan;
  plan.variant = ChainVariant{residualAddCastChain(DType::BFloat16, DType::Float32), 8, 64, 0};
  plan.params = ChainKernelParams{128, 8, 1, 0};
  plan.layout = chainKernelLayout(plan.variant.ir, plan.params);
  std::vector<char> bytes(8 * 64 * 4 * 6 + 256);
  char* base = bytes.data() + (256 - reinterpret_cast<uintptr_t>(bytes.data()) % 256) % 256;
  const void* r = base;
  const void* h = base + 1024;
  void* sum = base + 2048;
  void* cast = base + 4096;
  EXPECT_EQ(chainLaunchRefusal(plan, {{r, 0}, {h, 0}}, {sum, cast}), "");
  EXPECT_EQ(chainLaunchRefusal(plan, {{r, 0}, {h, 0}}, {sum, base + 2048 + 512}), "output 0 overlaps output 1");
  // A plan without a loaded kernel launches nothing, and says why.
  EXPECT_FALSE(launchChainPlan(plan, {{r, 0}, {h, 0}}, {sum, cast}, nullptr));
  std::string why;
  EXPECT_FALSE(launchChainPlan(plan, {{r, 0}, {h, 0}}, {sum, cast}, nullptr, &why));
  EXPECT_EQ(why, "the plan has no kernel loaded");
}

// Note [Repeated columns]: a group norm's weight and bias are read one element at a time, so a per-channel view one
// element off the vector alignment fits; x and the output keep the vector's.
TEST(ChainPlanTest, GivenARepeatedInputWhenItIsOneElementOffTheVectorThenTheGuardAcceptsItAndNotSoForX) {
  const GroupNormShape shape{1, 64, 16, 8};  // rows 8, cols 128
  ChainPlan plan;
  plan.variant = ChainVariant{groupNormActChain(DType::Float16, 1e-5, OpKind::Silu), groupNormRows(shape),
                              groupNormCols(shape), 0, groupNormActLayout(shape)};
  plan.params = ChainKernelParams{128, 8, 1, 0};
  plan.layout = chainKernelLayout(plan.variant.ir, plan.params, plan.variant.layout);
  std::vector<size_t> alignments;
  for (const ChainArg& a : plan.layout) {
    if (a.kind == ChainArg::Kind::Input || a.kind == ChainArg::Kind::Output) alignments.push_back(a.alignmentBytes);
  }
  EXPECT_EQ(alignments, (std::vector<size_t>{16, 2, 2, 16}));  // x, weight, bias, out
  std::vector<char> bytes(8192);
  char* base = bytes.data() + (64 - reinterpret_cast<uintptr_t>(bytes.data()) % 64) % 64;
  const void* x = base;                // 1 * 64 * 16 halves: 2048 bytes
  const void* weight = base + 2048 + 2;  // [64] halves, one element off 16 bytes
  const void* bias = base + 2304 + 2;
  void* out = base + 4096;
  EXPECT_EQ(chainLaunchRefusal(plan, {{x, 0}, {weight, 0}, {bias, 0}}, {out}), "");
  EXPECT_EQ(chainLaunchRefusal(plan, {{base + 2, 0}, {weight, 0}, {bias, 0}}, {out}),
            "input 0 is not aligned to 16 bytes");
  EXPECT_EQ(chainLaunchRefusal(plan, {{x, 0}, {base + 2048 + 1, 0}, {bias, 0}}, {out}),
            "input 1 is not aligned to 2 bytes");
  // Without the variant's layout every Full input needs the vector's alignment.
  plan.layout = chainKernelLayout(plan.variant.ir, plan.params);
  EXPECT_EQ(chainLaunchRefusal(plan, {{x, 0}, {weight, 0}, {bias, 0}}, {out}), "input 1 is not aligned to 16 bytes");
}

TEST(ChainPlanTest, GivenARefusedEntryWhenAPlanIsMadeThenItFailsBeforeAnyModuleLoads) {
  const ChainVariant v{rmsNormChain(DType::BFloat16, 1e-6), 64, 4096, 0};
  // Another chain's JSON under this variant's key, and a keep_aten entry: refused with their reason.
  nlohmann::json tampered = chainEntryParams(v, ChainKernelParams{256, 8, 1, 0});
  tampered["chain"] = chainToJson(swigluChain(DType::BFloat16));
  try {
    makeChainPlan(v, tampered.dump(), "not a cubin");
    ADD_FAILURE() << "a tampered entry made a plan";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("chainSha256 is not the key"), std::string::npos) << e.what();
  }
  try {
    makeChainPlan(v, chainEntryParams(v, std::nullopt).dump(), "");
    ADD_FAILURE() << "a keep_aten entry made a plan";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("keep_aten"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace hotkernel::chain
