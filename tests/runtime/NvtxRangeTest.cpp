// NVTX ranges around plan launches (Note [NVTX ranges around plan launches]),
// observed without a profiler: this program links an NVTX tool statically
// (NVTX's InitializeInjectionNvtx2_fnptr) that records the hotkernel domain's
// calls per thread, and loads its launchers on the fake driver of
// fake/FakeLaunchDriver.c, whose launches call back into the test, so that
// the order of push, launch and pop is seen. No GPU or libcuda needed.

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdint>

// This program defines the tool's pointer (below), so NVTX's implementation
// only declares it: NvtxInitializeInjectionNvtxFunc_t, spelled out before the header.
extern "C" int (*InitializeInjectionNvtx2_fnptr)(const void* (*)(uint32_t));
#define NVTX_STATIC_INJECTION_IMPL
#include <nvtx3/nvToolsExt.h>

#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "hotkernel/runtime/CudaKernelLauncher.h"
#include "hotkernel/runtime/NvtxRange.h"

namespace {

// What the tool saw. Lock: mu; every field below is guarded by it.
struct ToolRecord {
  std::mutex mu;
  std::map<std::string, int> domainsCreated;  // name -> times
  std::deque<std::string> registered;         // handle i + 1 -> its string
  std::vector<std::string> registeredIn;      // the domain's name of each registered string
  // Per thread, in order: "push:<name>", "launch", "pop".
  std::map<std::thread::id, std::vector<std::string>> events;
  std::deque<std::string> domains;  // a domain's handle: its element's address
};
ToolRecord tool;

std::string nameOf(const nvtxEventAttributes_t* a) {
  if (a->messageType == NVTX_MESSAGE_TYPE_REGISTERED) {
    const auto index = reinterpret_cast<uintptr_t>(a->message.registered);
    return index >= 1 && index <= tool.registered.size() ? tool.registered[index - 1] : "<bad handle>";
  }
  if (a->messageType == NVTX_MESSAGE_TYPE_ASCII) return std::string("ascii:") + a->message.ascii;
  return "<unnamed>";
}

nvtxDomainHandle_t toolDomainCreateA(const char* name) {
  std::lock_guard<std::mutex> lock(tool.mu);
  ++tool.domainsCreated[name];
  for (std::string& known : tool.domains) {
    if (known == name) return reinterpret_cast<nvtxDomainHandle_t>(&known);
  }
  tool.domains.emplace_back(name);  // a deque: the element's address is its handle
  return reinterpret_cast<nvtxDomainHandle_t>(&tool.domains.back());
}

std::string domainName(nvtxDomainHandle_t domain) { return *reinterpret_cast<const std::string*>(domain); }

nvtxStringHandle_t toolRegisterStringA(nvtxDomainHandle_t domain, const char* text) {
  std::lock_guard<std::mutex> lock(tool.mu);
  tool.registered.emplace_back(text);
  tool.registeredIn.push_back(domainName(domain));
  return reinterpret_cast<nvtxStringHandle_t>(static_cast<uintptr_t>(tool.registered.size()));
}

int toolRangePushEx(nvtxDomainHandle_t domain, const nvtxEventAttributes_t* a) {
  std::lock_guard<std::mutex> lock(tool.mu);
  tool.events[std::this_thread::get_id()].push_back("push:" + domainName(domain) + ":" + nameOf(a));
  return 0;
}

int toolRangePop(nvtxDomainHandle_t domain) {
  std::lock_guard<std::mutex> lock(tool.mu);
  tool.events[std::this_thread::get_id()].push_back("pop:" + domainName(domain));
  return 0;
}

void onLaunch() {
  std::lock_guard<std::mutex> lock(tool.mu);
  tool.events[std::this_thread::get_id()].push_back("launch");
}

template <typename Fn>
void attach(NvtxFunctionTable table, unsigned size, unsigned id, Fn fn) {
  ASSERT_LT(id, size);
  *table[id] = reinterpret_cast<NvtxFunctionPointer>(fn);
}

int toolInit(NvtxGetExportTableFunc_t getExportTable) {
  const auto* callbacks = static_cast<const NvtxExportTableCallbacks*>(getExportTable(NVTX_ETID_CALLBACKS));
  NvtxFunctionTable table = nullptr;
  unsigned size = 0;
  if (!callbacks || !callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &table, &size)) return 0;
  attach(table, size, NVTX_CBID_CORE2_DomainCreateA, toolDomainCreateA);
  attach(table, size, NVTX_CBID_CORE2_DomainRegisterStringA, toolRegisterStringA);
  attach(table, size, NVTX_CBID_CORE2_DomainRangePushEx, toolRangePushEx);
  attach(table, size, NVTX_CBID_CORE2_DomainRangePop, toolRangePop);
  return 1;
}

}  // namespace

// The statically linked tool NVTX finds at its first call (nvtxInit.h).
extern "C" {
NvtxInitializeInjectionNvtxFunc_t InitializeInjectionNvtx2_fnptr = &toolInit;
}

namespace hotkernel {
namespace {

using FakeCount = unsigned long long (*)();
using FakeStatus = void (*)(int);
using FakeHook = void (*)(void (*)());

struct FakeDriver {
  FakeCount launches = nullptr;
  FakeStatus setLaunchStatus = nullptr;
};

// The fake libcuda.so.1, loaded by path before the runtime asks for the soname.
const FakeDriver& fakeDriver() {
  static const FakeDriver d = [] {
    FakeDriver f;
    void* h = ::dlopen(HK_FAKE_DRIVER_PATH, RTLD_NOW | RTLD_GLOBAL);
    if (!h) return f;
    f.launches = reinterpret_cast<FakeCount>(::dlsym(h, "hk_fake_driver_launches"));
    f.setLaunchStatus = reinterpret_cast<FakeStatus>(::dlsym(h, "hk_fake_driver_set_launch_status"));
    if (auto hook = reinterpret_cast<FakeHook>(::dlsym(h, "hk_fake_driver_set_launch_hook"))) hook(&onLaunch);
    return f;
  }();
  return d;
}

class NvtxRangeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NE(fakeDriver().launches, nullptr) << "cannot load " << HK_FAKE_DRIVER_PATH << ": " << ::dlerror();
    fakeDriver().setLaunchStatus(0);
    setNvtxRanges(true);
    std::lock_guard<std::mutex> lock(tool.mu);
    tool.events.clear();
  }
  void TearDown() override { fakeDriver().setLaunchStatus(0); }

  static std::shared_ptr<CudaKernelLauncher> load(const std::string& description) {
    return CudaKernelLauncher::load(0, "not an image the fake driver reads", "hk_test", LaunchGeometry{4, 128, 0},
                                    16, description);
  }
  static std::vector<std::string> eventsOfThisThread() {
    std::lock_guard<std::mutex> lock(tool.mu);
    return tool.events[std::this_thread::get_id()];
  }
  static int timesRegistered(const std::string& text) {
    std::lock_guard<std::mutex> lock(tool.mu);
    int n = 0;
    for (size_t i = 0; i < tool.registered.size(); ++i) n += tool.registered[i] == text && tool.registeredIn[i] == "hotkernel";
    return n;
  }
};

const RowKernelArgs kRow{reinterpret_cast<const void*>(0x1000), reinterpret_cast<void*>(0x2000), 8, 64};

TEST_F(NvtxRangeTest, GivenRangesOnWhenALauncherLoadsThenItsDescriptionIsRegisteredOnceInTheHotkernelDomain) {
  const std::string description = "softmax[threads=256 vec=8 items=4] for dtype=bf16;rows=8;cols=64 (load)";
  const auto launcher = load(description);
  EXPECT_EQ(timesRegistered(description), 1);
  launcher->launch(kRow, nullptr);
  launcher->launch(kRow, nullptr);
  EXPECT_EQ(timesRegistered(description), 1) << "a launch registers nothing";
  std::lock_guard<std::mutex> lock(tool.mu);
  EXPECT_EQ(tool.domainsCreated["hotkernel"], 1);
}

TEST_F(NvtxRangeTest, GivenALoadedPlanWhenLaunchedThenEachLaunchRunsInsideOneRangeNamedByTheDescription) {
  const std::string description = "rms_norm[threads=128 vec=4] for dtype=f32;rows=8;cols=64;weight=1";
  const auto launcher = load(description);
  const unsigned long long before = fakeDriver().launches();
  ASSERT_TRUE(launcher->launch(kRow, nullptr));
  ASSERT_TRUE(launcher->launchArgs(KernelArgs().pointer(kRow.in).pointer(kRow.out).int64(8).int64(64), nullptr));
  ASSERT_TRUE(launcher->launch(kRow, nullptr));
  EXPECT_EQ(fakeDriver().launches() - before, 3u);
  const std::string push = "push:hotkernel:" + description;
  const std::vector<std::string> expected = {push, "launch", "pop:hotkernel", push, "launch", "pop:hotkernel",
                                             push, "launch", "pop:hotkernel"};
  EXPECT_EQ(eventsOfThisThread(), expected);
}

TEST_F(NvtxRangeTest, GivenRangesOffWhenALauncherLoadsAndLaunchesThenNothingIsRegisteredOrPushed) {
  setNvtxRanges(false);
  EXPECT_FALSE(nvtxRangesEnabled());
  const std::string description = "layer_norm[threads=64] for dtype=f16;rows=8;cols=64 (off)";
  const auto launcher = load(description);
  ASSERT_TRUE(launcher->launch(kRow, nullptr));
  EXPECT_EQ(timesRegistered(description), 0);
  EXPECT_EQ(eventsOfThisThread(), std::vector<std::string>{"launch"});
}

TEST_F(NvtxRangeTest, GivenLaunchersLoadedEitherWayWhenTheSettingChangesThenEachKeepsTheOneItWasLoadedWith) {
  setNvtxRanges(false);
  const auto off = load("reduce[off] for dtype=f32;rows=8;cols=64");
  setNvtxRanges(true);
  const auto on = load("reduce[on] for dtype=f32;rows=8;cols=64");
  setNvtxRanges(false);
  ASSERT_TRUE(off->launch(kRow, nullptr));
  ASSERT_TRUE(on->launch(kRow, nullptr));
  const std::vector<std::string> expected = {"launch", "push:hotkernel:reduce[on] for dtype=f32;rows=8;cols=64",
                                             "launch", "pop:hotkernel"};
  EXPECT_EQ(eventsOfThisThread(), expected);
}

TEST_F(NvtxRangeTest, GivenAFailingLaunchWhenLaunchedThenItReportsTheFailureAndTheRangeIsClosed) {
  const auto launcher = load("cross_entropy[fail] for dtype=bf16;rows=8;cols=64");
  fakeDriver().setLaunchStatus(1);  // CUDA_ERROR_INVALID_VALUE
  EXPECT_FALSE(launcher->launch(kRow, nullptr));
  const std::vector<std::string> expected = {"push:hotkernel:cross_entropy[fail] for dtype=bf16;rows=8;cols=64",
                                             "launch", "pop:hotkernel"};
  EXPECT_EQ(eventsOfThisThread(), expected);
}

TEST_F(NvtxRangeTest, GivenTheHarnessGeometryPathWhenLaunchedThenNoRange) {
  const auto launcher = load("softmax[harness] for dtype=f32;rows=8;cols=64");
  EXPECT_TRUE(launcher->launchWith(kRow, nullptr, LaunchGeometry{1, 32, 0}));
  EXPECT_EQ(launcher->launchStatus(KernelArgs().pointer(kRow.in).pointer(kRow.out).int64(8).int64(64), nullptr,
                                   LaunchGeometry{1, 32, 0}),
            CUDA_SUCCESS);
  EXPECT_EQ(eventsOfThisThread(), (std::vector<std::string>{"launch", "launch"}));
}

TEST_F(NvtxRangeTest, GivenLaunchesFromSeveralThreadsWhenTheyRunThenEachThreadSeesItsOwnBalancedRanges) {
  const std::string description = "softmax[threads] for dtype=f32;rows=8;cols=64";
  const auto launcher = load(description);
  constexpr int kThreads = 4, kLaunches = 200;
  std::vector<std::thread> threads;
  std::vector<std::thread::id> ids(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      ids[t] = std::this_thread::get_id();
      for (int i = 0; i < kLaunches; ++i) launcher->launch(kRow, nullptr);
    });
  }
  for (auto& t : threads) t.join();
  std::lock_guard<std::mutex> lock(tool.mu);
  for (const std::thread::id& id : ids) {
    const std::vector<std::string>& events = tool.events[id];
    ASSERT_EQ(events.size(), 3u * kLaunches);
    for (size_t i = 0; i < events.size(); i += 3) {
      EXPECT_EQ(events[i], "push:hotkernel:" + description);
      EXPECT_EQ(events[i + 1], "launch");
      EXPECT_EQ(events[i + 2], "pop:hotkernel");
    }
  }
}

TEST(NvtxRangeNameTest, GivenADefaultNameWhenPushedAndPoppedThenNothingReachesTheTool) {
  {
    std::lock_guard<std::mutex> lock(tool.mu);
    tool.events.clear();
  }
  const NvtxRangeName none;
  EXPECT_FALSE(none.active());
  { const NvtxScope scope(none); }
  std::lock_guard<std::mutex> lock(tool.mu);
  EXPECT_TRUE(tool.events[std::this_thread::get_id()].empty());
}

}  // namespace
}  // namespace hotkernel
