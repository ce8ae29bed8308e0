#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <ATen/record_function.h>

#include <fstream>
#include <mutex>
#include <thread>
#include <vector>

#include "hotkernel/interpose/Recorder.h"
#include "hotkernel/kernels/DType.h"
#include "hotkernel/kernels/GroupNormFamily.h"
#include "hotkernel/kernels/VariantOptions.h"
#include "hotkernel/runtime/DeferredCalls.h"
#include "hotkernel/runtime/IdleGate.h"

#include "../JsonKeyCase.h"

namespace hotkernel {
namespace {

// The recorder is process-wide and starts once: whichever test starts it
// sets the hook for every later test (and every later op). All tests here
// start it through this one function, whose hook collects every hot variant.
struct HotSink {
  std::mutex mu;
  std::vector<std::pair<std::string, VariantKey>> hot;  // Precondition: mu held
};

HotSink& startRecorderOnce() {
  static HotSink* sink = [] {
    auto* s = new HotSink();  // leaked: the hook may run during exit
    Recorder::instance().start(1.0, /*hotCalls=*/3, [s](const std::string& op, const VariantKey& key) {
      std::lock_guard<std::mutex> g(s->mu);
      s->hot.push_back({op, key});
    });
    return s;
  }();
  return *sink;
}

// How often `op` at [rows, cols] (CPU) became hot.
int hotCount(HotSink& sink, const std::string& op, int64_t rows, int64_t cols) {
  std::lock_guard<std::mutex> g(sink.mu);
  int n = 0;
  for (const auto& [o, k] : sink.hot) n += o == op && k.rows == rows && k.cols == cols && k.device == -1;
  return n;
}

TEST(RecorderTest, GivenRecorderWhenOpsRunThenVariantsCountedAndHotFiredOnce) {
  HotSink& sink = startRecorderOnce();
  Recorder& r = Recorder::instance();
  at::Tensor x = at::randn({5, 7});
  for (int i = 0; i < 6; ++i) (void)at::_softmax(x, -1, false);
  (void)at::_softmax(at::randn({2, 9}), -1, false);  // seen once: not hot

  EXPECT_EQ(hotCount(sink, "aten::_softmax", 5, 7), 1);
  EXPECT_EQ(hotCount(sink, "aten::_softmax", 2, 9), 0);
  nlohmann::json p = r.profile();
  EXPECT_EQ(p["format"], "hotkernel-profile");
  EXPECT_EQ(p["version"], 3);
  EXPECT_FALSE(p.contains("gpu_time"));  // HOTKERNEL_CUPTI unset
  // Note [Profile versions]: every key snake_case (the profile holds no map of data).
  EXPECT_EQ(jsoncase::nonSnakeCaseKeys(p), std::vector<std::string>{}) << p.dump();
  EXPECT_TRUE(p.contains("sampling_prob")) << p.dump();
  bool sawOp = false;
  for (const auto& op : p["ops"]) sawOp |= (op["op"] == "aten::_softmax" && op["sampled_calls"].get<int>() >= 7);
  EXPECT_TRUE(sawOp) << p.dump();
  int variants = 0;
  for (const auto& v : p["variants"]) {
    if (v["rows"] == 5 && v["cols"] == 7) {
      EXPECT_EQ(v["dtype"], "float32");
      EXPECT_GE(v["sampled_calls"].get<int>(), 6);
      ++variants;
    }
  }
  EXPECT_EQ(variants, 1);

  const std::string path = ::testing::TempDir() + "/hk-profile.json";
  ASSERT_TRUE(r.writeProfile(path));
  std::ifstream f(path);
  nlohmann::json back = nlohmann::json::parse(f);
  EXPECT_EQ(back["format"], "hotkernel-profile");
  EXPECT_FALSE(r.writeProfile("/nonexistent-dir/profile.json"));
}

int sampledCallsOf(const nlohmann::json& profile, const std::string& op) {
  for (const auto& o : profile["ops"]) {
    if (o["op"] == op) return o["sampled_calls"].get<int>();
  }
  return 0;
}

// Note [The optimizer's own ops]: a shape of this test's own, called past the
// hot threshold (3) on a thread marked as the optimizer's, then on this one.
TEST(RecorderTest, GivenOpsOnTheOptimizerThreadWhenRecordedThenTheyCountNowhereAndTurnNothingHot) {
  HotSink& sink = startRecorderOnce();
  Recorder& r = Recorder::instance();
  at::Tensor x = at::randn({3, 13});
  const VariantKey key{static_cast<int32_t>(kernels::DType::Float32), -1, 3, 13};
  const int before = sampledCallsOf(r.profile(), "aten::_log_softmax");
  std::thread optimizer([&] {
    IdleGate::ScopedOptimizerThread mark;
    for (int i = 0; i < 6; ++i) (void)at::_log_softmax(x, -1, false);
  });
  optimizer.join();

  EXPECT_DOUBLE_EQ(r.estimatedCalls("aten::_log_softmax", key), 0.0);
  EXPECT_EQ(hotCount(sink, "aten::_log_softmax", 3, 13), 0);
  EXPECT_EQ(sampledCallsOf(r.profile(), "aten::_log_softmax"), before);
  for (const auto& v : r.profile()["variants"]) EXPECT_FALSE(v["rows"] == 3 && v["cols"] == 13) << v.dump();

  // The same calls on a serving thread are recorded (the check above can fail).
  for (int i = 0; i < 6; ++i) (void)at::_log_softmax(x, -1, false);
  EXPECT_DOUBLE_EQ(r.estimatedCalls("aten::_log_softmax", key), 6.0);
  EXPECT_EQ(hotCount(sink, "aten::_log_softmax", 3, 13), 1);
  EXPECT_EQ(sampledCallsOf(r.profile(), "aten::_log_softmax"), before + 6);
}

// Each norm variant here is called at most twice (below the hot threshold of
// 3 that whichever test starts the recorder sets), and the shapes are this
// test's own.
TEST(RecorderTest, GivenNormOpsWhenRecordedThenVariantsCarryTheirWeightAndBiasFlags) {
  Recorder& r = Recorder::instance();
  (void)startRecorderOnce();
  at::Tensor x = at::randn({3, 2, 24});
  at::Tensor w = at::randn({24});
  at::Tensor b = at::randn({24});
  for (int i = 0; i < 2; ++i) (void)at::rms_norm(x, {24}, w, 1e-6);  // -> aten::_fused_rms_norm
  (void)at::layer_norm(x, {2, 24}, at::randn({2, 24}), at::randn({2, 24}), 1e-5);  // -> aten::native_layer_norm
  (void)at::layer_norm(x, {24}, std::nullopt, std::nullopt, 1e-5);
  (void)at::native_layer_norm(x, {24}, std::nullopt, b, 1e-5);

  VariantKey rms{static_cast<int32_t>(kernels::DType::Float32), -1, 6, 24};
  rms.options = kernels::variant_options::kWeight;
  EXPECT_DOUBLE_EQ(r.estimatedCalls("aten::_fused_rms_norm", rms), 2.0);
  VariantKey both{static_cast<int32_t>(kernels::DType::Float32), -1, 3, 48};
  both.options = kernels::variant_options::kWeight | kernels::variant_options::kBias;
  EXPECT_DOUBLE_EQ(r.estimatedCalls("aten::native_layer_norm", both), 1.0);
  VariantKey bare{static_cast<int32_t>(kernels::DType::Float32), -1, 6, 24};
  EXPECT_DOUBLE_EQ(r.estimatedCalls("aten::native_layer_norm", bare), 1.0);
  VariantKey biasOnly = bare;
  biasOnly.options = kernels::variant_options::kBias;
  EXPECT_DOUBLE_EQ(r.estimatedCalls("aten::native_layer_norm", biasOnly), 1.0);

  int seen = 0;
  const nlohmann::json profile = r.profile();
  for (const auto& v : profile["variants"]) {
    if (v["op"] == "aten::_fused_rms_norm" && v["rows"] == 6 && v["cols"] == 24) {
      EXPECT_EQ(v.value("weight", false), true) << v.dump();
      EXPECT_FALSE(v.contains("bias")) << v.dump();
      ++seen;
    } else if (v["op"] == "aten::native_layer_norm" && v["rows"] == 3 && v["cols"] == 48) {
      EXPECT_EQ(v.value("weight", false), true) << v.dump();
      EXPECT_EQ(v.value("bias", false), true) << v.dump();
      ++seen;
    } else if (v["op"] == "aten::native_layer_norm" && v["rows"] == 6 && v["cols"] == 24) {
      // Flags-less and bias-only: absent means false (Note [Profile format]).
      EXPECT_FALSE(v.contains("weight")) << v.dump();
      ++seen;
    }
  }
  EXPECT_EQ(seen, 4);
}

// Called once (below the hot threshold of 3), a shape of this test's own: F.group_norm's call keeps its groups and
// HxW, in the recorder and through the profile's "variant" (Note [Profile format]).
TEST(RecorderTest, GivenAGroupNormCallWhenRecordedThenTheProfileVariantSpellsTheWholeKey) {
  Recorder& r = Recorder::instance();
  (void)startRecorderOnce();
  (void)at::group_norm(at::randn({2, 8, 5, 3}), 4, at::randn({8}), at::randn({8}), 1e-5);
  const VariantKey key = kernels::groupNormKeyOf({kernels::DType::Float32, 8, 30, 4, 15, true, true}, -1);
  EXPECT_DOUBLE_EQ(r.estimatedCalls("aten::native_group_norm", key), 1.0);
  int seen = 0;
  const nlohmann::json profile = r.profile();
  for (const auto& v : profile["variants"]) {
    if (v["op"] != "aten::native_group_norm" || v["rows"] != 8 || v["cols"] != 30) continue;
    EXPECT_EQ(v.value("variant", ""), kernels::variantString(key)) << v.dump();
    EXPECT_EQ(v.value("variant", ""), "dtype=float32;rows=8;cols=30;more=4,15,1,1;weight=1;bias=1");
    ++seen;
  }
  EXPECT_EQ(seen, 1) << profile["variants"].dump();
}

// Called once each (below the hot threshold of 3), shapes of this test's own.
TEST(RecorderTest, GivenCrossEntropyCallsWhenRecordedThenVariantsCarryTheirReduction) {
  Recorder& r = Recorder::instance();
  (void)startRecorderOnce();
  at::Tensor x = at::randn({7, 19});
  at::Tensor t = at::randint(0, 19, {7}, at::kLong);
  (void)at::cross_entropy_loss(x, t);                                             // mean
  (void)at::cross_entropy_loss(x, t, std::nullopt, at::Reduction::None, -100, 0.0);
  (void)at::cross_entropy_loss(x, t, at::rand({19}), at::Reduction::Sum, -100, 0.0);  // weights: not served
  VariantKey mean{static_cast<int32_t>(kernels::DType::Float32), -1, 7, 19};
  mean.options = kernels::reductionOptions(at::Reduction::Mean);
  VariantKey none = mean;
  none.options = kernels::reductionOptions(at::Reduction::None);
  VariantKey sum = mean;
  sum.options = kernels::reductionOptions(at::Reduction::Sum);
  EXPECT_DOUBLE_EQ(r.estimatedCalls("aten::cross_entropy_loss", mean), 1.0);
  EXPECT_DOUBLE_EQ(r.estimatedCalls("aten::cross_entropy_loss", none), 1.0);
  EXPECT_DOUBLE_EQ(r.estimatedCalls("aten::cross_entropy_loss", sum), 0.0);
  int seen = 0;
  const nlohmann::json profile = r.profile();
  for (const auto& v : profile["variants"]) {
    if (v["op"] == "aten::cross_entropy_loss" && v["rows"] == 7 && v["cols"] == 19) {
      EXPECT_TRUE(v["reduction"] == "mean" || v["reduction"] == "none") << v.dump();
      ++seen;
    }
  }
  EXPECT_EQ(seen, 2);
}

// Note [Recording reductions]: sum / mean / amax / argmax / amin / argmin over the last dim
// are recorded under their overload-qualified names; other overloads and
// dims are not. Shapes are this test's own.
TEST(RecorderTest, GivenLastDimReductionsWhenRecordedThenOnlyServableCallsUnderTheirOverloadNames) {
  HotSink& sink = startRecorderOnce();
  const at::Tensor x = at::randn({3, 11, 37});
  for (int i = 0; i < 4; ++i) {
    (void)at::sum(x, {-1});
    (void)at::mean(x, {2}, /*keepdim=*/true);
    (void)at::amax(x, {-1});
    (void)at::argmax(x, -1);
    (void)at::amin(x, {-1});
    (void)at::argmin(x, 2, /*keepdim=*/true);
    (void)at::max(x, -1);
    (void)at::min(x, 2, /*keepdim=*/true);
  }
  for (const char* op : {"aten::sum.dim_IntList", "aten::mean.dim", "aten::amax", "aten::argmax", "aten::amin",
                         "aten::argmin", "aten::max.dim", "aten::min.dim"}) {
    EXPECT_EQ(hotCount(sink, op, 33, 37), 1) << op;
  }
  // Not servable, not recorded: a full sum, sum with dtype=, argmax(dim=None),
  // either dim of a transposed (non-contiguous) [4, 13].
  const at::Tensor y = at::randn({4, 13});
  const at::Tensor yt = at::randn({13, 4}).t();
  for (int i = 0; i < 4; ++i) {
    (void)at::sum(y);
    (void)at::sum(y, {-1}, false, at::kDouble);
    (void)at::argmax(y);
    (void)at::argmin(y);
    (void)at::sum(yt, {0});
    (void)at::sum(yt, {-1});
    (void)at::amin(yt, {0});
    (void)at::max(y);       // the full reduction: another overload
    (void)at::max(yt, -1);  // not contiguous
    (void)at::min(yt, 0);
  }
  int recorded = 0;
  const nlohmann::json profile = Recorder::instance().profile();  // alive through the loop
  for (const auto& v : profile["variants"]) {
    const std::string op = v["op"];
    if (op.rfind("aten::sum", 0) == 0 || op == "aten::argmax" || op == "aten::argmin" || op == "aten::amin" ||
        op == "aten::max.dim" || op == "aten::min.dim") {
      recorded += v["cols"] == 13 || v["cols"] == 4;
    }
  }
  EXPECT_EQ(recorded, 0);
}

// A middle-dim call (one dim that is not the last, contiguous) is recorded
// with its key's inner extent, in the profile too; two dims, dim=None,
// dtype= and a non-contiguous input are not. Shapes are this test's own.
TEST(RecorderTest, GivenMiddleDimReductionsWhenRecordedThenKeysAndProfileCarryTheInnerExtent) {
  HotSink& sink = startRecorderOnce();
  const at::Tensor x = at::randn({5, 9, 2, 3});
  for (int i = 0; i < 4; ++i) {
    (void)at::sum(x, {1});
    (void)at::mean(x, {-3}, /*keepdim=*/true);
    (void)at::amax(x, {1});
    (void)at::argmax(x, 1);
    (void)at::amin(x, {1}, /*keepdim=*/true);
    (void)at::argmin(x, -3);
    (void)at::max(x, 1);
    (void)at::min(x, -3, /*keepdim=*/true);
  }
  VariantKey want{static_cast<int32_t>(kernels::DType::Float32), -1, 5, 9};
  want.inner = 6;
  for (const char* op : {"aten::sum.dim_IntList", "aten::mean.dim", "aten::amax", "aten::argmax", "aten::amin",
                         "aten::argmin", "aten::max.dim", "aten::min.dim"}) {
    std::lock_guard<std::mutex> g(sink.mu);
    int n = 0;
    for (const auto& [o, k] : sink.hot) n += o == op && k == want;
    EXPECT_EQ(n, 1) << op;
  }
  // Not recorded: sum with dtype=, a non-contiguous input of the same extents
  // (either would count under the same key), two dims, argmax(dim=None).
  const at::Tensor nc = at::randn({9, 5, 6}).transpose(0, 1);  // [5, 9, 6]
  for (int i = 0; i < 4; ++i) {
    (void)at::sum(x, {1}, false, at::kDouble);
    (void)at::amax(nc, {1});
    (void)at::argmin(nc, 1);
    (void)at::sum(x, at::IntArrayRef{0, 1});
    (void)at::argmax(x);
  }
  EXPECT_DOUBLE_EQ(Recorder::instance().estimatedCalls("aten::sum.dim_IntList", want), 4.0);
  EXPECT_DOUBLE_EQ(Recorder::instance().estimatedCalls("aten::amax", want), 4.0);
  EXPECT_DOUBLE_EQ(Recorder::instance().estimatedCalls("aten::argmin", want), 4.0);
  int withInner = 0;
  const nlohmann::json profile = Recorder::instance().profile();  // alive through the loop
  for (const auto& v : profile["variants"]) {
    withInner += v.contains("inner") && v["rows"] == 5 && v["cols"] == 9 && v["inner"] == 6;
  }
  EXPECT_EQ(withInner, 8);
}

// One sampled call of aten::_softmax on `x` as the dispatcher records it; with `deferred`, the fusion engine
// takes it (Note [Deferred calls in the recorder]).
void softmaxCall(const at::Tensor& x, bool deferred) {
  RECORD_FUNCTION("aten::_softmax", std::vector<c10::IValue>({x, int64_t{-1}, false}));
  if (deferred) noteDeferredCall();
}

nlohmann::json variantEntry(const nlohmann::json& profile, int64_t rows, int64_t cols) {
  for (const auto& v : profile["variants"]) {
    if (v["op"] == "aten::_softmax" && v["rows"] == rows && v["cols"] == cols) return v;
  }
  return nullptr;
}

TEST(RecorderTest, GivenCallsTheFusionEngineDefersWhenRecordedThenTheyAreCountedApartAndTurnNothingHot) {
  HotSink& sink = startRecorderOnce();
  Recorder& r = Recorder::instance();
  const at::Tensor x = at::randn({11, 13});
  for (int i = 0; i < 5; ++i) softmaxCall(x, /*deferred=*/true);
  EXPECT_EQ(hotCount(sink, "aten::_softmax", 11, 13), 0);  // hotCalls is 3: deferred calls do not count
  nlohmann::json v = variantEntry(r.profile(), 11, 13);
  ASSERT_FALSE(v.is_null());
  EXPECT_EQ(v["sampled_calls"], 5);
  EXPECT_EQ(v["deferred_calls"], 5);
  EXPECT_DOUBLE_EQ(v["estimated_deferred_calls"].get<double>(), 5.0);

  // Three calls that run: hot once; the optimizer would rank them by the calls that ran.
  for (int i = 0; i < 3; ++i) softmaxCall(x, /*deferred=*/false);
  ASSERT_EQ(hotCount(sink, "aten::_softmax", 11, 13), 1);
  VariantKey key;
  {
    std::lock_guard<std::mutex> g(sink.mu);
    for (const auto& [o, k] : sink.hot) {
      if (o == "aten::_softmax" && k.rows == 11 && k.cols == 13) key = k;
    }
  }
  EXPECT_DOUBLE_EQ(r.estimatedCalls("aten::_softmax", key), 3.0);
  Recorder::CallsSinceHot since = r.callsSinceHot("aten::_softmax", key);
  EXPECT_EQ(since.sampled, 0u);  // counted from the call that turned it hot

  // Then chains take its calls (Note [Variants fused chains took]).
  for (int i = 0; i < 9; ++i) softmaxCall(x, /*deferred=*/true);
  since = r.callsSinceHot("aten::_softmax", key);
  EXPECT_EQ(since.sampled, 9u);
  EXPECT_EQ(since.deferred, 9u);
  EXPECT_TRUE(Recorder::takenByChains(since));
  EXPECT_DOUBLE_EQ(r.estimatedCalls("aten::_softmax", key), 3.0);

  // Rearmed: not hot, so no calls since; deferred calls keep it so, three that run make it hot again.
  const std::optional<Recorder::CallsSinceHot> cleared = r.rearm("aten::_softmax", key);
  ASSERT_TRUE(cleared.has_value());
  EXPECT_EQ(cleared->sampled, 9u);
  EXPECT_EQ(cleared->deferred, 9u);
  EXPECT_FALSE(r.rearm("aten::_softmax", key).has_value());
  EXPECT_EQ(r.callsSinceHot("aten::_softmax", key).sampled, 0u);
  for (int i = 0; i < 6; ++i) softmaxCall(x, /*deferred=*/true);
  softmaxCall(x, /*deferred=*/false);
  softmaxCall(x, /*deferred=*/false);
  EXPECT_EQ(hotCount(sink, "aten::_softmax", 11, 13), 1);
  softmaxCall(x, /*deferred=*/false);
  EXPECT_EQ(hotCount(sink, "aten::_softmax", 11, 13), 2);

  // The op's entry counts its deferred calls too.
  const nlohmann::json profile = r.profile();
  bool sawOp = false;
  for (const auto& op : profile["ops"]) {
    if (op["op"] == "aten::_softmax") sawOp = op.value("deferred_calls", 0) >= 20;
  }
  EXPECT_TRUE(sawOp) << profile["ops"].dump();
}

TEST(RecorderTest, GivenCallsSinceHotWhenJudgedThenTakenOnlyWithEnoughCallsMostlyDeferred) {
  EXPECT_FALSE(Recorder::takenByChains({0, 0}));
  EXPECT_FALSE(Recorder::takenByChains({7, 7}));  // too few to tell
  EXPECT_TRUE(Recorder::takenByChains({8, 8}));
  EXPECT_FALSE(Recorder::takenByChains({10, 8}));
  EXPECT_TRUE(Recorder::takenByChains({10, 9}));
}

}  // namespace
}  // namespace hotkernel
