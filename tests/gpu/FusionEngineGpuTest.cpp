// The fusion engine deferring HF's rotary embedding on CUDA (label `gpu`; skipped without a device): the
// engine's trampolines on the CUDA key learn the chain on a transposed projection, its strided kernel is
// compiled with NVRTC and loaded as the plan a cache entry would make (the test's own point, not a tuning),
// published as the engine publishes it, and
// the next call is deferred and fused (near eager) or, with an intermediate held, replayed (bitwise
// eager). A fake command gate stands in for the shim: the test fires the commands a process would issue.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "EngineFusion.h"
#include "hotkernel/chain/ChainCodegen.h"
#include "hotkernel/chain/ChainEntry.h"
#include "hotkernel/chain/ChainParameterSpace.h"
#include "hotkernel/chain/ChainPlan.h"
#include "hotkernel/interpose/CommandGate.h"
#include "hotkernel/interpose/FusionBypass.h"
#include "hotkernel/interpose/FusionEngine.h"
#include "hotkernel/hotkernel_shim.h"
#include "hotkernel/runtime/CudaDriver.h"
#include "hotkernel/runtime/Nvrtc.h"

using namespace hotkernel;
using namespace hotkernel::fusion;

namespace {

#define REQUIRE_CUDA()                                              \
  if (!at::cuda::is_available() || at::cuda::device_count() == 0) { \
    GTEST_SKIP() << "no CUDA device";                               \
  }

class FakeGate final : public CommandGate {
 public:
  bool covers() override { return true; }
  void setFlushHook(FlushHook h) override { hook = h; }
  void setPending(int count) override { pending = count; }
  void enterOwn() override { ++ownDepth; }
  void leaveOwn() override { --ownDepth; }

  FlushHook hook = nullptr;
  std::atomic<int> pending{0};
  static inline thread_local int ownDepth = 0;
};

FakeGate* gGate = nullptr;

FusionEngine& fusionEngine() {
  static FusionEngine* e = [] {
    auto gate = std::make_unique<FakeGate>();
    gGate = gate.get();
    FusionOptions options{3, true};
    options.evalBatchNorm = true;  // Note [Eval BatchNorm in a chain]: the batch norm test below
    options.inPlace = true;        // Note [In-place steps]: its bottleneck tail
    options.passConvolutions = true;  // Note [Ops a chain lets pass]: its downsampling tail
    FusionEngine* made = FusionEngine::installProcessEngine(std::move(gate), options);
    made->install(c10::DispatchKey::CUDA);
    return made;
  }();
  return *e;
}

// A CUDA command the engine did not issue (the shim's hook first).
void foreignCommand() {
  if (gGate->pending > 0 && gGate->ownDepth == 0 && gGate->hook) gGate->hook(HOTKERNEL_COMMAND_LAUNCH);
}

at::Tensor rotateHalf(const at::Tensor& x) {
  const int64_t half = x.size(-1) / 2;
  return at::cat({-x.slice(-1, half), x.slice(-1, 0, half)}, -1);
}

// HF's apply_rotary_pos_emb for one of q or k; Python evaluates x * cos first.
at::Tensor applyRotary(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  at::Tensor xCos = x * cos;
  at::Tensor rotSin = rotateHalf(x) * sin;
  return xCos + rotSin;
}

at::Tensor eager(const std::function<at::Tensor()>& fn) {
  fusionEngine().setEnabled(false);
  at::Tensor out = fn();
  fusionEngine().setEnabled(true);
  return out;
}

// HF's rotary on CUDA, learned (three windows, each ended by a command) and its strided variant's plan
// published as the engine publishes it.
struct PublishedRotary {
  at::Tensor x, cos, sin;
  std::string plan;  // the plan's description
};

// The plan of `h`'s variant at its space's first point (the test's own point, not a tuning), compiled with NVRTC and
// published as the engine publishes it; its description, or "" when none was made.
std::string publishFirstPoint(const HotChain& h) {
  if (!h.build.ok() || h.device != 0) return "";
  const chain::ChainVariant v = engine::chainVariantOf(h);
  const std::vector<chain::ChainKernelParams> space = chain::chainParameterSpace(v.ir, v.rows, v.cols, v.layout);
  if (space.empty()) return "";
  const chain::ChainKernelParams p = space.front();
  const std::string cubin = compileToCubin(chain::generateChainSource(v.ir, p, v.layout), "hk_chain.cu",
                                           queryDevice(0).nvrtcArch(), chain::chainCompileOptions())
                                .cubin;
  const chain::ChainPlan plan = chain::makeChainPlan(v, chain::chainEntryParams(v, p).dump(), cubin);
  fusionEngine().publish(ReadyChain{h.pattern, h.build, engine::makePlanKernel(plan), h.key});
  return plan.description;
}

PublishedRotary learnAndPublishRotary() {
  fusionEngine().resetForTest();
  at::manual_seed(5);
  const int64_t b = 1, h = 8, s = 256, d = 128;
  const auto opts = at::TensorOptions().device(at::kCUDA).dtype(at::kBFloat16);
  PublishedRotary r;
  at::Tensor projection;
  {
    FusionBypass bypass;  // the test's data, not the program's ops
    projection = at::randn({b, s, h * d}, opts);
    r.cos = at::randn({b, s, d}, opts).unsqueeze(1);
    r.sin = at::randn({b, s, d}, opts).unsqueeze(1);
  }
  r.x = projection.view({b, s, h, d}).transpose(1, 2);
  std::vector<HotChain> hot;
  fusionEngine().setHotCallback([&](const HotChain& c) { hot.push_back(c); });
  foreignCommand();
  for (int i = 0; i < 3; ++i) {
    at::Tensor out = applyRotary(r.x, r.cos, r.sin);
    foreignCommand();
  }
  fusionEngine().setHotCallback(nullptr);
  EXPECT_EQ(hot.size(), 1u) << fusionEngine().patternsJson();
  if (hot.size() != 1) return r;
  EXPECT_FALSE(engine::chainVariantOf(hot[0]).layout.contiguous());
  r.plan = publishFirstPoint(hot[0]);
  return r;
}

// Every chain `fn` makes hot (three windows, each ended by a command), its plan at its space's first point
// published; how many were.
size_t learnAndPublish(const std::function<at::Tensor()>& fn) {
  std::vector<HotChain> hot;
  fusionEngine().setHotCallback([&](const HotChain& c) { hot.push_back(c); });
  foreignCommand();
  for (int i = 0; i < 3; ++i) {
    at::Tensor out = fn();  // held across the command, as a model holds its activations
    foreignCommand();
  }
  fusionEngine().setHotCallback(nullptr);
  size_t published = 0;
  for (const HotChain& h : hot) published += publishFirstPoint(h).empty() ? 0 : 1;
  return published;
}

}  // namespace

TEST(FusionEngineGpuTest, GivenHfRotaryOnCudaWhenServedByItsStridedPlanThenItIsDeferredFusedNearEagerOrReplayedExactly) {
  REQUIRE_CUDA();
  const PublishedRotary r = learnAndPublishRotary();
  ASSERT_FALSE(r.plan.empty()) << "not learned, or no plan";
  const at::Tensor &x = r.x, &cos = r.cos, &sin = r.sin;

  // Fused: the five calls deferred, one launch at the next command.
  const at::Tensor want = eager([&] { return applyRotary(x, cos, sin); });
  const FusionStats before = fusionEngine().stats();
  at::Tensor got = applyRotary(x, cos, sin);
  EXPECT_EQ(fusionEngine().stats().deferredCalls, before.deferredCalls + 5);
  foreignCommand();
  EXPECT_EQ(fusionEngine().stats().fusedFlushes, before.fusedFlushes + 1) << "the plan refused the call: " << r.plan;
  EXPECT_EQ(got.strides(), want.strides());
  {
    FusionBypass bypass;
    const at::Tensor g = got.to(at::kFloat), w = want.to(at::kFloat);
    EXPECT_FALSE(g.isnan().any().item<bool>());
    // Note [Interpreter modes tolerance]: the fused rounding of a bf16 chain.
    EXPECT_LE(((g - w).abs() / (w.abs() + 1)).max().item<double>(), 1.0 / 16);
  }

  // Unfused: the rotated half held, so the kernel (which does not write it) is not used.
  auto held = [&] {
    at::Tensor xCos = x * cos;
    at::Tensor rotated = rotateHalf(x);
    at::Tensor out = xCos + rotated * sin;
    foreignCommand();
    return std::vector<at::Tensor>{rotated, out};
  };
  fusionEngine().setEnabled(false);
  const std::vector<at::Tensor> wantHeld = held();
  fusionEngine().setEnabled(true);
  const FusionStats beforeHeld = fusionEngine().stats();
  const std::vector<at::Tensor> gotHeld = held();
  EXPECT_EQ(fusionEngine().stats().deferredCalls, beforeHeld.deferredCalls + 5);
  EXPECT_EQ(fusionEngine().stats().unfusedFlushes, beforeHeld.unfusedFlushes + 1);
  EXPECT_EQ(fusionEngine().stats().failedFlushes, 0u);
  FusionBypass bypass;
  for (size_t i = 0; i < wantHeld.size(); ++i) EXPECT_TRUE(at::equal(gotHeld[i], wantHeld[i])) << i;
}

// Note [Idle streams] on CUDA: with the serving process's probe (cudaStreamQuery), rotary on a stream with
// nothing queued runs eagerly; behind a long matmul it defers and fuses as before.
TEST(FusionEngineGpuTest, GivenTheCudaStreamProbeWhenTheStreamIsIdleThenTheChainRunsEagerlyAndBehindWorkItDefers) {
  REQUIRE_CUDA();
  const PublishedRotary r = learnAndPublishRotary();
  ASSERT_FALSE(r.plan.empty()) << "not learned, or no plan";
  const at::Tensor want = eager([&] { return applyRotary(r.x, r.cos, r.sin); });
  fusionEngine().setStreamProbe(&engine::cudaStreamIdle);
  at::cuda::getCurrentCUDAStream().synchronize();
  const FusionStats idle = fusionEngine().stats();
  at::Tensor got = applyRotary(r.x, r.cos, r.sin);
  EXPECT_EQ(fusionEngine().stats().deferredCalls, idle.deferredCalls);
  EXPECT_GE(fusionEngine().stats().idleStarts, idle.idleStarts + 1);
  {
    FusionBypass bypass;
    EXPECT_TRUE(at::equal(got, want)) << "eager's own kernels";
  }
  foreignCommand();
  at::Tensor big;
  {
    FusionBypass bypass;  // the queued work is not the program's
    big = at::randn({8192, 8192}, at::TensorOptions().device(at::kCUDA).dtype(at::kBFloat16));
    at::cuda::getCurrentCUDAStream().synchronize();
    for (int i = 0; i < 4; ++i) big = at::mm(big, big).div_(64);  // milliseconds queued
  }
  const FusionStats busy = fusionEngine().stats();
  got = applyRotary(r.x, r.cos, r.sin);
  EXPECT_EQ(fusionEngine().stats().deferredCalls, busy.deferredCalls + 5);
  EXPECT_EQ(fusionEngine().stats().idleStarts, busy.idleStarts);
  foreignCommand();
  EXPECT_EQ(fusionEngine().stats().fusedFlushes, busy.fusedFlushes + 1) << r.plan;
  fusionEngine().setStreamProbe(nullptr);
  FusionBypass bypass;
  const at::Tensor g = got.to(at::kFloat), w = want.to(at::kFloat);
  EXPECT_LE(((g - w).abs() / (w.abs() + 1)).max().item<double>(), 1.0 / 16);
}

// The builder on the CUDA calls' own metadata (Note [Eval BatchNorm in a chain]: CUDA's eval native_batch_norm
// returns [C] statistics where the CPU's are empty; Note [Lone normalizations]): an eval BatchNorm2d + ReLU and a
// lone GroupNorm learned on the CUDA key, each published at its first point, deferred and fused near eager.
// Note [In-place steps]: torchvision's Bottleneck tail (bn3, out += identity, ReLU(inplace=True)) fuses into the
// tensor the caller holds. In bfloat16 ATen runs eval batch norms with its own kernel (native_batch_norm); in float32
// they are cuDNN's (cudnn_batch_norm), a step like the other, fused within the float32 batch norm bound of cuDNN's
// result rather than bitwise (Note [cuDNN's batch norm in a chain]).
TEST(FusionEngineGpuTest, GivenEvalBatchNormBlocksALoneGroupNormAndInPlaceTailsOnCudaWhenLearnedThenEachIsFused) {
  REQUIRE_CUDA();
  for (const at::ScalarType dtype : {at::kBFloat16, at::kFloat}) {
    SCOPED_TRACE(c10::toString(dtype));
    at::manual_seed(11);
    const auto opts = at::TensorOptions().device(at::kCUDA).dtype(dtype);
    at::Tensor x, w, b, mean, var, identity, blockIn, wds, w2, b2, mean2, var2;
    {
      FusionBypass bypass;  // the test's data, not the program's ops
      x = at::randn({8, 64, 14, 14}, opts) * 2;
      identity = at::randn({8, 64, 14, 14}, opts);
      w = at::rand({64}, opts) + 0.5;
      b = at::randn({64}, opts) * 0.1;
      mean = at::randn({64}, opts) * 0.1;
      var = at::rand({64}, opts) + 0.5;
      blockIn = at::randn({8, 32, 28, 28}, opts);
      wds = at::randn({64, 32, 1, 1}, opts) * 0.2;
      w2 = at::rand({64}, opts) + 0.5;
      b2 = at::randn({64}, opts) * 0.1;
      mean2 = at::randn({64}, opts) * 0.1;
      var2 = at::rand({64}, opts) + 0.5;
    }
    const std::vector<std::pair<std::string, std::function<at::Tensor()>>> blocks = {
        {"batch norm + relu", [&] { return at::relu(at::batch_norm(x, w, b, mean, var, false, 0.1, 1e-5, true)); }},
        {"lone group norm", [&] { return at::group_norm(x, 32, w, b, 1e-5); }},
        {"bottleneck tail in place", [&] {
           at::Tensor out = at::batch_norm(x, w, b, mean, var, false, 0.1, 1e-5, true);
           out.add_(identity);
           return out.relu_();
         }},
        // Note [Ops a chain lets pass]: the shortcut's convolution (cuDNN's) runs while bn3 stays pending.
        {"downsampling tail", [&] {
           at::Tensor out = at::batch_norm(x, w, b, mean, var, false, 0.1, 1e-5, true);
           at::Tensor shortcut = at::conv2d(blockIn, wds, {}, {2, 2});
           shortcut = at::batch_norm(shortcut, w2, b2, mean2, var2, false, 0.1, 1e-5, true);
           out.add_(shortcut);
           return at::relu(out);
         }}};
    for (const auto& [name, block] : blocks) {
      SCOPED_TRACE(name);
      fusionEngine().resetForTest();
      ASSERT_EQ(learnAndPublish(block), 1u) << fusionEngine().patternsJson();
      const at::Tensor want = eager(block);
      const FusionStats before = fusionEngine().stats();
      at::Tensor got = block();
      EXPECT_GT(fusionEngine().stats().deferredCalls, before.deferredCalls);
      EXPECT_EQ(fusionEngine().stats().passedCalls, before.passedCalls + (name == "downsampling tail" ? 1 : 0));
      foreignCommand();
      EXPECT_EQ(fusionEngine().stats().fusedFlushes, before.fusedFlushes + 1) << fusionEngine().stats().lastUnfused;
      FusionBypass bypass;
      const at::Tensor g = got.to(at::kFloat), e = want.to(at::kFloat);
      EXPECT_FALSE(g.isnan().any().item<bool>());
      EXPECT_LE(((g - e).abs() / (e.abs() + 1)).max().item<double>(), dtype == at::kFloat ? 1e-4 : 1.0 / 16);
    }
  }
}
