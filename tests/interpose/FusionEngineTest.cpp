// The chain-fusion engine on the CPU key: learning, deferral, flushes and
// liveness, with a fake command gate (the test fires the "foreign commands"
// a GPU process's shim would see) and fused kernels run by the chain
// interpreter (Note [Two evaluation modes]).
#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <ATen/record_function.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "DeferrableOps.h"
#include "HigherKeyCall.h"
#include "../ChainLaidOutRows.h"
#include "hotkernel/interpose/CommandGate.h"
#include "hotkernel/chain/ChainBuilder.h"
#include "hotkernel/chain/ChainInterpreter.h"
#include "hotkernel/chain/ChainLayout.h"
#include "hotkernel/interpose/FusionEngine.h"
#include "hotkernel/runtime/DeferredCalls.h"
#include "hotkernel/hotkernel_shim.h"

using namespace hotkernel;
using namespace hotkernel::fusion;

namespace {

class FakeGate final : public CommandGate {
 public:
  bool covers() override { return covered; }
  void setFlushHook(FlushHook h) override { hook = h; }
  void setPending(int count) override { pending = count; }
  void enterOwn() override { ++ownDepth; }
  void leaveOwn() override { --ownDepth; }

  bool covered = true;
  FlushHook hook = nullptr;
  std::atomic<int> pending{0};
  static inline thread_local int ownDepth = 0;  // per thread, as the shim's guard
};

FakeGate* gGate = nullptr;

// A command the engine did not issue: what the shim does before forwarding it.
void foreignCommand(int kind = HOTKERNEL_COMMAND_LAUNCH) {
  if (gGate->pending > 0 && gGate->ownDepth == 0 && gGate->hook) gGate->hook(kind);
}

// The fused kernel of a chain, run by the interpreter in Fused mode on CPU tensors.
class InterpreterKernel final : public FusedChainKernel {
 public:
  explicit InterpreterKernel(chain::ChainBuild build) : build_(std::move(build)) {}
  bool launch(const std::vector<at::Tensor>& inputs, const std::vector<at::Tensor>& outputs,
              c10::Stream) noexcept override {
    inside.store(true);
    if (const int ms = delayMs.load(); ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    try {
      // A full input is read as a kernel reads it: its memory from its data pointer, over the span its
      // layout reaches (Note [Chain layouts]); the other classes are their values.
      std::vector<std::vector<float>> in;
      const std::vector<int> nodes = build_.chain.inputs();
      size_t tensorArg = 0;
      for (size_t k = 0; k < inputs.size(); ++k) {
        const chain::Node& n = build_.chain.node(nodes[k]);
        at::Tensor f;
        if (n.shape == chain::ShapeClass::Full) {
          const int64_t span = chain::layoutSpan(build_.chain, build_.layout, tensorArg, build_.rows, build_.cols);
          f = at::from_blob(inputs[k].data_ptr(), {span}, inputs[k].options()).to(at::kFloat);
        } else {
          f = inputs[k].to(at::kFloat).contiguous();
        }
        if (n.shape != chain::ShapeClass::Scalar) ++tensorArg;
        in.emplace_back(f.data_ptr<float>(), f.data_ptr<float>() + f.numel());
      }
      auto out = chain::interpretChain(build_.chain, build_.rows, build_.cols, build_.layout, in,
                                       chain::EvalMode::Fused);
      for (size_t i = 0; i < outputs.size(); ++i) {
        at::Tensor f = at::from_blob(out[i].data(), {static_cast<int64_t>(out[i].size())}, at::kFloat);
        const chain::Node& n = build_.chain.node(build_.chain.outputs()[i]);
        if (n.shape != chain::ShapeClass::Full || build_.layout.contiguous()) {
          outputs[i].copy_(f.view(outputs[i].sizes()));
          continue;
        }
        // As a kernel writes it (the layout's row order need not be the tensor's: Note [Transposed layouts]).
        const size_t arg = tensorArg + i;
        const at::Tensor memory =
            at::from_blob(outputs[i].data_ptr(),
                          {chain::layoutSpan(build_.chain, build_.layout, arg, build_.rows, build_.cols)},
                          outputs[i].options());
        chain::testutil::writeLaidOutRows(build_.chain, build_.layout, arg, build_.rows, build_.cols,
                                          chain::extentOf(n, build_.cols), out[i], memory);
      }
      ++launches;
      finished.fetch_add(1);
      return true;
    } catch (...) {
      return false;
    }
  }
  std::string describe() const override { return "interpreter"; }
  const chain::ChainBuild& build() const { return build_; }
  int launches = 0;
  std::atomic<int> delayMs{0};      // a slow launch: the flush holds the engine's lock that long
  std::atomic<bool> inside{false};  // a launch has begun
  std::atomic<int> finished{0};     // launches that wrote their outputs

 private:
  chain::ChainBuild build_;
};

FusionEngine& engine() {
  static FusionEngine* e = [] {
    auto gate = std::make_unique<FakeGate>();
    gGate = gate.get();
    FusionOptions options{3, true};
    options.evalBatchNorm = true;  // Note [Eval BatchNorm in a chain]
    options.inPlace = true;        // Note [In-place steps]
    options.passConvolutions = true;  // Note [Ops a chain lets pass]: the downsampling tail
    FusionEngine* made = FusionEngine::installProcessEngine(std::move(gate), options);
    made->install(c10::DispatchKey::CPU);
    return made;
  }();
  return *e;
}

// LlamaRMSNorm as HF writes it; only the result outlives the call.
at::Tensor rmsNorm(const at::Tensor& x, const at::Tensor& w) {
  at::Tensor h = x.to(at::kFloat);
  at::Tensor variance = h.pow(2).mean({-1}, /*keepdim=*/true);
  h = h * at::rsqrt(variance + 1e-6);
  return w * h.to(x.scalar_type());
}

at::Tensor swiglu(const at::Tensor& g, const at::Tensor& u) { return at::silu(g) * u; }

// HF's rotate_half and apply_rotary_pos_emb for one of q or k, as modeling_llama writes them: the halves
// are views (slices reach no trampoline), Python evaluates x * cos first.
at::Tensor rotateHalf(const at::Tensor& x) {
  const int64_t half = x.size(-1) / 2;
  at::Tensor x1 = x.slice(-1, 0, half), x2 = x.slice(-1, half);
  return at::cat({-x2, x1}, -1);
}

at::Tensor applyRotary(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  at::Tensor xCos = x * cos;
  at::Tensor rotSin = rotateHalf(x) * sin;
  return xCos + rotSin;
}

// q as attention makes it: the projection [b, s, h * d] viewed [b, s, h, d] and transposed to [b, h, s, d]
// (strides (s*h*d, d, h*d, 1)); cos and sin [b, s, d] unsqueezed to [b, 1, s, d] (broadcast over the heads).
struct RotaryInputs {
  at::Tensor projection, x, cos, sin;
};

RotaryInputs rotaryInputs(int64_t b, int64_t h, int64_t s, int64_t d, at::ScalarType dtype) {
  RotaryInputs r;
  r.projection = at::randn({b, s, h * d}).to(dtype);
  r.x = r.projection.view({b, s, h, d}).transpose(1, 2);
  r.cos = at::randn({b, s, d}).to(dtype).unsqueeze(1);
  r.sin = at::randn({b, s, d}).to(dtype).unsqueeze(1);
  return r;
}

bool same(const at::Tensor& a, const at::Tensor& b) {
  FusionBypass bypass;
  return at::equal(a, b);
}

at::Tensor eager(const std::function<at::Tensor()>& fn) {
  engine().setEnabled(false);
  at::Tensor out = fn();
  engine().setEnabled(true);
  return out;
}

double worstRelative(const at::Tensor& got, const at::Tensor& want) {
  FusionBypass bypass;  // the comparison's own ops are not the program's
  at::Tensor a = got.to(at::kDouble), b = want.to(at::kDouble);
  return ((a - b).abs() / (b.abs() + 1)).max().item<double>();
}

// Learns `fn` (hotCalls windows, each ended by a foreign command) and
// publishes every chain reported hot with an interpreter kernel.
std::vector<std::shared_ptr<InterpreterKernel>> learnAndPublish(const std::function<at::Tensor()>& fn) {
  std::vector<HotChain> hot;
  engine().setHotCallback([&](const HotChain& h) { hot.push_back(h); });
  foreignCommand();  // the caller's set-up ends here
  for (int i = 0; i < 3; ++i) {
    at::Tensor result = fn();  // held across the command, as a model holds its activations
    foreignCommand();
  }
  engine().setHotCallback(nullptr);
  std::vector<std::shared_ptr<InterpreterKernel>> kernels;
  for (const HotChain& h : hot) {
    auto k = std::make_shared<InterpreterKernel>(h.build);
    kernels.push_back(k);
    engine().publish(ReadyChain{h.pattern, h.build, k, h.key});
  }
  return kernels;
}

// The chains `program` makes hot: run hotCalls times, each run ended by a foreign command (the values it
// returns held across it, as a model holds its activations).
template <typename Program>
std::vector<HotChain> learnHot(Program program) {
  std::vector<HotChain> hot;
  engine().setHotCallback([&](const HotChain& h) { hot.push_back(h); });
  foreignCommand();  // the caller's set-up ends here
  for (int i = 0; i < 3; ++i) {
    auto held = program();
    foreignCommand();
  }
  engine().setHotCallback(nullptr);
  return hot;
}

class FusionEngineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    engine().resetForTest();
    gGate->covered = true;
    at::manual_seed(7);
  }
};

}  // namespace

TEST_F(FusionEngineTest, GivenAnRmsNormCalledThriceWhenEachEndsAtACommandThenItIsReportedHotAsOneEightCallChain) {
  at::Tensor x = at::randn({64, 256}).to(at::kBFloat16), w = at::randn({256}).to(at::kBFloat16);
  std::vector<HotChain> hot;
  engine().setHotCallback([&](const HotChain& h) { hot.push_back(h); });
  foreignCommand();
  for (int i = 0; i < 3; ++i) {
    at::Tensor out = rmsNorm(x, w);
    foreignCommand();
  }
  engine().setHotCallback(nullptr);
  ASSERT_EQ(hot.size(), 1u) << engine().patternsJson();
  EXPECT_TRUE(hot[0].build.ok()) << hot[0].build.reason;
  EXPECT_GE(hot[0].pattern.calls.size(), 8u);
  EXPECT_EQ(hot[0].pattern.live.size(), 1u);  // only the result was still referenced
  EXPECT_EQ(hot[0].build.outputValues.size(), 1u);
  EXPECT_EQ(engine().stats().windows, 4u);  // the set-up's window, then the three calls'
  EXPECT_EQ(gGate->pending, 0);
}

TEST_F(FusionEngineTest, GivenAPublishedChainWhenItRunsAgainThenItIsDeferredAndRunsFusedAtTheNextCommand) {
  at::Tensor x = at::randn({64, 256}).to(at::kBFloat16), w = at::randn({256}).to(at::kBFloat16);
  auto kernels = learnAndPublish([&] { return rmsNorm(x, w); });
  ASSERT_EQ(kernels.size(), 1u);
  const at::Tensor want = eager([&] { return rmsNorm(x, w); });
  const uint64_t threadDeferred = deferredCallsOnThisThread();
  const uint64_t engineDeferred = engine().stats().deferredCalls;
  at::Tensor got = rmsNorm(x, w);
  EXPECT_GE(engine().stats().deferredCalls, 8u);
  // Note [Deferred calls in the recorder]: each deferral is counted on the calling thread too.
  EXPECT_EQ(deferredCallsOnThisThread() - threadDeferred, engine().stats().deferredCalls - engineDeferred);
  EXPECT_EQ(kernels[0]->launches, 0);  // not computed yet
  EXPECT_EQ(gGate->pending, 1);
  foreignCommand();
  EXPECT_EQ(kernels[0]->launches, 1);
  EXPECT_EQ(engine().stats().fusedFlushes, 1u);
  EXPECT_EQ(gGate->pending, 0);
  EXPECT_LE(worstRelative(got, want), 1.0 / 64);  // the fused rounding: within a bf16 unit or so
}

// Note [LayerNorm in a chain]: GPT-2's `hidden = attn_output + residual; residual = hidden; ln_2(hidden)`.
// The sum is held (the block adds it again after its MLP) and written by the fused kernel; the norm's mean and
// rstd, dropped by F.layer_norm, are not.
TEST_F(FusionEngineTest, GivenAResidualAddAndALayerNormWhenPublishedThenTheyAreDeferredAndFusedWithinTheChainTolerance) {
  for (at::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
    engine().resetForTest();
    gGate->covered = true;
    at::Tensor a = at::randn({4, 16, 96}).to(dtype), r = at::randn({4, 16, 96}).to(dtype);
    at::Tensor w = at::randn({96}).to(dtype), b = at::randn({96}).to(dtype);
    at::Tensor residual;
    auto block = [&] {
      residual = a + r;
      return at::layer_norm(residual, {96}, w, b, 1e-5);
    };
    auto kernels = learnAndPublish(block);
    ASSERT_EQ(kernels.size(), 1u) << engine().patternsJson();
    const at::Tensor want = eager(block);
    const at::Tensor wantResidual = residual;
    const uint64_t deferred = engine().stats().deferredCalls;
    const at::Tensor got = block();
    EXPECT_EQ(engine().stats().deferredCalls, deferred + 2) << toString(dtype);
    EXPECT_EQ(kernels[0]->launches, 0);
    foreignCommand();
    EXPECT_EQ(kernels[0]->launches, 1) << toString(dtype) << " " << engine().stats().lastUnfused;
    EXPECT_TRUE(same(residual, wantResidual)) << "the sum is the add's own rounding";
    EXPECT_LE(worstRelative(got, want), dtype == at::kFloat ? 1e-5 : 1.0 / 64) << toString(dtype);
  }
}

// The stats kept by the caller (native_layer_norm called directly): every result is written, by the kernel or
// by the replay, and each is within the tolerance of eager's.
TEST_F(FusionEngineTest, GivenALayerNormWhoseMeanAndRstdAreKeptWhenTheChainRunsThenAllThreeResultsAreEagers) {
  at::Tensor a = at::randn({8, 64}), r = at::randn({8, 64}), w = at::randn({64});
  auto block = [&] { return at::native_layer_norm(a + r, {64}, w, std::nullopt, 1e-5); };
  auto kernels = learnAndPublish([&] { return std::get<0>(block()); });
  ASSERT_EQ(kernels.size(), 1u) << engine().patternsJson();
  engine().setEnabled(false);
  const auto want = block();
  engine().setEnabled(true);
  const uint64_t unfused = engine().stats().unfusedFlushes;
  const auto got = block();
  foreignCommand();
  // The kernel learned writes the norm alone (the stats were dropped then): the held stats make the chain replay,
  // through native_layer_norm.out with all three results.
  EXPECT_EQ(engine().stats().unfusedFlushes, unfused + 1);
  EXPECT_EQ(kernels[0]->launches, 0);
  EXPECT_LE(worstRelative(std::get<0>(got), std::get<0>(want)), 1e-5);
  EXPECT_LE(worstRelative(std::get<1>(got), std::get<1>(want)), 1e-5);
  EXPECT_LE(worstRelative(std::get<2>(got), std::get<2>(want)), 1e-5);
}

// Note [The group view]: diffusers' `self.nonlinearity(self.norm1(hidden))` (GroupNorm(32) then SiLU) and BiT's
// GroupNorm then ReLU: learned over the group view (the weight and bias repeated over each channel's HxW),
// deferred and fused, the norm's result, mean and rstd (dropped by F.group_norm) never written.
TEST_F(FusionEngineTest, GivenAGroupNormAndItsActivationWhenPublishedThenTheyAreDeferredAndFusedOverTheGroupView) {
  for (at::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
    for (bool silu : {true, false}) {
      engine().resetForTest();
      gGate->covered = true;
      at::Tensor x = at::randn({2, 64, 6, 5}).to(dtype) * 2 + 1;
      at::Tensor w = at::randn({64}).to(dtype), b = at::randn({64}).to(dtype);
      auto block = [&] {
        const at::Tensor h = at::group_norm(x, 32, w, b, 1e-5);
        return silu ? at::silu(h) : at::relu(h);
      };
      auto kernels = learnAndPublish(block);
      ASSERT_EQ(kernels.size(), 1u) << engine().patternsJson();
      EXPECT_EQ(kernels[0]->build().layout.colRepeats, (std::vector<int64_t>{1, 30, 30, 1}))
          << chain::layoutText(kernels[0]->build().layout);
      const at::Tensor want = eager(block);
      const uint64_t deferred = engine().stats().deferredCalls;
      const at::Tensor got = block();
      EXPECT_EQ(engine().stats().deferredCalls, deferred + 2) << toString(dtype);
      EXPECT_EQ(kernels[0]->launches, 0);
      foreignCommand();
      EXPECT_EQ(kernels[0]->launches, 1) << toString(dtype) << " " << engine().stats().lastUnfused;
      EXPECT_EQ(got.sizes(), want.sizes());
      EXPECT_LE(worstRelative(got, want), dtype == at::kFloat ? 1e-5 : 1.0 / 32) << toString(dtype) << " " << silu;
    }
  }
}

// native_group_norm called directly, its mean and rstd kept: the kernel learned from F.group_norm writes the norm's
// activation alone, so the held statistics make the chain replay through native_group_norm.out with all three
// results, each eager's.
TEST_F(FusionEngineTest, GivenAGroupNormWhoseMeanAndRstdAreKeptWhenTheChainRunsThenItReplaysAllThreeResults) {
  at::Tensor x = at::randn({2, 8, 3, 4}), w = at::randn({8}), b = at::randn({8});
  auto learned = [&] { return at::silu(at::group_norm(x, 4, w, b, 1e-5)); };
  auto kernels = learnAndPublish(learned);
  ASSERT_EQ(kernels.size(), 1u) << engine().patternsJson();
  auto block = [&] {
    auto r = at::native_group_norm(x, w, b, 2, 8, 12, 4, 1e-5);
    return std::make_tuple(at::silu(std::get<0>(r)), std::get<1>(r), std::get<2>(r));
  };
  engine().setEnabled(false);
  const auto want = block();
  engine().setEnabled(true);
  const uint64_t unfused = engine().stats().unfusedFlushes;
  const auto got = block();
  foreignCommand();
  EXPECT_EQ(engine().stats().unfusedFlushes, unfused + 1);
  EXPECT_EQ(kernels[0]->launches, 0);
  EXPECT_TRUE(same(std::get<0>(got), std::get<0>(want))) << "replayed: eager's bits";
  EXPECT_TRUE(same(std::get<1>(got), std::get<1>(want)));
  EXPECT_TRUE(same(std::get<2>(got), std::get<2>(want)));
}

// Note [Eval BatchNorm in a chain]: HF's ResNet's BatchNorm2d (eval) + ReLU learned over the view of one channel a
// row, deferred and fused; a training-mode call of the same norm is not deferred (its flag differs from the learned
// step's) and updates the running statistics as eager does.
TEST_F(FusionEngineTest, GivenAnEvalBatchNormAndReluWhenPublishedThenTheyAreDeferredAndFusedButATrainingCallIsNot) {
  for (at::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
    engine().resetForTest();
    gGate->covered = true;
    at::Tensor x = at::randn({2, 8, 5, 4}).to(dtype) * 2, w = at::randn({8}).to(dtype), b = at::randn({8}).to(dtype);
    at::Tensor mean = at::randn({8}).to(dtype), var = (at::rand({8}) + 0.5).to(dtype);
    auto block = [&] { return at::relu(at::batch_norm(x, w, b, mean, var, false, 0.1, 1e-5, true)); };
    auto kernels = learnAndPublish(block);
    ASSERT_EQ(kernels.size(), 1u) << engine().patternsJson();
    EXPECT_FALSE(kernels[0]->build().chain.hasReductions());
    const at::Tensor want = eager(block);
    const uint64_t deferred = engine().stats().deferredCalls;
    const at::Tensor got = block();
    EXPECT_EQ(engine().stats().deferredCalls, deferred + 2) << toString(dtype);
    foreignCommand();
    EXPECT_EQ(kernels[0]->launches, 1) << toString(dtype) << " " << engine().stats().lastUnfused;
    EXPECT_LE(worstRelative(got, want), dtype == at::kFloat ? 1e-5 : 1.0 / 32) << toString(dtype);
    // Training: batch statistics, running ones updated in place; eager's values, run at once.
    at::Tensor trainMean = mean.clone(), trainVar = var.clone();
    engine().setEnabled(false);
    const at::Tensor wantTrain = at::relu(at::batch_norm(x, w, b, trainMean, trainVar, true, 0.1, 1e-5, true));
    const at::Tensor wantMean = trainMean.clone();
    engine().setEnabled(true);
    trainMean.copy_(mean);
    trainVar.copy_(var);
    const uint64_t before = engine().stats().deferredCalls;
    const at::Tensor gotTrain = at::batch_norm(x, w, b, trainMean, trainVar, true, 0.1, 1e-5, true);
    EXPECT_EQ(engine().stats().deferredCalls, before) << "a training batch norm is never deferred";
    EXPECT_TRUE(same(trainMean, wantMean)) << "the running mean updated at the call";
    EXPECT_TRUE(same(at::relu(gotTrain), wantTrain));
    foreignCommand();
  }
}

// Note [Lone normalizations]: a group norm or an eval batch norm with nothing after it (a view or an in-place op
// ends the chain in a model) is learned as a chain of its own, deferred and fused; a lone layer norm is not.
TEST_F(FusionEngineTest, GivenALoneGroupNormOrEvalBatchNormWhenPublishedThenEachIsAChainOfItsOwnAndFused) {
  for (bool batch : {false, true}) {
    engine().resetForTest();
    gGate->covered = true;
    at::Tensor x = at::randn({2, 64, 6, 5}) * 2 + 1, w = at::randn({64}), b = at::randn({64});
    at::Tensor mean = at::randn({64}), var = at::rand({64}) + 0.5;
    auto block = [&] {
      return batch ? at::batch_norm(x, w, b, mean, var, false, 0.1, 1e-5, true) : at::group_norm(x, 32, w, b, 1e-5);
    };
    auto kernels = learnAndPublish(block);
    ASSERT_EQ(kernels.size(), 1u) << engine().patternsJson();
    const at::Tensor want = eager(block);
    const uint64_t deferred = engine().stats().deferredCalls;
    const at::Tensor got = block();
    EXPECT_EQ(engine().stats().deferredCalls, deferred + 1) << (batch ? "batch norm" : "group norm");
    EXPECT_EQ(kernels[0]->launches, 0);
    foreignCommand();
    EXPECT_EQ(kernels[0]->launches, 1) << engine().stats().lastUnfused;
    EXPECT_LE(worstRelative(got, want), 1e-5) << (batch ? "batch norm" : "group norm");
  }
  engine().resetForTest();
  at::Tensor x = at::randn({8, 64}), w = at::randn({64}), b = at::randn({64});
  auto ln = [&] { return at::layer_norm(x, {64}, w, b, 1e-5); };
  EXPECT_TRUE(learnAndPublish(ln).empty()) << engine().patternsJson();
  EXPECT_NE(engine().patternsJson().find("a single call: nothing to fuse"), std::string::npos);
}

// Note [In-place steps]: torchvision's Bottleneck tail (bn3, out += identity, ReLU(inplace=True)) is learned as
// one chain of three calls, deferred (the in-place calls return the tensor the caller holds) and fused into it.
TEST_F(FusionEngineTest, GivenAResidualTailWrittenInPlaceWhenPublishedThenItIsOneChainFusedIntoTheCallersTensor) {
  at::Tensor x = at::randn({2, 16, 6, 5}) * 2, identity = at::randn({2, 16, 6, 5});
  at::Tensor w = at::randn({16}), b = at::randn({16}), mean = at::randn({16}), var = at::rand({16}) + 0.5;
  auto tail = [&] {
    at::Tensor out = at::batch_norm(x, w, b, mean, var, false, 0.1, 1e-5, true);
    out.add_(identity);
    return out.relu_();
  };
  auto kernels = learnAndPublish(tail);
  ASSERT_EQ(kernels.size(), 1u) << engine().patternsJson();
  EXPECT_EQ(kernels[0]->build().outputValues.size(), 1u);
  const at::Tensor want = eager(tail);
  const uint64_t deferred = engine().stats().deferredCalls;
  at::Tensor out = at::batch_norm(x, w, b, mean, var, false, 0.1, 1e-5, true);
  const at::Tensor& added = out.add_(identity);
  EXPECT_TRUE(added.is_same(out));
  EXPECT_TRUE(out.relu_().is_same(out));
  EXPECT_EQ(engine().stats().deferredCalls, deferred + 3);
  EXPECT_EQ(kernels[0]->launches, 0);
  foreignCommand();
  EXPECT_EQ(kernels[0]->launches, 1) << engine().stats().lastUnfused;
  EXPECT_LE(worstRelative(out, want), 1e-5);
}

// Note [Ops a chain lets pass]: a ResNet downsampling block's tail. The shortcut's convolution (oneDNN's on the
// CPU) runs between bn3 and the shortcut's batch norm; it reads neither pending value, so bn3 stays pending, and
// bn3, the shortcut's batch norm, `+=` and the ReLU are one chain. A convolution of bn3's result flushes first.
TEST_F(FusionEngineTest, GivenADownsamplingTailWhenItsShortcutConvolutionRunsThenTheChainStaysPendingAndFusesWhole) {
  at::Tensor c3 = at::randn({2, 16, 4, 4}) * 2, block = at::randn({2, 8, 8, 8}), wds = at::randn({16, 8, 1, 1});
  at::Tensor w = at::randn({16}), b = at::randn({16}), mean = at::randn({16}), var = at::rand({16}) + 0.5;
  at::Tensor wds2 = at::randn({16}), bds = at::randn({16}), meands = at::randn({16}), vards = at::rand({16}) + 0.5;
  auto tail = [&] {
    at::Tensor out = at::batch_norm(c3, w, b, mean, var, false, 0.1, 1e-5, true);
    at::Tensor shortcut = at::conv2d(block, wds, {}, {2, 2});
    shortcut = at::batch_norm(shortcut, wds2, bds, meands, vards, false, 0.1, 1e-5, true);
    out.add_(shortcut);
    return at::relu(out);
  };
  auto kernels = learnAndPublish(tail);
  ASSERT_EQ(kernels.size(), 1u) << engine().patternsJson();
  EXPECT_EQ(kernels[0]->build().outputValues.size(), 1u);
  const at::Tensor want = eager(tail);
  const FusionStats before = engine().stats();
  at::Tensor got = tail();
  EXPECT_EQ(engine().stats().deferredCalls, before.deferredCalls + 4);
  EXPECT_EQ(engine().stats().passedCalls, before.passedCalls + 1);
  EXPECT_EQ(kernels[0]->launches, 0);
  foreignCommand();
  EXPECT_EQ(kernels[0]->launches, 1) << engine().stats().lastUnfused;
  EXPECT_LE(worstRelative(got, want), 1e-5);
  // A convolution that reads the pending bn3 computes it first.
  at::Tensor out = at::batch_norm(c3, w, b, mean, var, false, 0.1, 1e-5, true);
  at::Tensor conv = at::conv2d(out, at::randn({4, 16, 1, 1}));
  EXPECT_EQ(gGate->pending, 0);
  EXPECT_EQ(engine().stats().passedCalls, before.passedCalls + 1);
  const at::Tensor wantOut = eager([&] { return at::batch_norm(c3, w, b, mean, var, false, 0.1, 1e-5, true); });
  EXPECT_LE(worstRelative(out, wantOut), 1e-5);
}

// Note [Ops a chain lets pass]: four of HF's bottleneck blocks (ResNetBottleNeckLayer's order: the layer, then the
// shortcut's convolution and batch norm, `+=`, ReLU), two of them downsampling, with each hot chain published a
// step after the one before (as a tuner finishes them): the engine settles on every chain fused, none unfused,
// both shortcut convolutions let pass, and the blocks compute eager's values.
TEST_F(FusionEngineTest, GivenBottleneckBlocksWhenTheirChainsArePublishedOneAStepThenEveryChainFusesAndNoneReplays) {
  const auto norm = [](int64_t c) {
    return std::vector<at::Tensor>{at::rand({c}) + 0.5, at::randn({c}) * 0.1, at::randn({c}) * 0.1,
                                   at::rand({c}) + 0.5};
  };
  const auto bn = [](const at::Tensor& x, const std::vector<at::Tensor>& p) {
    return at::batch_norm(x, p[0], p[1], p[2], p[3], false, 0.1, 1e-5, true);
  };
  struct Block {
    at::Tensor w1, w2, w3, wShortcut;
    std::vector<at::Tensor> n1, n2, n3, nShortcut;
    int64_t stride;
  };
  const auto block = [&](int64_t in, int64_t mid, int64_t out, int64_t stride, bool shortcut) {
    Block b{at::randn({mid, in, 1, 1}) * 0.3, at::randn({mid, mid, 3, 3}) * 0.1, at::randn({out, mid, 1, 1}) * 0.3,
            shortcut ? at::randn({out, in, 1, 1}) * 0.3 : at::Tensor(), norm(mid), norm(mid), norm(out),
            shortcut ? norm(out) : std::vector<at::Tensor>{}, stride};
    return b;
  };
  const std::vector<Block> blocks = {block(8, 4, 16, 1, true), block(16, 4, 16, 1, false), block(16, 8, 32, 2, true),
                                     block(32, 8, 32, 1, false)};
  const at::Tensor x = at::randn({2, 8, 8, 8});
  const auto forward = [&] {
    at::Tensor h = x;
    for (const Block& b : blocks) {
      at::Tensor residual = h;
      at::Tensor y = at::relu(bn(at::conv2d(h, b.w1), b.n1));
      y = at::relu(bn(at::conv2d(y, b.w2, {}, {b.stride, b.stride}, {1, 1}), b.n2));
      y = bn(at::conv2d(y, b.w3), b.n3);
      if (b.wShortcut.defined()) residual = bn(at::conv2d(residual, b.wShortcut, {}, {b.stride, b.stride}), b.nShortcut);
      y.add_(residual);
      h = at::relu(y);
    }
    return h;
  };
  const at::Tensor want = eager(forward);
  std::vector<HotChain> hot;
  engine().setHotCallback([&](const HotChain& h) { hot.push_back(h); });
  foreignCommand();
  FusionStats before, after;
  at::Tensor got;
  for (int step = 0; step < 16; ++step) {
    before = engine().stats();
    got = forward();
    foreignCommand();
    after = engine().stats();
    if (!hot.empty()) {
      engine().publish(ReadyChain{hot.front().pattern, hot.front().build,
                                  std::make_shared<InterpreterKernel>(hot.front().build), hot.front().key});
      hot.erase(hot.begin());
    }
  }
  engine().setHotCallback(nullptr);
  EXPECT_EQ(after.fusedFlushes - before.fusedFlushes, 12u) << engine().patternsJson();  // 3 chains a block
  EXPECT_EQ(after.unfusedFlushes - before.unfusedFlushes, 0u) << after.lastUnfused;
  EXPECT_EQ(after.passedCalls - before.passedCalls, 2u);
  EXPECT_LE(worstRelative(got, want), 1e-4);
}

// The overwritten value is gone in eager too: a view of the tensor taken before the in-place call sees the last
// value, fused or replayed; a chain that diverges at its in-place step computes the value, then the call runs.
TEST_F(FusionEngineTest, GivenAnInPlaceStepWhenAViewIsHeldOrTheStepDivergesThenTheResultsAreEagers) {
  at::Tensor x = at::randn({32, 64}), y = at::randn({32, 64});
  auto program = [&](double scale) {
    at::Tensor h = at::exp(x);
    at::Tensor v = h.view({-1});
    h.mul_(scale);
    h.add_(y);
    return std::make_pair(h, v);
  };
  auto kernels = learnAndPublish([&] { return program(2.0).first; });
  ASSERT_EQ(kernels.size(), 1u) << engine().patternsJson();
  const auto want = eager([&] { return program(2.0).first; });
  auto [h, v] = program(2.0);
  foreignCommand();
  EXPECT_EQ(kernels[0]->launches, 1) << engine().stats().lastUnfused;
  EXPECT_LE(worstRelative(h, want), 1e-6);
  EXPECT_TRUE(same(v, h.view({-1})));
  // mul_(3) is not the chain's step: exp is computed into h, then mul_ and add_ run as eager runs them.
  const at::Tensor want3 = eager([&] { return program(3.0).first; });
  const uint64_t unfused = engine().stats().unfusedFlushes;
  auto [h3, v3] = program(3.0);
  foreignCommand();
  EXPECT_EQ(engine().stats().unfusedFlushes, unfused + 1);
  EXPECT_TRUE(same(h3, want3));
}

// An in-place call that writes a chain input (or a view of a value) is no step: the chain runs before it writes.
TEST_F(FusionEngineTest, GivenAPendingChainWhenAnInPlaceCallWritesItsInputThenTheChainReadsTheInputFirst) {
  at::Tensor g = at::randn({32, 128}), u = at::randn({32, 128});
  auto kernels = learnAndPublish([&] { return swiglu(g, u); });
  ASSERT_EQ(kernels.size(), 1u);
  const at::Tensor want = eager([&] { return swiglu(g, u); });
  at::Tensor gg = g.clone(), uu = u.clone();
  at::Tensor out = swiglu(gg, uu);  // pending
  EXPECT_EQ(kernels[0]->launches, 0);
  uu.mul_(5);  // writes the chain's input: the chain runs first
  EXPECT_EQ(kernels[0]->launches, 1);
  EXPECT_LE(worstRelative(out, want), 1e-6);  // fused: the interpreter's float arithmetic
  at::Tensor act = at::silu(gg);   // the chain's head, pending again
  act.select(0, 0).relu_();        // through a view: not the chain's value itself
  foreignCommand();
  at::Tensor wantAct = eager([&] {
    at::Tensor a = at::silu(gg);
    a.select(0, 0).relu_();
    return a;
  });
  EXPECT_TRUE(same(act, wantAct));
}

// FusionOptions::evalBatchNorm (HOTKERNEL_FUSION_BATCH_NORM): batch norms are deferrable only when asked for.
TEST(DeferrableOpsTest, GivenEvalBatchNormOffOrOnWhenResolvedThenTheBatchNormsAreLeftOutOrTakenIn) {
  auto has = [](const std::vector<ResolvedOp>& ops, const std::string& name) {
    return std::any_of(ops.begin(), ops.end(), [&](const ResolvedOp& r) { return r.qualified == name; });
  };
  const std::vector<ResolvedOp> off = resolveDeferrableOps(false), on = resolveDeferrableOps(true);
  EXPECT_FALSE(has(off, "aten::native_batch_norm"));
  EXPECT_FALSE(has(off, "aten::cudnn_batch_norm"));
  EXPECT_TRUE(has(off, "aten::native_group_norm"));
  EXPECT_TRUE(has(on, "aten::native_batch_norm"));
  EXPECT_TRUE(has(on, "aten::cudnn_batch_norm"));  // Note [cuDNN's batch norm in a chain]
  EXPECT_EQ(on.size(), off.size() + 2u);
  for (const char* name : {"aten::native_batch_norm", "aten::cudnn_batch_norm"}) {
    auto it = std::find_if(on.begin(), on.end(), [&](const ResolvedOp& r) { return r.qualified == name; });
    ASSERT_NE(it, on.end()) << name;
    EXPECT_TRUE(!it->flushing && !it->passing && !it->inPlace) << name;  // a step
    EXPECT_TRUE(it->out.has_value()) << name;                            // replayed through its .out
  }
  // FusionOptions::inPlace (HOTKERNEL_FUSION_IN_PLACE): the in-place ops, each replayed as itself.
  EXPECT_FALSE(has(off, "aten::relu_"));
  const std::vector<ResolvedOp> inPlace = resolveDeferrableOps(false, true);
  for (const char* name : {"aten::relu_", "aten::add_.Tensor", "aten::mul_.Scalar", "aten::hardtanh_"}) {
    auto it = std::find_if(inPlace.begin(), inPlace.end(), [&](const ResolvedOp& r) { return r.qualified == name; });
    ASSERT_NE(it, inPlace.end()) << name;
    EXPECT_TRUE(it->inPlace && !it->out) << name;
  }
  EXPECT_FALSE(std::any_of(off.begin(), off.end(), [](const ResolvedOp& r) { return r.inPlace; }));
}

// Each op has one role in an engine: cuDNN's batch norm is a step with batch norm chains on, replayed through
// cudnn_batch_norm.out, and a flushing op with them off (Note [cuDNN's batch norm in a chain]); the convolutions are
// let pass with FusionOptions::passConvolutions, and otherwise cuDNN's flush first and the others are not taken over.
TEST(DeferrableOpsTest, GivenTheEngineOptionsWhenItsOpsAreResolvedThenEachOpHasOneRole) {
  auto find = [](const std::vector<ResolvedOp>& ops, const std::string& name) {
    auto it = std::find_if(ops.begin(), ops.end(), [&](const ResolvedOp& r) { return r.qualified == name; });
    return it == ops.end() ? nullptr : &*it;
  };
  for (const bool evalBatchNorm : {false, true}) {
    for (const bool passConvolutions : {false, true}) {
      SCOPED_TRACE(std::string(evalBatchNorm ? "batch norms on" : "batch norms off") +
                   (passConvolutions ? ", convolutions let pass" : ""));
      const std::vector<ResolvedOp> ops = resolveEngineOps(evalBatchNorm, true, passConvolutions);
      std::map<std::string, int> seen;
      for (const ResolvedOp& r : ops) ++seen[r.qualified];
      for (const auto& [name, count] : seen) EXPECT_EQ(count, 1) << name;
      const ResolvedOp* cudnnBatchNorm = find(ops, "aten::cudnn_batch_norm");
      ASSERT_NE(cudnnBatchNorm, nullptr);
      EXPECT_EQ(cudnnBatchNorm->flushing, !evalBatchNorm);
      EXPECT_FALSE(cudnnBatchNorm->passing);
      EXPECT_EQ(cudnnBatchNorm->index < deferrableOps().size(), evalBatchNorm);  // a step's index is its table row
      EXPECT_EQ(cudnnBatchNorm->out.has_value(), evalBatchNorm);
      EXPECT_EQ(find(ops, "aten::native_batch_norm") != nullptr, evalBatchNorm);
      const ResolvedOp* cudnnConv = find(ops, "aten::cudnn_convolution");
      ASSERT_NE(cudnnConv, nullptr);
      EXPECT_EQ(cudnnConv->passing, passConvolutions);
      EXPECT_EQ(cudnnConv->flushing, !passConvolutions);
      const ResolvedOp* onednn = find(ops, "aten::mkldnn_convolution");
      EXPECT_EQ(onednn != nullptr, passConvolutions);
      if (onednn != nullptr) EXPECT_TRUE(onednn->passing);
      EXPECT_TRUE(find(ops, "aten::mm")->passing);
    }
  }
}

// Note [Idle streams]: with a probe that finds the stream idle, the chain's first call runs eagerly and so does
// the rest (nothing pending to continue); the result is eager's, and the next start asks again: busy, it defers.
TEST_F(FusionEngineTest, GivenAStreamProbeWhenTheStreamIsIdleThenTheChainRunsEagerlyAndWhenBusyItDefers) {
  at::Tensor x = at::randn({64, 256}).to(at::kBFloat16), w = at::randn({256}).to(at::kBFloat16);
  auto kernels = learnAndPublish([&] { return rmsNorm(x, w); });
  ASSERT_EQ(kernels.size(), 1u);
  const at::Tensor want = eager([&] { return rmsNorm(x, w); });
  bool idle = true;
  int asked = 0;
  engine().setStreamProbe([&](const c10::Stream&) {
    ++asked;
    return idle;
  });
  const uint64_t deferred = engine().stats().deferredCalls;
  at::Tensor got = rmsNorm(x, w);
  EXPECT_EQ(engine().stats().deferredCalls, deferred);
  // Each call of the chain's first op (the cast to float32, and the cast back) asked, and ran eagerly.
  EXPECT_GE(asked, 1);
  EXPECT_EQ(engine().stats().idleStarts, static_cast<uint64_t>(asked));
  EXPECT_TRUE(same(got, want));  // eager's own kernels
  foreignCommand();
  EXPECT_EQ(kernels[0]->launches, 0);
  idle = false;
  const int before = asked;
  got = rmsNorm(x, w);
  EXPECT_GE(engine().stats().deferredCalls, deferred + 8);
  EXPECT_EQ(asked, before + 1);  // asked at the start only, not for the calls that continue the chain
  EXPECT_EQ(gGate->pending, 1);
  foreignCommand();
  EXPECT_EQ(kernels[0]->launches, 1);
  EXPECT_LE(worstRelative(got, want), 1.0 / 64);
  // A probe that throws counts as busy: the chain defers, nothing reaches the caller.
  engine().setStreamProbe([](const c10::Stream&) -> bool { throw std::runtime_error("probe"); });
  const uint64_t deferredBefore = engine().stats().deferredCalls;
  EXPECT_NO_THROW(got = rmsNorm(x, w));
  EXPECT_GE(engine().stats().deferredCalls, deferredBefore + 8);
  foreignCommand();
  EXPECT_EQ(kernels[0]->launches, 2);
  engine().setStreamProbe(nullptr);
}

TEST_F(FusionEngineTest, GivenAKeysetWithAKeyAboveCpuWhenAChainsOpsAreCalledForTheCpuKeyThenTheyFuseAsEagerComputes) {
  // As torch.compile's Python dispatcher calls them: the trampolines' keysets' highest key is not CPU.
  at::Tensor g = at::randn({32, 128}).to(at::kBFloat16), u = at::randn({32, 128}).to(at::kBFloat16);
  auto kernels = learnAndPublish([&] { return swiglu(g, u); });
  ASSERT_EQ(kernels.size(), 1u);
  const at::Tensor want = eager([&] { return swiglu(g, u); });
  at::Tensor act = callCpuKernelUnderAHigherKey("aten::silu", "", {g})[0].toTensor();
  at::Tensor got = callCpuKernelUnderAHigherKey("aten::mul", "Tensor", {act, u})[0].toTensor();
  act.reset();
  foreignCommand();
  EXPECT_EQ(kernels[0]->launches, 1);
  EXPECT_LE(worstRelative(got, want), 1.0 / 64);
  // An op no chain starts with runs its original.
  at::Tensor a = at::randn({5, 7});
  at::Tensor sum = callCpuKernelUnderAHigherKey("aten::add", "Tensor", {a, a, 1})[0].toTensor();
  EXPECT_TRUE(same(sum, eager([&] { return a + a; })));
}

TEST_F(FusionEngineTest, GivenArgumentsOfAnotherBackendWhenTheCpuKernelIsAskedForThenItsOriginalRuns) {
  // As torch.compile's Python dispatcher asks for CUDA's _to_copy of a CPU tensor: here the CPU key's
  // (the composite kernel, which any backend's tensors can run) of a meta tensor.
  at::Tensor meta = at::empty({4, 8}, at::TensorOptions().device(at::kMeta).dtype(at::kFloat));
  torch::jit::Stack stack{meta, c10::IValue(at::kHalf), c10::IValue(), c10::IValue(), c10::IValue(), false,
                          c10::IValue()};
  const c10::OperatorHandle op = c10::Dispatcher::singleton().findSchemaOrThrow("aten::_to_copy", "");
  ASSERT_NO_THROW(op.callBoxedForDispatchKey(c10::DispatchKey::CPU, stack));
  ASSERT_EQ(stack.size(), 1u);
  EXPECT_EQ(stack[0].toTensor().scalar_type(), at::kHalf);
  EXPECT_TRUE(stack[0].toTensor().is_meta());
  EXPECT_EQ(engine().stats().deferredCalls, 0u);
}

// LlamaMLP's activation: the up projection runs between silu(gate) and the product.
at::Tensor swigluAroundAMatmul(const at::Tensor& g, const at::Tensor& x, const at::Tensor& w) {
  at::Tensor act = at::silu(g);
  at::Tensor up = at::mm(x, w);
  return act * up;
}

TEST_F(FusionEngineTest, GivenAMatmulOfOtherTensorsBetweenTwoStepsWhenTheChainRunsThenItIsLearnedStaysPendingAndFuses) {
  at::Tensor g = at::randn({32, 128}).to(at::kBFloat16), x = at::randn({32, 64}).to(at::kBFloat16);
  at::Tensor w = at::randn({64, 128}).to(at::kBFloat16);
  auto kernels = learnAndPublish([&] { return swigluAroundAMatmul(g, x, w); });
  ASSERT_EQ(kernels.size(), 1u) << engine().patternsJson();  // silu and mul, the product an input
  const at::Tensor want = eager([&] { return swigluAroundAMatmul(g, x, w); });
  at::Tensor act = at::silu(g);
  EXPECT_EQ(gGate->pending, 1);
  at::Tensor up = at::mm(x, w);
  EXPECT_EQ(gGate->pending, 1);  // let pass: the chain is still pending
  EXPECT_EQ(engine().stats().passedCalls, 1u);
  EXPECT_EQ(engine().stats().fusedFlushes + engine().stats().unfusedFlushes, 0u);
  at::Tensor got = act * up;
  act.reset();
  foreignCommand();
  EXPECT_EQ(kernels[0]->launches, 1);
  EXPECT_EQ(engine().stats().fusedFlushes, 1u);
  EXPECT_LE(worstRelative(got, want), 1.0 / 64);
}

TEST_F(FusionEngineTest, GivenAPendingChainWhenAMatmulReadsItsResultOrAViewOfItThenTheChainIsComputedFirst) {
  at::Tensor g = at::randn({32, 128}).to(at::kBFloat16), u = at::randn({32, 128}).to(at::kBFloat16);
  at::Tensor w = at::randn({128, 16}).to(at::kBFloat16);
  auto kernels = learnAndPublish([&] { return swiglu(g, u); });
  ASSERT_EQ(kernels.size(), 1u);
  const at::Tensor wantOut = eager([&] { return swiglu(g, u); });
  int launches = 0;
  for (bool view : {false, true}) {
    at::Tensor out = swiglu(g, u);
    EXPECT_EQ(gGate->pending, 1);
    at::Tensor read = view ? out.narrow(0, 8, 16) : out;
    at::Tensor got = at::mm(read, w);
    EXPECT_EQ(kernels[0]->launches, ++launches) << "view " << view;  // flushed before the product ran
    EXPECT_EQ(gGate->pending, 0);
    const at::Tensor want = eager([&] { return at::mm(view ? wantOut.narrow(0, 8, 16) : wantOut, w); });
    EXPECT_LE(worstRelative(got, want), 1.0 / 16) << "view " << view;
    EXPECT_LE(worstRelative(out, wantOut), 1.0 / 64);
  }
}

// Note [Ops that flush first]: a CPU kernel issues no command, so only the engine's trampoline can have flushed.
TEST_F(FusionEngineTest, GivenAPendingChainWhenAnOpOfALibraryWithItsOwnRuntimeIsCalledThenTheChainRunsBeforeIt) {
  at::Tensor x = at::randn({64, 256}).to(at::kBFloat16), w = at::randn({256}).to(at::kBFloat16);
  auto kernels = learnAndPublish([&] { return rmsNorm(x, w); });
  ASSERT_EQ(kernels.size(), 1u);
  const at::Tensor want = eager([&] { return rmsNorm(x, w); });
  at::Tensor a = at::randn({128}), b = at::randn({128});
  const at::Tensor wantDot = eager([&] { return at::dot(a, b); });
  at::Tensor got = rmsNorm(x, w);
  ASSERT_EQ(gGate->pending, 1);
  const uint64_t windows = engine().stats().windows;
  at::Tensor gotDot = at::dot(a, b);  // reads none of the chain's values
  EXPECT_EQ(kernels[0]->launches, 1);
  EXPECT_EQ(engine().stats().fusedFlushes, 1u);
  EXPECT_EQ(engine().stats().passedCalls, 0u);
  EXPECT_EQ(gGate->pending, 0);
  EXPECT_EQ(engine().stats().windows, windows + 1);  // the learning window ends there too
  EXPECT_TRUE(at::equal(gotDot, wantDot));
  EXPECT_LE(worstRelative(got, want), 1.0 / 64);
}

TEST_F(FusionEngineTest, GivenTheFlushingOpsWhenResolvedThenEachIsAFunctionalOpWithABackendKernelOfItsOwn) {
  const std::vector<ResolvedOp> ops = resolveFlushingOps();
  EXPECT_GE(ops.size(), 10u);  // this torch has cuDNN's, cuBLAS's and cuFFT's
  for (const ResolvedOp& r : ops) {
    EXPECT_TRUE(r.flushing && !r.passing) << r.qualified;
    EXPECT_FALSE(r.op->hasKernelForDispatchKey(c10::DispatchKey::CompositeImplicitAutograd)) << r.qualified;
    EXPECT_GE(r.index, deferrableOps().size()) << r.qualified;  // never a chain step
  }
}

TEST_F(FusionEngineTest, GivenWindowsThatTeachNothingForLongWhenMoreRunThenOneInEightIsLearnedUntilANewPatternShows) {
  // Note [Sampled learning]: this engine reports a pattern hot at its third window (hotCalls 3), so
  // sampling starts after 8 * 3 windows that taught nothing.
  at::Tensor x = at::randn({16, 64}).to(at::kBFloat16), w = at::randn({64}).to(at::kBFloat16);
  std::vector<HotChain> hot;
  engine().setHotCallback([&](const HotChain& h) { hot.push_back(h); });
  foreignCommand();
  for (int i = 0; i < 828; ++i) {
    at::Tensor out = rmsNorm(x, w);
    foreignCommand();
  }
  ASSERT_EQ(hot.size(), 1u);
  // 3 windows of news, 24 that taught nothing, then about 1 of 8 of the remaining 800 (100 +- 3 standard
  // deviations); each window but the set-up's ends at a command.
  const uint64_t learned = engine().stats().windows - (1u + 3u + 24u);
  EXPECT_GE(learned, 100u - 30u);
  EXPECT_LE(learned, 100u + 30u);
  EXPECT_EQ(gGate->pending, 1);  // a skipped window keeps the hook on: the next command ends it
  // A new pattern is learned at the next learned window (one chance in 8 a window), then every window again
  // until it is hot.
  at::Tensor g = at::randn({16, 64}).to(at::kBFloat16), u = at::randn({16, 64}).to(at::kBFloat16);
  int windows = 0;
  while (hot.size() < 2 && windows < 64) {
    at::Tensor out = swiglu(g, u);
    foreignCommand();
    ++windows;
  }
  engine().setHotCallback(nullptr);
  ASSERT_EQ(hot.size(), 2u) << "after " << windows << " windows";
  EXPECT_LE(windows, 40);
  // Deferral is unaffected: the rmsnorm chain, published now, is deferred and fused while windows are skipped.
  auto k = std::make_shared<InterpreterKernel>(hot[0].build);
  engine().publish(ReadyChain{hot[0].pattern, hot[0].build, k, hot[0].key});
  at::Tensor got = rmsNorm(x, w);
  foreignCommand();
  EXPECT_EQ(k->launches, 1);
  EXPECT_LE(worstRelative(got, eager([&] { return rmsNorm(x, w); })), 1.0 / 64);
}

TEST_F(FusionEngineTest, GivenAPatternOnceAStepAmongHotOnesWhenStepsRunThenItTurnsHotAtItsThirdStepAndSamplingResumes) {
  // Note [Learning a pattern that recurs]: a step is 20 rmsnorm windows (hot at the third) and one swiglu window,
  // so sampling (after 8 * 3 windows that taught nothing) would see the swiglu once in eight of its steps.
  at::Tensor x = at::randn({16, 64}).to(at::kBFloat16), w = at::randn({64}).to(at::kBFloat16);
  at::Tensor g = at::randn({16, 64}).to(at::kBFloat16), u = at::randn({16, 64}).to(at::kBFloat16);
  std::vector<HotChain> hot;
  engine().setHotCallback([&](const HotChain& h) { hot.push_back(h); });
  foreignCommand();
  const auto step = [&] {
    for (int i = 0; i < 20; ++i) {
      at::Tensor out = rmsNorm(x, w);
      foreignCommand();
    }
    at::Tensor out = swiglu(g, u);
    foreignCommand();
  };
  int steps = 0;
  while (hot.size() < 2 && steps < 24) {
    step();
    ++steps;
  }
  ASSERT_EQ(hot.size(), 2u);
  EXPECT_EQ(steps, 3);  // its second sighting holds learning on past its third
  // Once nothing is on its way to hot, the hold runs out and one window in eight is learned again.
  for (int i = 0; i < 4; ++i) step();
  const uint64_t before = engine().stats().windows;
  for (int i = 0; i < 8; ++i) step();
  engine().setHotCallback(nullptr);
  EXPECT_LE(engine().stats().windows - before, 8u * 21u / 8u + 12u);  // about 21 of 168 (a hold left on: 168)
}

// Note [Sampled learning]: which windows sampling learns does not follow the step. A step of 8 windows (as many as
// learnOneWindowIn) whose window at position p turns from an rmsnorm into a swiglu once sampling runs: a stride of
// 8 would learn the same position every step, so for 7 of the 8 positions the swiglu would never be learned.
TEST_F(FusionEngineTest, GivenANewPatternAtAnyPositionOfAStepOfEightWindowsWhenSamplingThenItTurnsHot) {
  at::Tensor x = at::randn({16, 64}).to(at::kBFloat16), w = at::randn({64}).to(at::kBFloat16);
  at::Tensor g = at::randn({16, 64}).to(at::kBFloat16), u = at::randn({16, 64}).to(at::kBFloat16);
  int totalSteps = 0;
  for (int position = 0; position < 8; ++position) {
    SCOPED_TRACE("position " + std::to_string(position));
    engine().resetForTest();
    std::vector<HotChain> hot;
    engine().setHotCallback([&](const HotChain& h) { hot.push_back(h); });
    foreignCommand();
    const auto step = [&](bool withSwiglu) {
      for (int i = 0; i < 8; ++i) {
        at::Tensor out = withSwiglu && i == position ? swiglu(g, u) : rmsNorm(x, w);
        foreignCommand();
      }
    };
    for (int i = 0; i < 8; ++i) step(false);  // hot at the third window, sampling after 24 more
    const uint64_t before = engine().stats().windows;
    for (int i = 0; i < 4; ++i) step(false);
    ASSERT_LE(engine().stats().windows - before, 8u) << "sampling";  // 4 of 32 windows learned, on average
    int steps = 0;
    while (hot.size() < 2 && steps < 64) {
      step(true);
      ++steps;
    }
    engine().setHotCallback(nullptr);
    ASSERT_EQ(hot.size(), 2u) << "after " << steps << " steps";
    totalSteps += steps;
  }
  // About 8 steps to its first learned sighting, then two more (hotCalls 3) learned at every window.
  EXPECT_LE(totalSteps, 8 * 20);
}

// The same with 22 rmsnorm windows a step and the swiglu's window ended by a call that cannot join it (an in-place op
// on a tensor no call of the window made): that window is counted with its index too, so its recurrences hold
// learning on.
TEST_F(FusionEngineTest, GivenAOnceAStepPatternEndedByACallThatCannotJoinWhenStepsRunThenItTurnsHotAtItsThirdStep) {
  at::Tensor x = at::randn({16, 64}).to(at::kBFloat16), w = at::randn({64}).to(at::kBFloat16);
  at::Tensor g = at::randn({16, 64}).to(at::kBFloat16), u = at::randn({16, 64}).to(at::kBFloat16);
  at::Tensor other = at::randn({16, 64}).to(at::kBFloat16);
  std::vector<HotChain> hot;
  engine().setHotCallback([&](const HotChain& h) { hot.push_back(h); });
  foreignCommand();
  int steps = 0;
  while (hot.size() < 2 && steps < 24) {
    for (int i = 0; i < 22; ++i) {
      at::Tensor out = rmsNorm(x, w);
      foreignCommand();
    }
    at::Tensor out = swiglu(g, u);
    other.relu_();  // ends the window: it writes a tensor the window did not make
    foreignCommand();
    ++steps;
  }
  engine().setHotCallback(nullptr);
  ASSERT_EQ(hot.size(), 2u);
  EXPECT_EQ(hot[1].pattern.calls.size(), 2u);  // silu, mul: the in-place call is not part of it
  EXPECT_EQ(steps, 3);
}

TEST_F(FusionEngineTest, GivenADeferredChainWhenAnIntermediateIsStillHeldThenItReplaysUnfusedExactlyAsEager) {
  at::Tensor g = at::randn({32, 128}).to(at::kBFloat16), u = at::randn({32, 128}).to(at::kBFloat16);
  auto kernels = learnAndPublish([&] { return swiglu(g, u); });
  ASSERT_EQ(kernels.size(), 1u);
  at::Tensor act = at::silu(g);  // held: the fused kernel does not write it
  at::Tensor out = act * u;
  foreignCommand();
  EXPECT_EQ(kernels[0]->launches, 0);
  EXPECT_EQ(engine().stats().unfusedFlushes, 1u);
  // The status says why: the held activation (%1, silu's result) is not the kernel's output.
  EXPECT_NE(engine().stats().lastUnfused.find("value %1 is still referenced elsewhere"), std::string::npos)
      << engine().stats().lastUnfused;
  EXPECT_TRUE(same(act, eager([&] { return at::silu(g); })));
  EXPECT_TRUE(same(out, eager([&] { return at::silu(g) * u; })));
}

// The user scopes a profiler would see on this thread (Note [Flushes in the profiler]).
std::vector<std::string>& userScopes() {
  static std::vector<std::string> names;
  return names;
}
std::unique_ptr<at::ObserverContext> onUserScope(const at::RecordFunction& fn) {
  userScopes().emplace_back(fn.name());
  return nullptr;
}

TEST_F(FusionEngineTest, GivenAProfilerWhenAChainIsFlushedFusedOrReplayedThenItsKernelsRunInAHotkernelScope) {
  at::Tensor x = at::randn({64, 256}).to(at::kBFloat16), w = at::randn({256}).to(at::kBFloat16);
  auto kernels = learnAndPublish([&] { return rmsNorm(x, w); });
  ASSERT_EQ(kernels.size(), 1u);
  userScopes().clear();
  const at::CallbackHandle handle = at::addThreadLocalCallback(
      at::RecordFunctionCallback(&onUserScope).scopes({at::RecordScope::USER_SCOPE}));
  at::Tensor got = rmsNorm(x, w);
  foreignCommand();  // fused
  ASSERT_EQ(kernels[0]->launches, 1);
  EXPECT_EQ(userScopes(), std::vector<std::string>{"hotkernel::fused_chain"});
  at::Tensor h = x.to(at::kFloat);  // the chain's head, deferred
  at::Tensor cube = h.pow(3);        // not the chain's next call: the prefix replays first
  foreignCommand();
  EXPECT_GE(engine().stats().unfusedFlushes, 1u);
  at::removeCallback(handle);
  ASSERT_GE(userScopes().size(), 2u);
  EXPECT_EQ(userScopes()[0], "hotkernel::fused_chain");
  for (size_t i = 1; i < userScopes().size(); ++i) EXPECT_EQ(userScopes()[i], "hotkernel::unfused_chain");
}

TEST_F(FusionEngineTest, GivenADeferredPrefixWhenADifferentOpFollowsThenThePrefixReplaysAndTheResultIsEagers) {
  at::Tensor x = at::randn({64, 256}).to(at::kBFloat16), w = at::randn({256}).to(at::kBFloat16);
  auto kernels = learnAndPublish([&] { return rmsNorm(x, w); });
  ASSERT_EQ(kernels.size(), 1u);
  auto diverging = [&] {
    at::Tensor h = x.to(at::kFloat);
    return h.pow(3).mean({-1}, true);  // pow(3), not pow(2): not the chain
  };
  at::Tensor got = diverging();
  foreignCommand();
  EXPECT_TRUE(same(got, eager(diverging)));
  EXPECT_EQ(kernels[0]->launches, 0);
  EXPECT_GE(engine().stats().unfusedFlushes, 1u);
}

TEST_F(FusionEngineTest, GivenAPendingChainWhenAViewOfAnIntermediateIsHeldThenItIsWrittenByTheReplay) {
  at::Tensor g = at::randn({32, 128}), u = at::randn({32, 128});
  auto kernels = learnAndPublish([&] { return swiglu(g, u); });
  ASSERT_EQ(kernels.size(), 1u);
  at::Tensor view;
  at::Tensor out;
  {
    at::Tensor act = at::silu(g);
    view = act.view({-1});  // the intermediate dies, its storage lives on in the view
    out = act * u;
  }
  foreignCommand();
  EXPECT_EQ(kernels[0]->launches, 0);
  EXPECT_TRUE(same(view, eager([&] { return at::silu(g).view({-1}); })));
  EXPECT_TRUE(same(out, eager([&] { return at::silu(g) * u; })));
}

// Found by the fuzz suite: an in-place metadata op issues no kernel, so a
// chain pending across one replayed into the changed tensors (out= resized
// them, or the replay threw and fusion switched off).
TEST_F(FusionEngineTest, GivenAPendingChainWhenItsTensorsChangeShapeInPlaceThenTheFlushComputesWhatEagerComputed) {
  at::Tensor g = at::randn({32, 128}), u = at::randn({32, 128});
  auto kernels = learnAndPublish([&] { return swiglu(g, u); });
  ASSERT_EQ(kernels.size(), 1u);
  auto program = [&](at::Tensor gg) {
    at::Tensor act = at::silu(gg);  // held: the chain replays
    at::Tensor out = act * u;
    gg.t_();  // an input, transposed after the chain took it
    act.unsqueeze_(0);
    out.t_();
    foreignCommand();
    return std::vector<at::Tensor>{act, out, gg};
  };
  const std::vector<at::Tensor> want = [&] {
    engine().setEnabled(false);
    auto w = program(g.clone());
    engine().setEnabled(true);
    return w;
  }();
  const std::vector<at::Tensor> got = program(g.clone());
  EXPECT_EQ(engine().stats().unfusedFlushes, 1u);
  EXPECT_EQ(engine().stats().failedFlushes, 0u);
  EXPECT_TRUE(engine().enabled());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(got[i].sizes(), want[i].sizes()) << i;
    EXPECT_EQ(got[i].strides(), want[i].strides()) << i;
    EXPECT_TRUE(same(got[i], want[i])) << i;
  }
  // The fused path: the intermediate dies, the output is reshaped before the command.
  at::Tensor fusedOut = swiglu(g, u);
  fusedOut.unsqueeze_(0);
  foreignCommand();
  EXPECT_EQ(kernels[0]->launches, 1);
  EXPECT_LE(worstRelative(fusedOut, eager([&] { return swiglu(g, u).unsqueeze(0); })), 1e-5);
}

// Found by the fuzz suite: a value of a pending chain reshaped in place and
// then read by the chain's next step was matched with the shape the chain
// had recorded, so the step's output was allocated with the pattern's shape.
TEST_F(FusionEngineTest, GivenAPendingValueReshapedInPlaceWhenTheNextStepReadsItThenTheStepRunsOnItsNewShape) {
  at::Tensor g = at::randn({32, 128}), u = at::randn({32, 128});
  auto kernels = learnAndPublish([&] { return swiglu(g, u); });
  ASSERT_EQ(kernels.size(), 1u);
  auto program = [&] {
    at::Tensor act = at::silu(g);
    act.unsqueeze_(0);
    at::Tensor out = act * u;  // [1, 32, 128]: not the chain's step any more
    foreignCommand();
    return out;
  };
  const at::Tensor want = eager(program);
  const at::Tensor got = program();
  EXPECT_EQ(got.sizes(), want.sizes());
  EXPECT_TRUE(same(got, want));
  EXPECT_EQ(engine().stats().failedFlushes, 0u);
}

// Found by the fuzz suite's concurrent programs: another thread's call
// flushes the owner's chain while the owner reshapes a pending output in
// place; a flush that read the caller's TensorImpl could see the old shape
// and resize the output back through out=. A stress: it fails only when the
// two threads interleave so.
TEST_F(FusionEngineTest, GivenAnotherThreadFlushingWhileTheOwnerReshapesPendingOutputsThenEveryOutputKeepsItsShapeAndValues) {
  at::Tensor g = at::randn({16, 32}), u = at::randn({16, 32});
  auto kernels = learnAndPublish([&] { return swiglu(g, u); });
  ASSERT_EQ(kernels.size(), 1u);
  const at::Tensor wantAct = eager([&] { return at::silu(g); });
  const at::Tensor wantOut = eager([&] { return at::silu(g) * u; });
  std::atomic<bool> stop{false};
  std::thread other([&] {
    at::Tensor x = at::randn({4});
    while (!stop.load()) x = at::tanh(x);  // not the owner: each call flushes what is pending
  });
  int wrong = 0, checked = 0;
  for (int i = 0; i < 2000; ++i) {
    at::Tensor act = at::silu(g);  // held: the chain replays through out=
    at::Tensor out = act * u;
    out.unsqueeze_(0);
    act.t_();
    const uint64_t gaveUp = engine().stats().hookGaveUp;
    foreignCommand();
    // The hook gives up after a bounded wait for the lock (Note [The fusion engine's lock]): not this test's case.
    if (engine().stats().hookGaveUp != gaveUp) continue;
    ++checked;
    if (out.sizes() != at::IntArrayRef{1, 16, 32} || act.sizes() != at::IntArrayRef{32, 16} ||
        !same(out, wantOut.unsqueeze(0)) || !same(act, wantAct.t())) {
      ++wrong;
    }
  }
  stop.store(true);
  other.join();
  EXPECT_EQ(wrong, 0);
  EXPECT_GT(checked, 1000);
  EXPECT_EQ(engine().stats().failedFlushes, 0u);
}

TEST_F(FusionEngineTest, GivenAnotherThreadFlushingTheOwnersChainWhenTheOwnerCopiesTheResultThenTheCopyWaitsForTheFlush) {
  at::Tensor g = at::randn({16, 32}), u = at::randn({16, 32}), x = at::randn({4});
  auto kernels = learnAndPublish([&] { return swiglu(g, u); });
  ASSERT_EQ(kernels.size(), 1u);
  const at::Tensor want = eager([&] { return swiglu(g, u); });
  at::Tensor out = swiglu(g, u);
  ASSERT_GT(gGate->pending.load(), 0) << "the chain is not pending";
  kernels[0]->delayMs = 300;
  const uint64_t gaveUp = engine().stats().hookGaveUp;  // stats() takes the lock: read before the flush
  // Given: another thread's call flushes the owner's chain (its fused launch takes 300 ms).
  std::thread other([&] { at::tanh(x); });
  while (!kernels[0]->inside.load()) std::this_thread::yield();
  // When: the owner copies the chain's result to the host (an .item()'s copy).
  foreignCommand(HOTKERNEL_COMMAND_COPY);
  // Then: the copy went on only after the chain's kernel had written its outputs.
  EXPECT_EQ(kernels[0]->finished.load(), 1) << "the copy did not wait for the flush on the other thread";
  other.join();
  EXPECT_EQ(engine().stats().hookGaveUp, gaveUp);
  EXPECT_LT(worstRelative(out, want), 1e-5);
}

TEST_F(FusionEngineTest, GivenAThirdThreadFlushingWhenAThreadTheOwnerHandedTheResultCopiesItThenTheCopyWaitsForTheFlush) {
  at::Tensor g = at::randn({16, 32}), u = at::randn({16, 32}), x = at::randn({4});
  auto kernels = learnAndPublish([&] { return swiglu(g, u); });
  ASSERT_EQ(kernels.size(), 1u);
  const at::Tensor want = eager([&] { return swiglu(g, u); });
  at::Tensor out = swiglu(g, u);
  ASSERT_GT(gGate->pending.load(), 0) << "the chain is not pending";
  kernels[0]->delayMs = 300;
  const uint64_t gaveUp = engine().stats().hookGaveUp;  // stats() takes the lock: read before the flush
  // Given: a third thread's call flushes the owner's chain (its fused launch takes 300 ms).
  std::thread flusher([&] { at::tanh(x); });
  while (!kernels[0]->inside.load()) std::this_thread::yield();
  // When: a thread the owner handed `out` to copies it to the host (a serving process's output thread).
  int finishedAtCopy = -1;
  std::thread reader([&] {
    foreignCommand(HOTKERNEL_COMMAND_COPY);
    finishedAtCopy = kernels[0]->finished.load();
  });
  reader.join();
  // Then: the copy went on only after the chain's kernel had written its outputs.
  EXPECT_EQ(finishedAtCopy, 1) << "the copy did not wait for the flush on the third thread";
  flusher.join();
  EXPECT_EQ(engine().stats().hookGaveUp, gaveUp);
  EXPECT_LT(worstRelative(out, want), 1e-5);
}

TEST_F(FusionEngineTest, GivenAnotherThreadFlushingWhenTheOwnerRecordsAnEventThenTheHookGivesUpAfterItsBound) {
  at::Tensor g = at::randn({16, 32}), u = at::randn({16, 32}), x = at::randn({4});
  auto kernels = learnAndPublish([&] { return swiglu(g, u); });
  ASSERT_EQ(kernels.size(), 1u);
  at::Tensor out = swiglu(g, u);
  ASSERT_GT(gGate->pending.load(), 0) << "the chain is not pending";
  kernels[0]->delayMs = 1000;
  const uint64_t gaveUp = engine().stats().hookGaveUp;  // stats() takes the lock: read before the flush
  std::thread other([&] { at::tanh(x); });
  while (!kernels[0]->inside.load()) std::this_thread::yield();
  // When: the owner records an event (what the caching allocator does under its mutex, which a flush may need).
  const auto begin = std::chrono::steady_clock::now();
  foreignCommand(HOTKERNEL_COMMAND_EVENT_RECORD);
  const auto waited = std::chrono::steady_clock::now() - begin;
  // Then: it does not wait for the flush (no deadlock with the allocator): it gives up after its bound.
  EXPECT_LT(waited, std::chrono::milliseconds(900));
  EXPECT_EQ(kernels[0]->finished.load(), 0);
  other.join();
  EXPECT_EQ(engine().stats().hookGaveUp, gaveUp + 1);
  EXPECT_EQ(kernels[0]->finished.load(), 1);
}

TEST_F(FusionEngineTest, GivenNoCommandHookWhenChainsRunThenNothingIsLearnedOrDeferred) {
  gGate->covered = false;
  at::Tensor g = at::randn({32, 128}), u = at::randn({32, 128});
  std::vector<HotChain> hot;
  engine().setHotCallback([&](const HotChain& h) { hot.push_back(h); });
  for (int i = 0; i < 5; ++i) {
    at::Tensor out = swiglu(g, u);
    foreignCommand();
  }
  engine().setHotCallback(nullptr);
  EXPECT_TRUE(hot.empty());
  EXPECT_EQ(engine().stats().windows, 0u);
  EXPECT_EQ(gGate->pending, 0);
}

TEST_F(FusionEngineTest, GivenInputsThatRequireGradUnderGradModeWhenTheChainRunsThenItIsNotDeferred) {
  at::Tensor g = at::randn({32, 128}), u = at::randn({32, 128});
  auto kernels = learnAndPublish([&] { return swiglu(g, u); });
  ASSERT_EQ(kernels.size(), 1u);
  at::Tensor gg = g.clone().requires_grad_(true);
  at::AutoGradMode grad(true);
  at::Tensor out = swiglu(gg, u);
  EXPECT_EQ(engine().stats().deferredCalls, 0u);
  EXPECT_TRUE(same(out.detach(), eager([&] { return swiglu(g, u); })));
}

TEST_F(FusionEngineTest, GivenAChainPendingWhenSwitchedOffThenItRunsAndLaterCallsRunTheirOriginals) {
  at::Tensor g = at::randn({32, 128}), u = at::randn({32, 128});
  auto kernels = learnAndPublish([&] { return swiglu(g, u); });
  ASSERT_EQ(kernels.size(), 1u);
  at::Tensor out = swiglu(g, u);
  engine().setEnabled(false);
  EXPECT_EQ(kernels[0]->launches, 1);
  EXPECT_EQ(gGate->pending, 0);
  at::Tensor again = swiglu(g, u);
  EXPECT_EQ(kernels[0]->launches, 1);
  engine().setEnabled(true);
  FusionBypass bypass;
  EXPECT_TRUE(at::allclose(out, again, 1e-6, 1e-6));
}

TEST_F(FusionEngineTest, GivenTwoChainsSharingAPrefixWhenEitherRunsThenTheCompleteOneFusesIt) {
  at::Tensor g = at::randn({32, 128}), u = at::randn({32, 128}), b = at::randn({32, 128});
  auto shortKernels = learnAndPublish([&] { return swiglu(g, u); });
  auto longKernels = learnAndPublish([&] { return swiglu(g, u) + b; });
  ASSERT_EQ(shortKernels.size(), 1u);
  ASSERT_EQ(longKernels.size(), 1u);
  EXPECT_EQ(engine().stats().readyChains, 2u);
  // The long chain was learned around the short one, which fused its prefix meanwhile.
  const int shortBefore = shortKernels[0]->launches;
  EXPECT_GT(shortBefore, 0);
  at::Tensor longOut = swiglu(g, u) + b;  // both candidates match two calls; the third picks the long one
  foreignCommand();
  EXPECT_EQ(longKernels[0]->launches, 1);
  EXPECT_EQ(shortKernels[0]->launches, shortBefore);
  at::Tensor shortOut = swiglu(g, u);  // ends after two calls: the short chain is the complete candidate
  foreignCommand();
  EXPECT_EQ(shortKernels[0]->launches, shortBefore + 1);
  EXPECT_EQ(longKernels[0]->launches, 1);
  EXPECT_LE(worstRelative(longOut, eager([&] { return swiglu(g, u) + b; })), 1e-5);
  EXPECT_LE(worstRelative(shortOut, eager([&] { return swiglu(g, u); })), 1e-5);
}

TEST_F(FusionEngineTest, GivenAPendingChainWhenTheSameCallsRunOnAnotherShapeThenTheyAreNotDeferred) {
  at::Tensor g = at::randn({32, 128}), u = at::randn({32, 128});
  auto kernels = learnAndPublish([&] { return swiglu(g, u); });
  ASSERT_EQ(kernels.size(), 1u);
  at::Tensor g2 = at::randn({16, 128}), u2 = at::randn({16, 128});
  const uint64_t before = engine().stats().deferredCalls;
  at::Tensor out = swiglu(g2, u2);
  EXPECT_EQ(engine().stats().deferredCalls, before);  // the pattern holds the sizes: another variant
  foreignCommand();
  EXPECT_TRUE(same(out, eager([&] { return swiglu(g2, u2); })));
}

TEST_F(FusionEngineTest, GivenAHotWindowTheBuilderRefusesWhenThePatternsAreReadThenTheyNameTheReason) {
  at::Tensor g = at::randn({32, 128}), idx = at::arange(32 * 128).view({32, 128});
  foreignCommand();
  for (int i = 0; i < 3; ++i) {
    at::Tensor one = at::silu(g);  // a single call: nothing to fuse
    foreignCommand();
    at::Tensor ints = idx * 2 + 1;  // int64: not a chain dtype
    foreignCommand();
  }
  const std::string patterns = engine().patternsJson();
  EXPECT_NE(patterns.find("a single call: nothing to fuse"), std::string::npos) << patterns;
  EXPECT_NE(patterns.find("int64"), std::string::npos) << patterns;
  EXPECT_EQ(engine().stats().hotChains, 0u);
}

TEST_F(FusionEngineTest, GivenALongRunOfCallsWhenItPassesTheWindowLimitThenWindowsEndThereAndNothingIsPending) {
  at::Tensor x = at::randn({8, 32});
  foreignCommand();
  const uint64_t before = engine().stats().windows;
  at::Tensor v = x;
  for (int i = 0; i < 70; ++i) v = v * 1.0001;  // 70 calls, no command between them
  EXPECT_EQ(engine().stats().windows, before + 2);  // two full windows of 32 ended without a command
  foreignCommand();
  EXPECT_EQ(engine().stats().windows, before + 3);
  EXPECT_EQ(gGate->pending, 0);
}

TEST_F(FusionEngineTest, GivenAnErrorInsideTheEngineWhenACallIsTakenThenFusionSwitchesOffAndTheCallRunsItsOriginal) {
  at::Tensor g = at::randn({32, 128}), u = at::randn({32, 128});
  const std::vector<HotChain> hot = learnHot([&] { return swiglu(g, u); });
  ASSERT_EQ(hot.size(), 1u);
  // A pattern whose first output cannot be allocated: the engine's allocation throws.
  chain::ChainPattern broken = hot[0].pattern;
  broken.metas.at(broken.calls[0].outputs[0]).sizes[0] = -1;
  engine().publish(ReadyChain{broken, hot[0].build, std::make_shared<InterpreterKernel>(hot[0].build), hot[0].key});
  at::Tensor out = swiglu(g, u);
  EXPECT_FALSE(engine().enabled());
  foreignCommand();
  EXPECT_TRUE(same(out, eager([&] { return swiglu(g, u); })));
  EXPECT_FALSE(engine().enabled());  // switching it on again does not bring it back
  EXPECT_EQ(engine().stats().deferredCalls, 0u);
  EXPECT_EQ(gGate->pending, 0);
  // The test engine's reset switches it back on. The chain the error left (values it numbered before the throw) is
  // the spare that the next start restarts: it starts clean (Note [A spare pending chain]).
  engine().resetForTest();
  at::Tensor g2 = at::randn({32, 128}), u2 = at::randn({32, 128});  // not the values the spare numbered
  auto kernels = learnAndPublish([&] { return swiglu(g2, u2); });
  ASSERT_EQ(kernels.size(), 1u);
  at::Tensor again = swiglu(g2, u2);
  EXPECT_TRUE(engine().enabled());
  EXPECT_EQ(engine().stats().deferredCalls, 2u);
  foreignCommand();
  EXPECT_EQ(kernels[0]->launches, 1);
  EXPECT_LE(worstRelative(again, eager([&] { return swiglu(g2, u2); })), 1e-5);  // float32, fused rounding
}

TEST_F(FusionEngineTest, GivenHfRotaryOnATransposedProjectionWhenLearnedThenItIsHotAsAStridedFiveCallChainWithCat) {
  const RotaryInputs in = rotaryInputs(2, 4, 8, 32, at::kBFloat16);
  std::vector<HotChain> hot;
  engine().setHotCallback([&](const HotChain& h) { hot.push_back(h); });
  foreignCommand();
  for (int i = 0; i < 3; ++i) {
    at::Tensor out = applyRotary(in.x, in.cos, in.sin);
    foreignCommand();
  }
  engine().setHotCallback(nullptr);
  ASSERT_EQ(hot.size(), 1u) << engine().patternsJson();
  ASSERT_TRUE(hot[0].build.ok()) << hot[0].build.reason;
  ASSERT_EQ(hot[0].pattern.calls.size(), 5u) << hot[0].pattern.text() << engine().patternsJson();
  EXPECT_EQ(hot[0].pattern.calls[2].op, "aten::cat");
  EXPECT_EQ(hot[0].pattern.calls[2].args.at(0).kind, chain::RecordedArg::Kind::TensorList);
  // x, cos, x2, x1, sin: the halves are inputs of their own, the heads' broadcast and x's strides a layout.
  EXPECT_EQ(hot[0].build.inputValues.size(), 5u);
  EXPECT_FALSE(hot[0].build.layout.contiguous());
  EXPECT_EQ(hot[0].build.rows, 2 * 4 * 8);
  EXPECT_EQ(hot[0].build.cols, 32);
}

TEST_F(FusionEngineTest, GivenAPublishedRotaryChainWhenItRunsAgainThenItIsDeferredAndFusedWithinTheChainTolerance) {
  const RotaryInputs in = rotaryInputs(2, 4, 8, 32, at::kBFloat16);
  auto kernels = learnAndPublish([&] { return applyRotary(in.x, in.cos, in.sin); });
  ASSERT_EQ(kernels.size(), 1u) << engine().patternsJson();
  const at::Tensor want = eager([&] { return applyRotary(in.x, in.cos, in.sin); });
  const uint64_t deferredBefore = engine().stats().deferredCalls;
  const int launchesBefore = kernels[0]->launches;
  at::Tensor got = applyRotary(in.x, in.cos, in.sin);
  EXPECT_EQ(engine().stats().deferredCalls, deferredBefore + 5);
  EXPECT_EQ(kernels[0]->launches, launchesBefore);  // not computed yet
  EXPECT_EQ(gGate->pending, 1);
  foreignCommand();
  EXPECT_EQ(kernels[0]->launches, launchesBefore + 1);
  // The output was allocated as eager allocates it: x's strides, not contiguous.
  EXPECT_EQ(got.sizes(), want.sizes());
  EXPECT_EQ(got.strides(), want.strides());
  // Note [Interpreter modes tolerance]: the fused rounding of a bf16 chain.
  EXPECT_LE(worstRelative(got, want), 1.0 / 16);
  // Read at the wrong offset (x2 at x's pointer, or cos not broadcast), most elements would be far off.
  EXPECT_LE(worstRelative(got, want), 1.0 / 64);
}

TEST_F(FusionEngineTest, GivenADeferredRotaryChainWhenTheRotatedHalfIsHeldThenItReplaysUnfusedBitwiseAsEager) {
  const RotaryInputs in = rotaryInputs(2, 4, 8, 32, at::kBFloat16);
  auto kernels = learnAndPublish([&] { return applyRotary(in.x, in.cos, in.sin); });
  ASSERT_EQ(kernels.size(), 1u) << engine().patternsJson();
  auto program = [&] {
    at::Tensor xCos = in.x * in.cos;
    at::Tensor rotated = rotateHalf(in.x);  // held: the fused kernel does not write it
    at::Tensor out = xCos + rotated * in.sin;
    foreignCommand();
    return std::vector<at::Tensor>{rotated, out};
  };
  engine().setEnabled(false);
  const std::vector<at::Tensor> want = program();
  engine().setEnabled(true);
  const int launchesBefore = kernels[0]->launches;
  const uint64_t deferredBefore = engine().stats().deferredCalls;
  const uint64_t unfusedBefore = engine().stats().unfusedFlushes;
  const std::vector<at::Tensor> got = program();
  EXPECT_EQ(engine().stats().deferredCalls, deferredBefore + 5);
  EXPECT_EQ(engine().stats().unfusedFlushes, unfusedBefore + 1);
  EXPECT_EQ(kernels[0]->launches, launchesBefore);
  EXPECT_EQ(engine().stats().failedFlushes, 0u);
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(got[i].strides(), want[i].strides()) << i;
    EXPECT_TRUE(same(got[i], want[i])) << i;
  }
}

TEST_F(FusionEngineTest, GivenALearnedRotaryChainWhenXArrivesWithOtherStridesThenItIsNotDeferredAndTheResultIsEagers) {
  const RotaryInputs in = rotaryInputs(2, 4, 8, 32, at::kBFloat16);
  auto kernels = learnAndPublish([&] { return applyRotary(in.x, in.cos, in.sin); });
  ASSERT_EQ(kernels.size(), 1u) << engine().patternsJson();
  // The same values and sizes, contiguous: x's strides differ from the pattern's.
  const at::Tensor contiguous = [&] {
    FusionBypass bypass;
    return in.x.contiguous();
  }();
  const int launchesBefore = kernels[0]->launches;
  const uint64_t deferredBefore = engine().stats().deferredCalls;
  at::Tensor got = applyRotary(contiguous, in.cos, in.sin);
  EXPECT_EQ(engine().stats().deferredCalls, deferredBefore);
  foreignCommand();
  EXPECT_EQ(kernels[0]->launches, launchesBefore);
  EXPECT_TRUE(same(got, eager([&] { return applyRotary(contiguous, in.cos, in.sin); })));
  // The learned strides still defer.
  at::Tensor again = applyRotary(in.x, in.cos, in.sin);
  EXPECT_EQ(engine().stats().deferredCalls, deferredBefore + 5);
  foreignCommand();
  EXPECT_EQ(kernels[0]->launches, launchesBefore + 1);
}

// Note [Segments of a refused window]: under grouped-query attention HF's rotary runs on q and then on k of
// fewer heads in one window, which no single chain covers; each half is learned as a chain of its own.
TEST_F(FusionEngineTest, GivenRotaryOnQThenOnFewerKvHeadsWhenLearnedThenEachHalfIsAChainAndBothFuse) {
  const RotaryInputs q = rotaryInputs(2, 4, 8, 32, at::kBFloat16);
  const RotaryInputs k = rotaryInputs(2, 2, 8, 32, at::kBFloat16);
  auto program = [&] {
    return std::vector<at::Tensor>{applyRotary(q.x, q.cos, q.sin), applyRotary(k.x, q.cos, q.sin)};
  };
  const std::vector<HotChain> hot = learnHot(program);  // both results held, as attention holds them
  ASSERT_EQ(hot.size(), 2u) << engine().patternsJson();
  EXPECT_EQ(hot[0].pattern.calls.size(), 5u);
  EXPECT_EQ(hot[1].pattern.calls.size(), 5u);
  EXPECT_EQ(hot[0].build.rows, 2 * 4 * 8);
  EXPECT_EQ(hot[1].build.rows, 2 * 2 * 8);
  const std::string patterns = engine().patternsJson();
  EXPECT_NE(patterns.find("do not broadcast"), std::string::npos) << patterns;  // the window's own refusal
  EXPECT_NE(patterns.find(hot[1].key), std::string::npos) << patterns;          // and the segments it gave
  std::vector<std::shared_ptr<InterpreterKernel>> kernels;
  for (const HotChain& h : hot) {
    kernels.push_back(std::make_shared<InterpreterKernel>(h.build));
    engine().publish(ReadyChain{h.pattern, h.build, kernels.back(), h.key});
  }
  engine().setEnabled(false);
  const std::vector<at::Tensor> want = program();
  engine().setEnabled(true);
  const uint64_t deferredBefore = engine().stats().deferredCalls;
  const uint64_t fusedBefore = engine().stats().fusedFlushes;
  const std::vector<at::Tensor> got = program();
  EXPECT_EQ(engine().stats().deferredCalls, deferredBefore + 10);
  EXPECT_EQ(kernels[0]->launches, 1);  // k's first call does not continue q's chain: q's runs, k's starts
  EXPECT_EQ(kernels[1]->launches, 0);
  EXPECT_EQ(gGate->pending, 1);
  foreignCommand();
  EXPECT_EQ(kernels[1]->launches, 1);
  EXPECT_EQ(engine().stats().fusedFlushes, fusedBefore + 2);
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(got[i].strides(), want[i].strides()) << i;
    EXPECT_LE(worstRelative(got[i], want[i]), 1.0 / 64) << i;
  }
}

// GPT-2's eager_attention_forward as modeling_gpt2 writes it: the scores' scale, the additive mask broadcast
// over the heads and the softmax are one chain (Note [Softmax in a chain]); the matmul reading the
// probabilities flushes it (Note [Ops a chain lets pass]).
at::Tensor gpt2EagerAttention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& mask) {
  at::Tensor weights = at::matmul(q, k.transpose(-1, -2)) * (1.0 / std::sqrt(static_cast<double>(q.size(-1))));
  weights = weights + mask;
  weights = at::softmax(weights, -1);
  return at::matmul(weights, v);
}

TEST_F(FusionEngineTest, GivenGpt2EagerAttentionWhenLearnedThenScaleMaskAndSoftmaxAreOneChainThatTheMatmulFlushes) {
  const int64_t b = 2, h = 3, s = 16, d = 8;
  const at::Tensor q = at::randn({b, h, s, d}), k = at::randn({b, h, s, d}), v = at::randn({b, h, s, d});
  const at::Tensor mask = at::where(at::rand({b, 1, s, s}) > 0.2, at::zeros({1}), at::full({1}, -1e9));
  auto kernels = learnAndPublish([&] { return gpt2EagerAttention(q, k, v, mask); });
  ASSERT_EQ(kernels.size(), 1u) << engine().patternsJson();
  const at::Tensor want = eager([&] { return gpt2EagerAttention(q, k, v, mask); });
  const uint64_t deferredBefore = engine().stats().deferredCalls;
  const int launchesBefore = kernels[0]->launches;
  at::Tensor got = gpt2EagerAttention(q, k, v, mask);
  EXPECT_EQ(engine().stats().deferredCalls, deferredBefore + 3);  // mul, add, _softmax
  EXPECT_EQ(kernels[0]->launches, launchesBefore + 1);            // before the second matmul read the result
  EXPECT_EQ(gGate->pending, 0);
  EXPECT_LE(worstRelative(got, want), 1e-5);
}

// Note [Relayout copies]: GPT-2's attention on head views of its fused QKV projection. matmul's reshapes copy q
// and v (row copies of strided views: chains of one call) and k^T (a transpose: Note [Transposed layouts]), and
// the output goes back to [b, s, h * d] through another copy; with the scores' chain, five chains are learned
// and fused.
TEST_F(FusionEngineTest, GivenGpt2AttentionOnHeadViewsWhenLearnedThenTheRelayoutCopiesAreChainsOfOneCallAndFuse) {
  const int64_t b = 2, h = 3, s = 16, d = 8;
  const at::Tensor qkv = at::randn({b, s, 3 * h * d});
  const auto head = [&](int64_t k) { return qkv.narrow(-1, k * h * d, h * d).view({b, s, h, d}).transpose(1, 2); };
  const at::Tensor q = head(0), k = head(1), v = head(2);
  const at::Tensor mask = at::where(at::rand({b, 1, s, s}) > 0.2, at::zeros({1}), at::full({1}, -1e9));
  auto block = [&] { return gpt2EagerAttention(q, k, v, mask).transpose(1, 2).reshape({b, s, h * d}); };
  // Reported: q's copy, k^T's, the scores, v's copy (the same pattern as q's: one chain), the output's copy.
  auto kernels = learnAndPublish(block);
  ASSERT_EQ(kernels.size(), 5u) << engine().patternsJson();
  EXPECT_EQ(engine().stats().readyChains, 4u);
  const at::Tensor want = eager(block);
  const uint64_t deferredBefore = engine().stats().deferredCalls, fusedBefore = engine().stats().fusedFlushes;
  int launchesBefore = 0;
  for (const auto& kernel : kernels) launchesBefore += kernel->launches;
  at::Tensor got = block();
  foreignCommand();
  // clone q, clone k^T, mul, add, _softmax, clone v, clone out
  EXPECT_EQ(engine().stats().deferredCalls, deferredBefore + 7);
  EXPECT_EQ(engine().stats().fusedFlushes, fusedBefore + 5);
  int launches = 0;
  for (const auto& kernel : kernels) launches += kernel->launches;
  EXPECT_EQ(launches, launchesBefore + 5);
  EXPECT_TRUE(got.is_contiguous());
  EXPECT_LE(worstRelative(got, want), 1e-5);
  // A clone of a contiguous value is no chain: learned alone, it is nothing to fuse.
  const at::Tensor dense = at::randn({b, s, h * d});
  std::vector<HotChain> hot;
  engine().setHotCallback([&](const HotChain& c) { hot.push_back(c); });
  for (int i = 0; i < 3; ++i) {
    at::Tensor copy = dense.clone();
    foreignCommand();
  }
  engine().setHotCallback(nullptr);
  EXPECT_TRUE(hot.empty()) << engine().patternsJson();
}

// Note [Relayout copies]: a lone widening cast of a head view (`.float()`) is a chain of one call too.
TEST_F(FusionEngineTest, GivenALoneCastOfAHeadViewWhenLearnedThenItIsAChainOfOneCallAndFusesExactly) {
  const at::Tensor qkv = at::randn({2, 16, 3 * 4 * 8}).to(at::kBFloat16);
  const at::Tensor q = qkv.narrow(-1, 0, 4 * 8).view({2, 16, 4, 8}).transpose(1, 2);
  const std::vector<HotChain> hot = learnHot([&] { return q.to(at::kFloat); });
  ASSERT_EQ(hot.size(), 1u) << engine().patternsJson();
  EXPECT_TRUE(chain::isRelayoutCopy(hot[0].build));
  auto kernel = std::make_shared<InterpreterKernel>(hot[0].build);
  engine().publish(ReadyChain{hot[0].pattern, hot[0].build, kernel, hot[0].key});
  at::Tensor got = q.to(at::kFloat);
  foreignCommand();
  EXPECT_EQ(kernel->launches, 1);
  EXPECT_TRUE(same(got, eager([&] { return q.to(at::kFloat); })));  // a widening cast is exact
}

// Note [Transposed layouts]: NHWC to NCHW and NCHW to NHWC made contiguous are transposed copies (the first with
// its stride-1 row dim moved last by the builder); through the engine each is one deferred call, fused exactly.
TEST_F(FusionEngineTest, GivenChannelsLastPermutationsMadeContiguousWhenLearnedThenEachIsATransposedCopyFusedExactly) {
  const at::Tensor nhwc = at::randn({2, 3, 5, 8}).to(at::kHalf), nchw = at::randn({2, 8, 3, 5}).to(at::kHalf);
  const std::vector<std::function<at::Tensor()>> programs = {
      [&] { return nhwc.permute({0, 3, 1, 2}).contiguous(); }, [&] { return nchw.permute({0, 2, 3, 1}).contiguous(); }};
  for (const auto& program : programs) {
    const std::vector<HotChain> hot = learnHot(program);
    ASSERT_EQ(hot.size(), 1u) << engine().patternsJson();
    EXPECT_TRUE(chain::isRelayoutCopy(hot[0].build));
    EXPECT_TRUE(hot[0].build.layout.transposed()) << chain::layoutText(hot[0].build.layout);
    auto kernel = std::make_shared<InterpreterKernel>(hot[0].build);
    engine().publish(ReadyChain{hot[0].pattern, hot[0].build, kernel, hot[0].key});
    const uint64_t deferredBefore = engine().stats().deferredCalls;
    at::Tensor got = program();
    foreignCommand();
    EXPECT_EQ(engine().stats().deferredCalls, deferredBefore + 1);
    EXPECT_EQ(kernel->launches, 1);
    EXPECT_TRUE(got.is_contiguous());
    EXPECT_TRUE(same(got, eager(program)));
  }
}

TEST_F(FusionEngineTest, GivenAChainEndingInLogSoftmaxOfBf16WhenDeferredThenItFusesWithinTheChainTolerance) {
  const at::Tensor x = at::randn({24, 40}).to(at::kBFloat16), bias = at::randn({40}).to(at::kBFloat16);
  auto program = [&] { return at::log_softmax(x * 2.0 + bias, -1); };
  auto kernels = learnAndPublish(program);
  ASSERT_EQ(kernels.size(), 1u) << engine().patternsJson();
  const at::Tensor want = eager(program);
  const int launchesBefore = kernels[0]->launches;
  at::Tensor got = program();
  EXPECT_EQ(kernels[0]->launches, launchesBefore);  // pending
  foreignCommand();
  EXPECT_EQ(kernels[0]->launches, launchesBefore + 1);
  EXPECT_EQ(got.scalar_type(), at::kBFloat16);
  EXPECT_LE(worstRelative(got, want), 1.0 / 64);
}

// A kernel that never launches (as a plan's guard refuses misaligned pointers).
class RefusingKernel final : public FusedChainKernel {
 public:
  bool launch(const std::vector<at::Tensor>&, const std::vector<at::Tensor>&, c10::Stream) noexcept override {
    ++refusals;
    return !refuse;
  }
  std::string describe() const override { return "refusing"; }
  int refusals = 0;
  bool refuse = true;
};

// Note [Relayout copies]: a copy whose kernel refuses the launch (a misaligned view) is replayed as a clone.
TEST_F(FusionEngineTest, GivenARelayoutCopyWhoseKernelRefusesWhenFlushedThenTheReplayedCopyHoldsTheValues) {
  const at::Tensor qkv = at::randn({2, 16, 3 * 4 * 8});
  const at::Tensor q = qkv.narrow(-1, 4 * 8 + 1, 4 * 8 - 1).view({2, 16, 4 * 8 - 1});
  const std::vector<HotChain> hot = learnHot([&] { return q.clone(); });
  ASSERT_EQ(hot.size(), 1u) << engine().patternsJson();
  ASSERT_TRUE(chain::isRelayoutCopy(hot[0].build));
  auto kernel = std::make_shared<RefusingKernel>();
  engine().publish(ReadyChain{hot[0].pattern, hot[0].build, kernel, hot[0].key});
  const at::Tensor want = eager([&] { return q.clone(); });
  const uint64_t deferredBefore = engine().stats().deferredCalls;
  at::Tensor got = q.clone();
  EXPECT_EQ(engine().stats().deferredCalls, deferredBefore + 1);
  at::Tensor again = q.clone();  // the next copy flushes the first and is deferred in turn
  foreignCommand();
  EXPECT_EQ(kernel->refusals, 2);
  EXPECT_TRUE(same(got, want));
  EXPECT_TRUE(same(again, want));
}

// Note [Retiring a chain that never launches]
TEST_F(FusionEngineTest, GivenAChainWhoseKernelKeepsRefusingWhenItRunsThenItIsRetiredAndItsCallsRunEagerly) {
  at::Tensor g = at::randn({32, 128}), u = at::randn({32, 128});
  const std::vector<HotChain> hot = learnHot([&] { return swiglu(g, u); });
  ASSERT_EQ(hot.size(), 1u);
  auto kernel = std::make_shared<RefusingKernel>();
  engine().publish(ReadyChain{hot[0].pattern, hot[0].build, kernel, hot[0].key});
  const at::Tensor want = eager([&] { return swiglu(g, u); });
  // A launch between refusals resets the count.
  for (int i = 0; i < 5; ++i) {
    at::Tensor out = swiglu(g, u);
    foreignCommand();
    EXPECT_TRUE(same(out, want));
  }
  kernel->refuse = false;
  { at::Tensor out = swiglu(g, u); foreignCommand(); }
  kernel->refuse = true;
  const uint64_t deferredBefore = engine().stats().deferredCalls;
  for (int i = 0; i < 7; ++i) {
    at::Tensor out = swiglu(g, u);
    foreignCommand();
    EXPECT_TRUE(same(out, want)) << i;  // replayed op by op: bitwise eager
  }
  EXPECT_EQ(engine().stats().retiredChains, 0u);
  EXPECT_EQ(engine().stats().readyChains, 1u);
  { at::Tensor out = swiglu(g, u); foreignCommand(); EXPECT_TRUE(same(out, want)); }  // the eighth in a row
  EXPECT_EQ(engine().stats().retiredChains, 1u);
  EXPECT_EQ(engine().stats().readyChains, 0u);
  EXPECT_EQ(engine().stats().deferredCalls, deferredBefore + 16);
  const int refusals = kernel->refusals;
  at::Tensor out = swiglu(g, u);
  EXPECT_EQ(engine().stats().deferredCalls, deferredBefore + 16);  // no longer deferred (only learned)
  foreignCommand();
  EXPECT_EQ(kernel->refusals, refusals);
  EXPECT_TRUE(same(out, want));
}

// Note [Views of a chain's values]: a view of a chain input is an input; a view of a result the chain has
// not computed yet is not, or the fused kernel would read it unwritten.
TEST_F(FusionEngineTest, GivenAViewOfAPendingResultWhenTheNextStepTakesItAsAnInputThenTheChainRunsFirst) {
  at::Tensor a = at::randn({32, 128}), b = at::randn({32, 128}), c = at::randn({32, 128}), d = at::randn({32, 128});
  std::vector<HotChain> hot;
  engine().setHotCallback([&](const HotChain& h) { hot.push_back(h); });
  foreignCommand();
  for (int i = 0; i < 3; ++i) {
    at::Tensor y = a * b;  // both held: a two-output chain whose second call reads a fresh input
    at::Tensor z = c + d;
    foreignCommand();
  }
  engine().setHotCallback(nullptr);
  ASSERT_EQ(hot.size(), 1u) << engine().patternsJson();
  auto kernel = std::make_shared<InterpreterKernel>(hot[0].build);
  engine().publish(ReadyChain{hot[0].pattern, hot[0].build, kernel, hot[0].key});
  at::Tensor y = a * b;  // deferred
  ASSERT_EQ(gGate->pending, 1);
  at::Tensor view = y.view({32, 128});  // the pattern's metadata for c, on y's unwritten memory
  at::Tensor z = view + d;
  foreignCommand();
  EXPECT_EQ(kernel->launches, 0);
  EXPECT_TRUE(same(y, eager([&] { return a * b; })));
  EXPECT_TRUE(same(z, eager([&] { return a * b + d; })));
}

// Random programs over the chain vocabulary with random boundaries and
// random intermediates held, compared with eager: every value a program
// returns equals eager's exactly when its chain ran unfused, and within the
// fused rounding when it ran fused.
TEST_F(FusionEngineTest, GivenRandomProgramsWhenRunRepeatedlyThenEveryResultMatchesEager) {
  std::mt19937 rng(11);
  int fusedRuns = 0, unfusedRuns = 0;
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
  for (int program = 0; program < 12; ++program) {
    engine().resetForTest();
    const at::ScalarType dtype = program % 3 == 0 ? at::kFloat : (program % 3 == 1 ? at::kBFloat16 : at::kHalf);
    const int64_t rows = 8 + pick(24), cols = 16 * (1 + pick(8));
    at::Tensor a = at::randn({rows, cols}).to(dtype), b = at::randn({rows, cols}).to(dtype);
    at::Tensor col = at::randn({cols}).to(dtype);
    const int length = 2 + pick(5);
    std::vector<int> ops;
    for (int i = 0; i < length; ++i) ops.push_back(pick(7));
    const int held = pick(length + 1);  // the step whose value is also returned (length: none)
    auto run = [&]() -> std::vector<at::Tensor> {
      std::vector<at::Tensor> kept;
      at::Tensor v = a;
      for (int i = 0; i < length; ++i) {
        switch (ops[static_cast<size_t>(i)]) {
          case 0: v = v * b; break;
          case 1: v = v + col; break;
          case 2: v = at::silu(v); break;
          case 3: v = v * 0.5; break;
          case 4: v = at::tanh(v); break;
          case 5: v = v.to(at::kFloat).to(dtype); break;
          default: v = at::sigmoid(v) - b; break;
        }
        if (i == held) kept.push_back(v);
      }
      kept.push_back(v);
      return kept;
    };
    std::vector<at::Tensor> want;
    {
      engine().setEnabled(false);
      want = run();
      engine().setEnabled(true);
    }
    auto kernels = learnAndPublish([&] { return run().back(); });
    for (int rep = 0; rep < 3; ++rep) {
      const uint64_t fusedBefore = engine().stats().fusedFlushes;
      std::vector<at::Tensor> got = run();
      foreignCommand();
      const bool fused = engine().stats().fusedFlushes > fusedBefore;
      (fused ? fusedRuns : unfusedRuns) += 1;
      ASSERT_EQ(got.size(), want.size());
      for (size_t i = 0; i < got.size(); ++i) {
        SCOPED_TRACE("program " + std::to_string(program) + " rep " + std::to_string(rep) + " value " +
                     std::to_string(i) + (fused ? " fused" : " unfused"));
        if (fused) {
          EXPECT_LE(worstRelative(got[i], want[i]), dtype == at::kFloat ? 1e-5 : 1.0 / 32);
        } else {
          EXPECT_TRUE(same(got[i], want[i]));
        }
      }
    }
    EXPECT_EQ(engine().stats().failedFlushes, 0u);
    foreignCommand();
    EXPECT_EQ(gGate->pending, 0);
  }
  // Both paths ran: chains whose values die fuse, chains with a held intermediate replay.
  EXPECT_GT(fusedRuns, 6);
  EXPECT_GT(unfusedRuns, 0);
}
