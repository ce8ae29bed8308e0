// The shim's command wrappers (Note [Flush before foreign commands] in
// interpose/preload/CommandHook.h) against the fake libcudart.so.12 (linked)
// and libcuda.so.1 (dlopen'ed, as the runtime does), built from the shim's
// own tables (tests/interpose/fake/). The shim is this program's first
// dependency, so its definitions come first in the global scope, as under
// LD_PRELOAD.
#include <gtest/gtest.h>

#include <dlfcn.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "DriverCommands.h"
#include "FakeCuda.h"
#include "RuntimeCommands.h"
#include "hotkernel/hotkernel_shim.h"

extern "C" {
#define DECLARE_EXPORT(name, family) HK_CALL(DECLARE_EXPORT_, name, HK_SIG_##family)
#define DECLARE_EXPORT_(name, kind, n, types) int name HK_PARAMS(n, types);
HK_RUNTIME_EXPORTS(DECLARE_EXPORT)
HK_DRIVER_EXPORTS(DECLARE_EXPORT)
int cudaStreamBeginCapture(void* stream, int mode);
int cudaStreamEndCapture(void* stream, void** graph);
int cudaGetDriverEntryPoint(const char* symbol, void** funcPtr, HkU64 flags, void* status);
int cudaGetDriverEntryPointByVersion(const char* symbol, void** funcPtr, HkU32 version, HkU64 flags, void* status);
int hk_probe_value(void);
void* hk_probe_next(void);
}

namespace {

using Words = std::vector<unsigned long long>;

// A call of one entry point with distinct arguments derived from `seed`; the words the fake must record.
struct Command {
  const char* name;
  int kind;
  int (*call)(unsigned seed, Words* words);
};
struct PointerCommand {
  const char* entryPoint;
  int kind;
  int (*call)(void* fn, unsigned seed, Words* words);
};

#define DECLARE_VALUE(T, a) T a = fakeValue_##T(seed, ++k);
#define WORD(T, a) fakeWord_##T(a),
#define COMMAND(name, family) HK_CALL(COMMAND_, name, HK_SIG_##family)
#define COMMAND_(name, kind, n, types)                       \
  {#name, kind, [](unsigned seed, Words* words) -> int {     \
     int k = 0;                                              \
     (void)k;                                                \
     HK_EACH(n, DECLARE_VALUE, types)                        \
     *words = Words{HK_EACH(n, WORD, types)};                \
     return name HK_ARGS(n, types);                          \
   }},
#define POINTER_COMMAND(family) HK_CALL(POINTER_COMMAND_, family, HK_SIG_##family)
#define POINTER_COMMAND_(family, kind, n, types)                         \
  {#family, kind, [](void* fn, unsigned seed, Words* words) -> int {     \
     int k = 0;                                                          \
     (void)k;                                                            \
     HK_EACH(n, DECLARE_VALUE, types)                                    \
     *words = Words{HK_EACH(n, WORD, types)};                            \
     return reinterpret_cast<int(*) HK_PARAMS(n, types)>(fn) HK_ARGS(n, types); \
   }},

int beginCapture(unsigned seed, Words* words) {
  void* stream = fakeValue_HkPtr(seed, 1);
  const int mode = fakeValue_HkInt(seed, 2);
  *words = Words{fakeWord_HkPtr(stream), fakeWord_HkInt(mode)};
  return cudaStreamBeginCapture(stream, mode);
}
int endCapture(unsigned seed, Words* words) {
  void* stream = fakeValue_HkPtr(seed, 1);
  void** graph = static_cast<void**>(fakeValue_HkPtr(seed, 2));
  *words = Words{fakeWord_HkPtr(stream), fakeWord_HkPtr(graph)};
  return cudaStreamEndCapture(stream, graph);
}

const std::vector<Command>& runtimeCommands() {
  static const std::vector<Command> commands = {
      HK_RUNTIME_EXPORTS(COMMAND){"cudaStreamBeginCapture", HOTKERNEL_COMMAND_CAPTURE, beginCapture},
      {"cudaStreamEndCapture", HOTKERNEL_COMMAND_CAPTURE, endCapture}};
  return commands;
}
const std::vector<Command>& driverCommands() {
  static const std::vector<Command> commands = {HK_DRIVER_EXPORTS(COMMAND)};
  return commands;
}
const std::vector<PointerCommand>& driverEntryPoints() {
  static const std::vector<PointerCommand> commands = {HK_DRIVER_FAMILIES(POINTER_COMMAND)};
  return commands;
}

// The fake libcuda, opened by path as the runtime opens libcuda.so.1.
struct FakeDriver {
  void* handle = dlopen(FAKE_LIBCUDA_PATH, RTLD_NOW | RTLD_LOCAL);
  FakeLastFn last = reinterpret_cast<FakeLastFn>(dlsym(handle, "fakecuda_last"));
  FakeThreadCallsFn calls = reinterpret_cast<FakeThreadCallsFn>(dlsym(handle, "fakecuda_thread_calls"));
  FakeSetResultFn setResult = reinterpret_cast<FakeSetResultFn>(dlsym(handle, "fakecuda_set_result"));
  FakeOwnFn own = reinterpret_cast<FakeOwnFn>(dlsym(handle, "fakecuda_own"));
  FakeResolveFn resolve = reinterpret_cast<FakeResolveFn>(dlsym(handle, "fakecuda_resolve"));
  FakeNameFn name = reinterpret_cast<FakeNameFn>(dlsym(handle, "fakecuda_name"));
};
FakeDriver& driver() {
  static FakeDriver d;
  return d;
}

// The hook: counts per thread, with the kind and the fakes' call counts when it ran.
thread_local int t_hooks = 0;
thread_local int t_lastKind = 0;
thread_local long t_fakeCallsAtHook = -1;
std::atomic<int> g_hooksAll{0};
std::atomic<bool> g_hookIssuesCommands{false};

long fakeCalls() { return fakecudart_thread_calls() + driver().calls(); }

void countingHook(int kind) {
  ++t_hooks;
  ++g_hooksAll;
  t_lastKind = kind;
  t_fakeCallsAtHook = fakeCalls();
  if (g_hookIssuesCommands.load()) {
    // What a flush does: launch through the shim's own entry points.
    HkDim3 one = {1, 1, 1};
    EXPECT_EQ(cudaLaunchKernel(nullptr, one, one, nullptr, 0, nullptr), 0);
    EXPECT_EQ(cuLaunchKernel(nullptr, 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr, nullptr), 0);
  }
}

class CommandHookTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NE(driver().handle, nullptr) << dlerror();
    ASSERT_EQ(hotkernel_shim_command_hook_version(), HOTKERNEL_SHIM_COMMAND_HOOK_VERSION);
    hotkernel_shim_set_flush_hook(countingHook);
    hotkernel_shim_set_pending(0);
    t_hooks = 0;
    g_hookIssuesCommands = false;
  }
  void TearDown() override {
    hotkernel_shim_set_pending(0);
    hotkernel_shim_set_flush_hook(nullptr);
  }
};

// Calls `command`, checks it reached `expectName` of the fake with its arguments and result,
// and that the hook ran `hooks` times (before the forward, with the command's kind).
template <typename Call>
void expectForwarded(const std::string& what, const std::string& expectName, int kind, int hooks, bool runtime,
                     unsigned seed, Call call) {
  const int result = static_cast<int>(seed % 900) + 3;
  fakecudart_set_result(result);
  driver().setResult(result);
  const int hooksBefore = t_hooks;
  const long callsBefore = fakeCalls();
  Words words;
  EXPECT_EQ(call(seed, &words), result) << what;
  FakeCall last{};
  if (runtime) {
    fakecudart_last(&last);
  } else {
    driver().last(&last);
  }
  EXPECT_EQ(std::string(last.name), expectName) << what;
  EXPECT_EQ(Words(last.args, last.args + last.argc), words) << what;
  EXPECT_EQ(fakeCalls(), callsBefore + 1) << what;
  EXPECT_EQ(t_hooks - hooksBefore, hooks) << what;
  if (hooks > 0) {
    EXPECT_EQ(t_lastKind, kind) << what;
    EXPECT_EQ(t_fakeCallsAtHook, callsBefore) << what << ": the hook ran after the command";
  }
}

TEST_F(CommandHookTest, GivenNothingPendingWhenEveryRuntimeCommandRunsThenItIsForwardedWithItsArgumentsAndNoHook) {
  unsigned seed = 1;
  for (const Command& c : runtimeCommands()) {
    expectForwarded(c.name, c.name, c.kind, 0, true, seed++, c.call);
  }
}

TEST_F(CommandHookTest, GivenNothingPendingWhenEveryDriverCommandRunsBySymbolThenItIsForwardedAndNoHook) {
  unsigned seed = 1;
  for (const Command& c : driverCommands()) {
    expectForwarded(c.name, c.name, c.kind, 0, false, seed++, c.call);
  }
}

TEST_F(CommandHookTest, GivenAChainPendingWhenEveryRuntimeCommandRunsThenTheHookRunsOnceBeforeItWithItsKind) {
  hotkernel_shim_set_pending(1);
  unsigned seed = 7;
  for (const Command& c : runtimeCommands()) {
    expectForwarded(c.name, c.name, c.kind, 1, true, seed++, c.call);
  }
}

TEST_F(CommandHookTest, GivenAChainPendingWhenEveryDriverCommandRunsBySymbolThenTheHookRunsOnceBeforeIt) {
  hotkernel_shim_set_pending(2);
  unsigned seed = 7;
  for (const Command& c : driverCommands()) {
    expectForwarded(c.name, c.name, c.kind, 1, false, seed++, c.call);
  }
}

TEST_F(CommandHookTest, GivenCuGetProcAddressFromLibcudasHandleWhenItHandsOutCommandsThenEachIsWrappedAndHooked) {
  FakeDriver& d = driver();
  for (const char* getProc : {"cuGetProcAddress", "cuGetProcAddress_v2"}) {
    using GetProc = int (*)(const char*, void**, int, HkU64, void*);
    auto fn = reinterpret_cast<GetProc>(dlsym(d.handle, getProc));
    ASSERT_NE(fn, nullptr);
    EXPECT_NE(reinterpret_cast<void*>(fn), d.own(getProc)) << getProc << " handed out unwrapped";
    unsigned seed = 3;
    for (int version : {11000, 12000}) {
      for (HkU64 flags : {HkU64{0}, HkU64{FAKE_PER_THREAD_STREAM}}) {
        for (const PointerCommand& c : driverEntryPoints()) {
          void* raw = d.resolve(c.entryPoint, version, flags);
          ASSERT_NE(raw, nullptr) << c.entryPoint;
          void* handed = nullptr;
          ASSERT_EQ(fn(c.entryPoint, &handed, version, flags, nullptr), 0) << c.entryPoint;
          EXPECT_NE(handed, raw) << c.entryPoint << " handed out unwrapped";
          void* again = nullptr;
          ASSERT_EQ(fn(c.entryPoint, &again, version, flags, nullptr), 0);
          EXPECT_EQ(again, handed) << c.entryPoint << ": one function, one wrapper";
          const std::string what = std::string(getProc) + "(" + c.entryPoint + ", " + std::to_string(version) +
                                   ", " + std::to_string(flags) + ")";
          hotkernel_shim_set_pending(0);
          expectForwarded(what, d.name(raw), c.kind, 0, false, seed++,
                          [&](unsigned s, Words* w) { return c.call(handed, s, w); });
          hotkernel_shim_set_pending(1);
          expectForwarded(what, d.name(raw), c.kind, 1, false, seed++,
                          [&](unsigned s, Words* w) { return c.call(handed, s, w); });
        }
      }
    }
  }
  EXPECT_EQ(hotkernel_shim_unwrapped_entry_points(), 0);
}

TEST_F(CommandHookTest, GivenDlsymOnLibcudasHandleWhenACommandIsLookedUpThenTheWrapperComesBackAndOthersAreTheFakes) {
  FakeDriver& d = driver();
  hotkernel_shim_set_pending(1);
  unsigned seed = 11;
  for (const Command& c : driverCommands()) {
    void* fn = dlsym(d.handle, c.name);
    ASSERT_NE(fn, nullptr) << c.name;
    EXPECT_NE(fn, d.own(c.name)) << c.name << " handed out unwrapped";
    const PointerCommand* pc = nullptr;
    for (const PointerCommand& p : driverEntryPoints()) {
      if (std::string(c.name).rfind(p.entryPoint, 0) == 0 &&
          (!pc || std::string(p.entryPoint).size() > std::string(pc->entryPoint).size())) {
        pc = &p;
      }
    }
    ASSERT_NE(pc, nullptr) << c.name;
    expectForwarded(c.name, c.name, c.kind, 1, false, seed++,
                    [&](unsigned s, Words* w) { return pc->call(fn, s, w); });
  }
  // A name that is no command, and a lookup on another handle, are glibc's answers.
  EXPECT_EQ(dlsym(d.handle, "cuMemAlloc_v2"), d.own("cuMemAlloc_v2"));
  EXPECT_EQ(dlsym(d.handle, "fakecuda_own"), reinterpret_cast<void*>(d.own));
  void* self = dlopen(nullptr, RTLD_NOW);
  EXPECT_EQ(dlsym(self, "cuLaunchKernel"), reinterpret_cast<void*>(&cuLaunchKernel));
}

TEST_F(CommandHookTest, GivenCudaGetDriverEntryPointWhenTheRuntimeAnswersWithARawDriverFunctionThenItIsWrapped) {
  FakeDriver& d = driver();
  hotkernel_shim_set_pending(1);
  unsigned seed = 21;
  for (const PointerCommand& c : driverEntryPoints()) {
    void* raw = d.resolve(c.entryPoint, 12000, 0);
    void* byVersion = nullptr;
    ASSERT_EQ(cudaGetDriverEntryPointByVersion(c.entryPoint, &byVersion, 12000, 0, nullptr), 0) << c.entryPoint;
    EXPECT_NE(byVersion, raw) << c.entryPoint;
    void* plain = nullptr;
    ASSERT_EQ(cudaGetDriverEntryPoint(c.entryPoint, &plain, 0, nullptr), 0) << c.entryPoint;
    EXPECT_NE(plain, d.resolve(c.entryPoint, 13000, 0)) << c.entryPoint;
    expectForwarded(c.entryPoint, d.name(raw), c.kind, 1, false, seed++,
                    [&](unsigned s, Words* w) { return c.call(byVersion, s, w); });
  }
}

TEST_F(CommandHookTest, GivenTheOwnGuardWhenCommandsRunInsideItThenNoHookAndGuardsNest) {
  hotkernel_shim_set_pending(1);
  const Command& launch = runtimeCommands().front();
  hotkernel_shim_enter_own();
  hotkernel_shim_enter_own();
  expectForwarded("inside two guards", launch.name, launch.kind, 0, true, 1, launch.call);
  hotkernel_shim_leave_own();
  expectForwarded("inside one guard", launch.name, launch.kind, 0, true, 2, launch.call);
  hotkernel_shim_leave_own();
  expectForwarded("outside", launch.name, launch.kind, 1, true, 3, launch.call);
  // An unmatched leave changes nothing.
  hotkernel_shim_leave_own();
  expectForwarded("after an extra leave", launch.name, launch.kind, 1, true, 4, launch.call);
}

TEST_F(CommandHookTest, GivenAHookThatIssuesCommandsWhenACommandRunsThenTheHookRunsOnceAndItsCommandsAreForwarded) {
  hotkernel_shim_set_pending(1);
  g_hookIssuesCommands = true;
  fakecudart_set_result(0);
  driver().setResult(0);
  const long before = fakeCalls();
  const int hooksBefore = t_hooks;
  EXPECT_EQ(cudaStreamSynchronize(nullptr), 0);
  EXPECT_EQ(t_hooks - hooksBefore, 1);
  EXPECT_EQ(fakeCalls(), before + 3);  // the hook's two launches, then the synchronize
  FakeCall last{};
  fakecudart_last(&last);
  EXPECT_EQ(std::string(last.name), "cudaStreamSynchronize");
}

TEST_F(CommandHookTest, GivenNoHookWhenSomethingIsPendingThenCommandsAreForwarded) {
  hotkernel_shim_set_flush_hook(nullptr);
  hotkernel_shim_set_pending(1);
  const Command& c = driverCommands().front();
  expectForwarded(c.name, c.name, c.kind, 0, false, 5, c.call);
  EXPECT_EQ(hotkernel_shim_pending(), 1);
}

TEST_F(CommandHookTest, GivenThreadsWhenTheyIssueCommandsThenEachCommandHooksOnItsOwnThreadAndGuardsStayPerThread) {
  hotkernel_shim_set_pending(1);
  constexpr int kThreads = 8;
  constexpr int kCalls = 3000;
  const int allBefore = g_hooksAll.load();
  std::vector<int> hooks(kThreads, -1);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([t, &hooks] {
      const bool guarded = t % 4 == 3;
      if (guarded) hotkernel_shim_enter_own();
      t_hooks = 0;
      const auto& commands = t % 2 ? runtimeCommands() : driverCommands();
      Words words;
      for (int i = 0; i < kCalls; ++i) commands[static_cast<size_t>(i) % commands.size()].call(i, &words);
      hooks[t] = t_hooks;
      if (guarded) hotkernel_shim_leave_own();
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(hooks[t], t % 4 == 3 ? 0 : kCalls) << "thread " << t;
  EXPECT_EQ(g_hooksAll.load() - allBefore, (kThreads - 2) * kCalls);
}

// Note [Lookups on libcuda's handle]: glibc answers RTLD_NEXT relative to the
// caller, so the shim's dlsym must leave it the caller (NextProbeA.c's).
TEST_F(CommandHookTest, GivenALibraryLookingUpRtldNextThroughTheShimsDlsymThenItGetsTheDefinitionAfterItself) {
  EXPECT_EQ(hk_probe_value(), 1);
  auto next = reinterpret_cast<int (*)(void)>(hk_probe_next());
  ASSERT_NE(next, nullptr);
  EXPECT_EQ(next(), 2);
  Dl_info info;
  ASSERT_NE(dladdr(reinterpret_cast<void*>(&dlsym), &info), 0);
  EXPECT_NE(std::string(info.dli_fname).find("libhotkernel_preload.so"), std::string::npos) << info.dli_fname;
}

}  // namespace
