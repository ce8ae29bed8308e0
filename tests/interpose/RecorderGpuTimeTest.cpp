// The recorder's GPU-time attribution (Note [GPU time in the profile]) on the
// CPU, with a fake ActivitySource: a test RecordFunction callback, registered
// after the recorder's, "launches" a kernel inside chosen ops, so each kernel
// correlates to the innermost op the recorder pushed.
//
// The recorder is process-wide and takes one source per process: ctest runs
// each test in its own process; run alone, a test after the first skips.

#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <ATen/record_function.h>
#include <torch/csrc/autograd/profiler_legacy.h>

#include <fstream>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "hotkernel/interpose/Recorder.h"

#include "../JsonKeyCase.h"

namespace hotkernel {
namespace {

class FakeActivitySource final : public ActivitySource {
 public:
  FakeActivitySource(ActivityStart result, std::string takenOver)
      : result_(std::move(result)), takenOver_(std::move(takenOver)) {}

  ActivityStart start(ActivitySink* sink) override {
    std::lock_guard<std::mutex> g(mu_);
    sink_ = sink;
    ++starts_;
    return result_;
  }
  void pushExternalId(uint64_t id) override {
    std::lock_guard<std::mutex> g(mu_);
    stacks_[std::this_thread::get_id()].push_back(id);
    ++pushes_;
  }
  void popExternalId() override {
    std::lock_guard<std::mutex> g(mu_);
    auto& stack = stacks_[std::this_thread::get_id()];
    if (!stack.empty()) stack.pop_back();
    ++pops_;
  }
  // A kernel of `ns` launched now on this thread: correlated to the innermost pushed id, if any.
  void launch(uint64_t ns) {
    std::lock_guard<std::mutex> g(mu_);
    const uint32_t correlation = ++nextCorrelation_;
    const auto& stack = stacks_[std::this_thread::get_id()];
    if (!stack.empty()) pending_.correlations.push_back({correlation, stack.back()});
    pending_.kernels.push_back({correlation, 100, 100 + ns});
    ++pending_.apiRecords;  // the launch call's own record
  }
  void flush() override {
    std::lock_guard<std::mutex> g(mu_);
    if (sink_ != nullptr) sink_->onBatch(pending_);
    pending_ = ActivityBatch{};
  }
  std::string takenOver() override {
    std::lock_guard<std::mutex> g(mu_);
    return handOvers_ > 0 ? "handed over to the profiler" : takenOver_;
  }
  void handOver() override {
    std::lock_guard<std::mutex> g(mu_);
    ++handOvers_;
    sink_ = nullptr;  // delivers nothing more
  }
  int handOvers() {
    std::lock_guard<std::mutex> g(mu_);
    return handOvers_;
  }

  int starts() {
    std::lock_guard<std::mutex> g(mu_);
    return starts_;
  }
  int pushes() {
    std::lock_guard<std::mutex> g(mu_);
    return pushes_;
  }
  int pops() {
    std::lock_guard<std::mutex> g(mu_);
    return pops_;
  }

 private:
  const ActivityStart result_;
  const std::string takenOver_;
  std::mutex mu_;
  ActivitySink* sink_ = nullptr;
  std::map<std::thread::id, std::vector<uint64_t>> stacks_;
  ActivityBatch pending_;
  uint32_t nextCorrelation_ = 0;
  int starts_ = 0, pushes_ = 0, pops_ = 0, handOvers_ = 0;
};

FakeActivitySource* gFake = nullptr;  // the launching callback's source

// Runs after the recorder's start callback: aten::_softmax launches 1000 ns, aten::add 10 ns.
std::unique_ptr<at::ObserverContext> launchInside(const at::RecordFunction& fn) {
  const std::string name = fn.name();
  if (name == "aten::_softmax") gFake->launch(1000);
  if (name == "aten::add") gFake->launch(10);
  if (name == "aten::mm") gFake->launch(50);
  if (name == "hotkernel::fused_chain") gFake->launch(700);  // a flush inside another op's call
  if (name == "user::region") gFake->launch(5);
  return nullptr;
}

// The recorder started (p = 1) with `fake` as its source, or nullptr when this process configured one already.
FakeActivitySource* startWith(ActivityStart result, Recorder::GpuTimeStart when, std::string takenOver = "") {
  Recorder& r = Recorder::instance();
  r.start(1.0, /*hotCalls=*/1000000, [](const std::string&, const VariantKey&) {});
  auto fake = std::make_unique<FakeActivitySource>(std::move(result), std::move(takenOver));
  FakeActivitySource* raw = fake.get();
  if (!r.attributeGpuTime(std::move(fake), when)) return nullptr;
  gFake = raw;
  return raw;
}

// The recorder's profile written to a file of the test's temporary folder (writeProfile flushes the source
// first), read back.
nlohmann::json profileWritten(const std::string& file) {
  const std::string path = ::testing::TempDir() + "/" + file;
  if (!Recorder::instance().writeProfile(path)) {
    ADD_FAILURE() << "writeProfile failed for " << path;
    return nlohmann::json::object();
  }
  std::ifstream f(path);
  return nlohmann::json::parse(f);
}

const nlohmann::json* findOp(const nlohmann::json& profile, const std::string& op) {
  for (const auto& e : profile["ops"]) {
    if (e["op"] == op) return &e;
  }
  return nullptr;
}

TEST(RecorderGpuTimeTest, GivenAStartedSourceWhenOpsLaunchKernelsThenTheirGpuTimeLandsOnThoseOpsAndVariants) {
  FakeActivitySource* fake = startWith({ActivityStartState::Started, ""}, Recorder::GpuTimeStart::Now,
                                       "another CUPTI client took the records over");
  if (fake == nullptr) GTEST_SKIP() << "a source is configured in this process already: run this test alone";
  at::CallbackHandle handle = at::addGlobalCallback(at::RecordFunctionCallback(&launchInside));
  const at::Tensor x = at::randn({5, 7});
  for (int i = 0; i < 3; ++i) (void)at::_softmax(x, -1, false);
  for (int i = 0; i < 2; ++i) (void)at::add(x, x);
  fake->launch(500);  // outside any op: in the total only
  at::removeCallback(handle);
  EXPECT_TRUE(Recorder::instance().gpuAttributing());
  EXPECT_EQ(fake->starts(), 1);
  EXPECT_EQ(fake->pushes(), fake->pops());

  const nlohmann::json p = profileWritten("hk-gpu-profile.json");
  EXPECT_EQ(p["version"], 3);
  // Note [Profile versions]: the GPU time's keys are snake_case too.
  EXPECT_EQ(jsoncase::nonSnakeCaseKeys(p), std::vector<std::string>{}) << p.dump();
  ASSERT_TRUE(p.contains("gpu_time")) << p.dump();
  EXPECT_EQ(p["gpu_time"]["state"], "started");
  EXPECT_EQ(p["gpu_time"]["kernel_ns"], 3 * 1000 + 2 * 10 + 500);
  EXPECT_EQ(p["gpu_time"]["attributed_ns"], 3 * 1000 + 2 * 10);
  EXPECT_EQ(p["gpu_time"]["api_records"], 3 + 2 + 1);
  EXPECT_EQ(p["gpu_time"]["correlations"], 3 + 2);  // the launch outside any op has none
  EXPECT_EQ(p["gpu_time"]["taken_over"], "another CUPTI client took the records over");
  const nlohmann::json* softmax = findOp(p, "aten::_softmax");
  ASSERT_NE(softmax, nullptr) << p.dump();
  EXPECT_EQ((*softmax)["gpu_ns"], 3000);
  EXPECT_EQ((*softmax)["gpu_sampled_calls"], 3);
  EXPECT_DOUBLE_EQ((*softmax)["estimated_gpu_ns"].get<double>(), 3000.0);
  const nlohmann::json* add = findOp(p, "aten::add");
  ASSERT_NE(add, nullptr) << p.dump();
  EXPECT_EQ((*add)["gpu_ns"], 20);
  const nlohmann::json* randn = findOp(p, "aten::randn");
  ASSERT_NE(randn, nullptr) << p.dump();
  EXPECT_EQ((*randn)["gpu_ns"], 0);  // sampled, no kernel of its own
  int variants = 0;
  for (const auto& v : p["variants"]) {
    if (v["op"] == "aten::_softmax" && v["rows"] == 5 && v["cols"] == 7) {
      EXPECT_EQ(v["gpu_ns"], 3000) << v.dump();
      EXPECT_EQ(v["gpu_sampled_calls"], 3) << v.dump();
      ++variants;
    }
  }
  EXPECT_EQ(variants, 1);
}

TEST(RecorderGpuTimeTest, GivenAFusedChainFlushedInsideAnOpWhenItsKernelLaunchesThenItsTimeLandsOnTheChainsScope) {
  FakeActivitySource* fake = startWith({ActivityStartState::Started, ""}, Recorder::GpuTimeStart::Now);
  if (fake == nullptr) GTEST_SKIP() << "a source is configured in this process already: run this test alone";
  at::CallbackHandle handle = at::addGlobalCallback(at::RecordFunctionCallback(&launchInside));
  for (int i = 0; i < 2; ++i) {
    RECORD_FUNCTION("aten::mm", std::vector<c10::IValue>());  // the call whose arrival flushes the chain
    { RECORD_USER_SCOPE("hotkernel::fused_chain"); }           // Note [Flushes in the profiler]
  }
  { RECORD_USER_SCOPE("user::region"); }  // the program's own region: not an op of the profile
  at::removeCallback(handle);
  EXPECT_EQ(fake->pushes(), fake->pops());
  EXPECT_EQ(fake->pushes(), 4);  // mm and the chain's scope, twice; never the program's region
  const nlohmann::json p = profileWritten("hk-gpu-profile-scopes.json");
  const nlohmann::json* chain = findOp(p, "hotkernel::fused_chain");
  ASSERT_NE(chain, nullptr) << p.dump();
  EXPECT_EQ((*chain)["gpu_ns"], 2 * 700);
  EXPECT_EQ((*chain)["gpu_sampled_calls"], 2);
  const nlohmann::json* mm = findOp(p, "aten::mm");
  ASSERT_NE(mm, nullptr) << p.dump();
  EXPECT_EQ((*mm)["gpu_ns"], 2 * 50);  // its own kernels only
  EXPECT_EQ(findOp(p, "user::region"), nullptr) << p.dump();
  EXPECT_EQ(p["gpu_time"]["attributed_ns"], 2 * 700 + 2 * 50);
  EXPECT_EQ(p["gpu_time"]["kernel_ns"], 2 * 700 + 2 * 50 + 5);
}

// The PyTorch profiler on this thread (the legacy CPU one: it sets the same thread-local profiler state
// as torch.profiler) while `body` runs.
template <typename F>
void underThePyTorchProfiler(F&& body) {
  torch::autograd::profiler::enableProfilerLegacy(
      torch::profiler::impl::ProfilerConfig(torch::profiler::impl::ProfilerState::CPU));
  body();
  (void)torch::autograd::profiler::disableProfilerLegacy();
}

TEST(RecorderGpuTimeTest, GivenAttributingWhenThePyTorchProfilerStartsAndTookTheSourceThenItIsHandedOverOnce) {
  // Note [Handing CUPTI to the PyTorch profiler]: the source's probe says another client holds it.
  FakeActivitySource* fake = startWith({ActivityStartState::Started, ""}, Recorder::GpuTimeStart::Now,
                                       "another CUPTI client took the records over");
  if (fake == nullptr) GTEST_SKIP() << "a source is configured in this process already: run this test alone";
  at::CallbackHandle handle = at::addGlobalCallback(at::RecordFunctionCallback(&launchInside));
  const at::Tensor x = at::randn({5, 7});
  for (int i = 0; i < 2; ++i) (void)at::_softmax(x, -1, false);
  fake->flush();  // delivered before the profiler starts: kept in the profile
  const int pushesBefore = fake->pushes();
  EXPECT_GT(pushesBefore, 0);
  underThePyTorchProfiler([&] {
    for (int i = 0; i < 3; ++i) (void)at::_softmax(x, -1, false);
  });
  EXPECT_EQ(fake->handOvers(), 1);
  EXPECT_EQ(fake->pushes(), pushesBefore);  // nothing pushed once handed over
  EXPECT_FALSE(Recorder::instance().gpuAttributing());
  underThePyTorchProfiler([&] { (void)at::_softmax(x, -1, false); });  // a second session: no second hand-over
  (void)at::_softmax(x, -1, false);
  at::removeCallback(handle);
  EXPECT_EQ(fake->handOvers(), 1);
  EXPECT_EQ(fake->pushes(), fake->pops());

  const nlohmann::json p = profileWritten("hk-gpu-profile-handed-over.json");
  EXPECT_EQ(p["gpu_time"]["state"], "started");
  EXPECT_EQ(p["gpu_time"]["taken_over"], "handed over to the profiler");
  EXPECT_EQ(p["gpu_time"]["attributed_ns"], 2 * 1000);  // the softmaxes before the profiler only
}

TEST(RecorderGpuTimeTest, GivenAttributingWhenAProfilerWithoutCudaActivityRunsThenAttributionGoesOn) {
  // The probe finds no other client: a CPU-only profiler session leaves CUPTI to this source.
  FakeActivitySource* fake = startWith({ActivityStartState::Started, ""}, Recorder::GpuTimeStart::Now);
  if (fake == nullptr) GTEST_SKIP() << "a source is configured in this process already: run this test alone";
  at::CallbackHandle handle = at::addGlobalCallback(at::RecordFunctionCallback(&launchInside));
  const at::Tensor x = at::randn({5, 7});
  underThePyTorchProfiler([&] {
    for (int i = 0; i < 3; ++i) (void)at::_softmax(x, -1, false);
  });
  at::removeCallback(handle);
  EXPECT_EQ(fake->handOvers(), 0);
  EXPECT_TRUE(Recorder::instance().gpuAttributing());
  const nlohmann::json p = profileWritten("hk-gpu-profile-cpu-profiler.json");
  EXPECT_EQ(p["gpu_time"]["attributed_ns"], 3 * 1000);
  EXPECT_FALSE(p["gpu_time"].contains("taken_over")) << p.dump();
}

TEST(RecorderGpuTimeTest, GivenASourceHeldElsewhereWhenOpsRunThenNothingIsPushedAndTheProfileSaysWhy) {
  FakeActivitySource* fake = startWith({ActivityStartState::HeldElsewhere, "CUPTI is held by another tool"},
                                       Recorder::GpuTimeStart::Now);
  if (fake == nullptr) GTEST_SKIP() << "a source is configured in this process already: run this test alone";
  const at::Tensor x = at::randn({5, 7});
  for (int i = 0; i < 3; ++i) (void)at::_softmax(x, -1, false);
  EXPECT_FALSE(Recorder::instance().gpuAttributing());
  EXPECT_EQ(fake->pushes(), 0);
  const nlohmann::json p = Recorder::instance().profile();
  EXPECT_EQ(p["gpu_time"]["state"], "held-elsewhere");
  EXPECT_EQ(p["gpu_time"]["detail"], "CUPTI is held by another tool");
  EXPECT_FALSE(p["gpu_time"].contains("kernel_ns"));
  const nlohmann::json* softmax = findOp(p, "aten::_softmax");
  ASSERT_NE(softmax, nullptr);
  EXPECT_FALSE(softmax->contains("gpu_ns"));
}

TEST(RecorderGpuTimeTest, GivenStartAtTheFirstCudaOpWhenOnlyCpuOpsRunThenTheSourceIsNeverStarted) {
  FakeActivitySource* fake = startWith({ActivityStartState::Started, ""}, Recorder::GpuTimeStart::AtFirstCudaOp);
  if (fake == nullptr) GTEST_SKIP() << "a source is configured in this process already: run this test alone";
  const at::Tensor x = at::randn({5, 7});
  for (int i = 0; i < 3; ++i) (void)at::_softmax(x, -1, false);
  EXPECT_EQ(fake->starts(), 0);
  EXPECT_EQ(fake->pushes(), 0);
  EXPECT_EQ(Recorder::instance().profile()["gpu_time"]["state"], "pending");
}

}  // namespace
}  // namespace hotkernel
