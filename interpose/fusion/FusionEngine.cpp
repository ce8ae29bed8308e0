#include "hotkernel/interpose/FusionEngine.h"

#include <ATen/core/stack.h>
#include <c10/core/impl/VirtualGuardImpl.h>
#include <torch/library.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "CallCapture.h"
#include "ChainLearner.h"
#include "hotkernel/interpose/CommandGate.h"
#include "DeferrableOps.h"
#include "HookWait.h"
#include "PendingChain.h"
#include "hotkernel/runtime/CaptureSignal.h"
#include "hotkernel/runtime/Check.h"
#include "hotkernel/runtime/Logging.h"

namespace hotkernel::fusion {
namespace {

constexpr size_t kNumKeys = static_cast<size_t>(c10::DispatchKey::EndOfRuntimeBackendKeys) + 1;
// Set while a trampoline runs an original kernel: the calls it makes (a
// composite op's own ops) go straight to their originals.
thread_local bool tInsideOriginal = false;

using InsideOriginal = FusionBypass;

std::atomic<FusionEngine*> gProcessEngine{nullptr};
// The process engine's gate; set once with it, never freed.
std::atomic<CommandGate*> gProcessGate{nullptr};

void boxedTrampoline(const c10::OperatorHandle& op, c10::DispatchKeySet ks, torch::jit::Stack* stack) {
  FusionEngine* engine = gProcessEngine.load(std::memory_order_acquire);
  HOTKERNEL_INTERNAL_ASSERT(engine != nullptr, "a fusion trampoline without its engine");
  engine->call(op, ks, stack);
}

void shimHook(int kind) {
  FusionEngine* engine = gProcessEngine.load(std::memory_order_acquire);
  if (engine != nullptr) engine->onForeignCommand(kind);
}

}  // namespace

FusionBypass::FusionBypass() : previous_(tInsideOriginal) {
  tInsideOriginal = true;
  if (CommandGate* gate = gProcessGate.load(std::memory_order_acquire)) gate->enterOwn();
}

FusionBypass::~FusionBypass() {
  if (CommandGate* gate = gProcessGate.load(std::memory_order_acquire)) gate->leaveOwn();
  tInsideOriginal = previous_;
}

struct FusionEngine::State {
  std::unique_ptr<CommandGate> gate;
  FusionOptions options;
  std::vector<ResolvedOp> ops;
  std::unordered_map<c10::OperatorName, size_t> opIndex;  // into `ops`
  std::mutex installMu;
  // Written under installMu before a key's trampolines are registered; read-only afterwards.
  std::vector<std::array<std::optional<c10::SafeKernelFunction>, kNumKeys>> originals;
  std::array<bool, kNumKeys> installed{};

  // Note [The fusion engine's lock]
  std::timed_mutex mu;
  // Precondition for the members below: mu held.
  HotCallback onHot;
  ChainLearner learner;
  std::optional<c10::Device> windowDevice;
  std::optional<c10::Stream> windowStream;
  std::unique_ptr<PendingChain> pending;
  std::shared_ptr<const ChainCatalog> catalog = std::make_shared<ChainCatalog>();
  std::optional<std::thread::id> owner;
  std::string lastUnfused;  // FusionStats::lastUnfused
  // A copy of `owner` the hook reads without the lock; default-constructed (no thread) until it is set.
  std::atomic<std::thread::id> ownerId{};

  std::atomic<uint64_t> deferredCalls{0}, fusedFlushes{0}, unfusedFlushes{0}, failedFlushes{0}, windows{0},
      hotChains{0}, hookGaveUp{0}, engineErrors{0};

  State(std::unique_ptr<CommandGate> g, FusionOptions o)
      : gate(std::move(g)), options(o), learner(o.hotCalls, [this](const HotChain& hot) {
          hotChains.fetch_add(1, std::memory_order_relaxed);
          if (!onHot) return;
          HotChain located = hot;
          located.device = windowDevice && windowDevice->is_cuda() ? windowDevice->index() : -1;
          onHot(located);
        }) {}

  // Precondition: mu held.
  void publishPending() { gate->setPending((pending && !pending->empty()) || learner.open() ? 1 : 0); }

  // Precondition: mu held, inside the own-command guard.
  bool flushPending(FusionEngine& engine) {
    if (!pending || pending->empty()) {
      pending.reset();  // an empty chain holds the catalog of its time: never reused after a flush
      return true;
    }
    PendingChain::Flush how;
    {
      InsideOriginal inside;  // what the flush runs (copies, a test kernel's ops) is the engine's own
      how = pending->flush();
    }
    const std::string why = pending->lastUnfusedWhy();
    pending.reset();
    switch (how) {
      case PendingChain::Flush::Fused:
        fusedFlushes.fetch_add(1, std::memory_order_relaxed);
        return true;
      case PendingChain::Flush::Unfused:
        unfusedFlushes.fetch_add(1, std::memory_order_relaxed);
        if (!why.empty() && why != lastUnfused) {  // a repeated reason costs one comparison
          HOTKERNEL_LOG_ONCE(Info, "fusion-unfused:" + why) << "fusion: a chain ran unfused: " << why;
          lastUnfused = why;
        }
        return true;
      case PendingChain::Flush::Failed:
        failedFlushes.fetch_add(1, std::memory_order_relaxed);
        engine.enabled_.store(false);
        HOTKERNEL_LOG(Error) << "fusion: switched off for this process after a failed replay";
        return false;
    }
    return false;
  }

  // Appends a call that ran (or was deferred) with `outputs` to the learning
  // window; anything that cannot take part ends the window.
  // Precondition: mu held.
  void learnCall(const ResolvedOp& r, const std::vector<c10::IValue>& args, c10::Device device, c10::Stream stream,
                 const std::vector<at::Tensor>& outputs) noexcept {
    try {
      learnCallOrThrow(r, args, device, stream, outputs);
    } catch (const std::exception& e) {
      learner.drop();
      windowDevice.reset();
      windowStream.reset();
      HOTKERNEL_LOG_ONCE(Warn, "fusion-learn-error") << "fusion: a learning window was dropped: " << e.what();
    } catch (...) {
      learner.drop();
      windowDevice.reset();
      windowStream.reset();
    }
  }

  // Precondition: mu held.
  void learnCallOrThrow(const ResolvedOp& r, const std::vector<c10::IValue>& args, c10::Device device,
                        c10::Stream stream, const std::vector<at::Tensor>& outputs) {
    if (learner.open() && (windowDevice != device || windowStream != stream)) closeWindow();
    const bool plain = std::all_of(outputs.begin(), outputs.end(), [&](const at::Tensor& t) {
      return t.defined() && t.device() == device && t.layout() == c10::kStrided;
    });
    chain::RecordedCall call;
    call.op = r.qualified;
    if (!plain || !captureArgs(args, device, learner.values(), call).empty()) {
      closeWindow();
      return;
    }
    windowDevice = device;
    windowStream = stream;
    if (!learner.append(std::move(call), outputs)) {
      windows.fetch_add(1, std::memory_order_relaxed);
    } else if (learner.full()) {
      // A pending chain's references would make its values look live: such a window is not counted.
      if (pending && !pending->empty()) {
        learner.drop();
        windowDevice.reset();
        windowStream.reset();
      } else {
        closeWindow();
      }
    }
  }

  // Precondition: mu held.
  void closeWindow() noexcept {
    if (learner.open()) windows.fetch_add(1, std::memory_order_relaxed);
    try {
      learner.close();
    } catch (const std::exception& e) {
      learner.drop();
      HOTKERNEL_LOG_ONCE(Warn, "fusion-learn-error") << "fusion: a learning window was dropped: " << e.what();
    } catch (...) {
      learner.drop();
    }
    windowDevice.reset();
    windowStream.reset();
  }
};

FusionEngine::FusionEngine(std::unique_ptr<CommandGate> gate, FusionOptions options)
    : state_(std::make_unique<State>(std::move(gate), options)) {
  state_->ops = resolveDeferrableOps();
  state_->originals.resize(state_->ops.size());
  for (size_t i = 0; i < state_->ops.size(); ++i) state_->opIndex[state_->ops[i].op->operator_name()] = i;
}

FusionEngine::~FusionEngine() = default;

FusionEngine* FusionEngine::installProcessEngine(std::unique_ptr<CommandGate> gate, FusionOptions options) {
  static std::mutex mu;
  std::lock_guard<std::mutex> guard(mu);
  if (FusionEngine* existing = gProcessEngine.load()) return existing;
  auto* engine = new FusionEngine(std::move(gate), options);  // leaked: see the header
  gProcessGate.store(engine->state_->gate.get(), std::memory_order_release);
  gProcessEngine.store(engine, std::memory_order_release);
  engine->state_->gate->setFlushHook(&shimHook);
  return engine;
}

FusionEngine* FusionEngine::installWithShim(FusionOptions options) {
  return installProcessEngine(shimCommandGate(), options);
}

FusionEngine* FusionEngine::process() { return gProcessEngine.load(std::memory_order_acquire); }

void FusionEngine::install(c10::DispatchKey key) {
  const size_t k = static_cast<size_t>(key);
  HOTKERNEL_CHECK(k < kNumKeys, "dispatch key out of range");
  State& s = *state_;
  std::lock_guard<std::mutex> guard(s.installMu);
  if (s.installed[k]) return;
  for (size_t i = 0; i < s.ops.size(); ++i) s.originals[i][k] = s.ops[i].op->getComputedKernelForDispatchKey(key);
  // Leaked: deregistering while serving is unsafe.
  auto* lib = new torch::Library(torch::Library::IMPL, "aten", key, __FILE__, __LINE__);
  for (const ResolvedOp& r : s.ops) {
    const std::string name = r.qualified.substr(6);  // without "aten::"
    lib->impl(name.c_str(), torch::CppFunction::makeFromBoxedFunction<&boxedTrampoline>());
  }
  s.installed[k] = true;
  HOTKERNEL_LOG(Info) << "fusion: " << s.ops.size() << " deferrable ops on " << c10::toString(key)
                      << (s.gate->covers() ? "" : " (learning only: the shim's command hook is not in the process)");
}

void FusionEngine::setHotCallback(HotCallback callback) {
  std::lock_guard<std::timed_mutex> guard(state_->mu);
  state_->onHot = std::move(callback);
}

void FusionEngine::publish(ReadyChain chain) {
  std::lock_guard<std::timed_mutex> guard(state_->mu);
  state_->catalog = state_->catalog->with(std::move(chain));
}

void FusionEngine::call(const c10::OperatorHandle& op, c10::DispatchKeySet ks, torch::jit::Stack* stack) {
  State& s = *state_;
  auto found = s.opIndex.find(op.operator_name());
  HOTKERNEL_INTERNAL_ASSERT(found != s.opIndex.end(), "a fusion trampoline for an unknown op");
  const ResolvedOp& r = s.ops[found->second];
  const c10::DispatchKey key = ks.highestPriorityTypeId();
  const auto& original = s.originals[found->second][static_cast<size_t>(key)];
  TORCH_CHECK(original.has_value(), "hotkernel: no original ", r.qualified, " kernel for ", c10::toString(key));
  auto runOriginal = [&] {
    InsideOriginal inside;
    original->callBoxed(op, ks, stack);
  };
  if (tInsideOriginal || !enabled_.load(std::memory_order_relaxed) || !s.gate->covers()) return runOriginal();

  std::vector<c10::IValue> args(stack->end() - static_cast<std::ptrdiff_t>(r.functionalArgs), stack->end());
  const std::optional<c10::Device> device = callDevice(args);
  const std::thread::id self = std::this_thread::get_id();
  std::unique_lock<std::timed_mutex> lock(s.mu);
  OwnCommands own(*s.gate);
  if (!s.owner) {
    s.owner = self;
    s.ownerId.store(self);
  }
  const bool capturing = CaptureSignal::process().capturesInProgress() > 0;
  if (!device || *s.owner != self || capturing) {
    // Not learned, not deferred: what is pending runs first (this call may read it).
    if (!s.flushPending(*this)) {
      s.publishPending();
      lock.unlock();
      return runOriginal();
    }
    s.closeWindow();
    s.publishPending();
    lock.unlock();
    return runOriginal();
  }
  // An error of the engine itself (never of the original kernel, which runs
  // outside these blocks) switches fusion off for the process: what is
  // pending runs, the call runs its original, and the log says so once.
  auto engineFailed = [&](const char* what) {
    HOTKERNEL_LOG_ONCE(Warn, "fusion-engine-error")
        << "fusion: switched off for this process after an error in the engine (" << what
        << "); every op runs its ATen kernel";
    s.engineErrors.fetch_add(1);
    enabled_.store(false);
    s.flushPending(*this);
    s.closeWindow();
    s.publishPending();
    lock.unlock();
    runOriginal();
  };
  std::optional<c10::Stream> streamOf;
  try {
    streamOf = c10::impl::VirtualGuardImpl(device->type()).getStream(*device);
  } catch (const std::exception& e) {
    return engineFailed(e.what());
  }
  const c10::Stream stream = *streamOf;

  // Deferral (Note [Deferring a chain]).
  if (s.options.defer && !s.catalog->chains().empty()) {
    if (s.pending && (s.pending->device() != *device || s.pending->stream() != stream)) s.flushPending(*this);
    std::optional<std::vector<at::Tensor>> outputs;
    try {
      for (int attempt = 0; attempt < 2 && !outputs && enabled_.load(); ++attempt) {
        if (!s.pending) {
          s.pending = std::make_unique<PendingChain>(s.catalog, *device, stream, key, s.options.poisonDeferredOutputs);
        }
        const bool wasEmpty = s.pending->empty();
        outputs = s.pending->take(r, args);
        if (outputs || wasEmpty) break;
        s.flushPending(*this);  // the call does not continue the chain: it may start the next one
      }
    } catch (const std::exception& e) {
      // A call whose take threw is not in the chain (its outputs were never returned).
      return engineFailed(e.what());
    }
    if (outputs) {
      // The learner sees deferred calls too: a longer chain around a published one is learned
      // (Note [Learning chains]).
      s.learnCall(r, args, *device, stream, *outputs);
      s.deferredCalls.fetch_add(1, std::memory_order_relaxed);
      s.publishPending();
      torch::jit::drop(*stack, r.functionalArgs);
      for (at::Tensor& t : *outputs) torch::jit::push(*stack, std::move(t));
      return;
    }
    if (s.pending && s.pending->empty()) s.pending.reset();
  } else if (s.pending) {
    s.flushPending(*this);
  }

  // Learning (Note [Learning chains]).
  runOriginal();
  std::vector<at::Tensor> outs;
  const size_t returns = op.schema().returns().size();
  bool tensors = stack->size() >= returns;
  for (size_t i = 0; tensors && i < returns; ++i) {
    const c10::IValue& v = (*stack)[stack->size() - returns + i];
    tensors = v.isTensor();
    if (tensors) outs.push_back(v.toTensor());
  }
  if (tensors) {
    s.learnCall(r, args, *device, stream, outs);
  } else {
    s.closeWindow();
  }
  s.publishPending();
}

void FusionEngine::onForeignCommand(int kind) noexcept {
  State& s = *state_;
  std::unique_lock<std::timed_mutex> lock(s.mu, std::defer_lock);
  try {
    const bool owner = s.ownerId.load() == std::this_thread::get_id();
    const std::chrono::microseconds wait = hookWait(kind, owner);
    if (!lock.try_lock_for(wait)) {
      s.hookGaveUp.fetch_add(1, std::memory_order_relaxed);
      if (wait == kDataHookWait) {
        HOTKERNEL_LOG_ONCE(Error, "fusion-data-hook-gave-up")
            << "fusion: a CUDA command that may read data waited "
            << std::chrono::duration_cast<std::chrono::seconds>(wait).count()
            << " s for a flush on another thread and went on without it; it may have read a value its chain had "
               "not written. See Note [The fusion engine's lock] in FusionEngine.h";
      } else {
        HOTKERNEL_LOG_ONCE(Info, "fusion-hook-gave-up")
            << "fusion: a CUDA command did not wait for the engine, busy on another thread; see Note "
               "[The fusion engine's lock] in FusionEngine.h";
      }
      return;
    }
    OwnCommands own(*s.gate);
    s.flushPending(*this);
    s.closeWindow();
    s.publishPending();
  } catch (...) {
    HOTKERNEL_LOG_ONCE(Warn, "fusion-hook-error") << "fusion: an error in the command hook";
  }
}

void FusionEngine::flushAll() noexcept {
  State& s = *state_;
  try {
    std::lock_guard<std::timed_mutex> guard(s.mu);
    OwnCommands own(*s.gate);
    s.flushPending(*this);
    s.closeWindow();
    s.publishPending();
  } catch (...) {
    HOTKERNEL_LOG_ONCE(Warn, "fusion-flush-error") << "fusion: an error while flushing";
  }
}

void FusionEngine::setEnabled(bool enabled) noexcept {
  if (!enabled) {
    enabled_.store(false);
    flushAll();
  } else if (state_->failedFlushes.load() == 0 && state_->engineErrors.load() == 0) {
    enabled_.store(true);  // a process where a replay or the engine failed stays off (logged then)
  }
}

void FusionEngine::prepareFork() noexcept {
  flushAll();
  state_->mu.lock();
}

void FusionEngine::afterForkParent() noexcept { state_->mu.unlock(); }

void FusionEngine::afterForkChild() noexcept {
  state_->mu.unlock();
  enabled_.store(false);
  state_->gate->setPending(0);
}

FusionStats FusionEngine::stats() const {
  State& s = *state_;
  FusionStats out;
  out.deferredCalls = s.deferredCalls.load();
  out.fusedFlushes = s.fusedFlushes.load();
  out.unfusedFlushes = s.unfusedFlushes.load();
  out.failedFlushes = s.failedFlushes.load();
  out.windows = s.windows.load();
  out.hotChains = s.hotChains.load();
  out.hookGaveUp = s.hookGaveUp.load();
  {
    std::lock_guard<std::timed_mutex> guard(s.mu);
    out.readyChains = s.catalog->chains().size();
    out.lastUnfused = s.lastUnfused;
  }
  out.covered = s.gate->covers();
  return out;
}

std::string FusionEngine::patternsJson() const {
  State& s = *state_;
  constexpr size_t kMaxPatternsShown = 32;
  std::vector<std::pair<uint64_t, ChainLearner::PatternStats>> all;
  {
    std::lock_guard<std::timed_mutex> guard(s.mu);
    all.assign(s.learner.patterns().begin(), s.learner.patterns().end());
  }
  std::stable_sort(all.begin(), all.end(), [](const auto& a, const auto& b) { return a.second.seen > b.second.seen; });
  if (all.size() > kMaxPatternsShown) all.resize(kMaxPatternsShown);
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [digest, st] : all) {
    char hex[17];
    std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(digest));
    j[st.key.empty() ? std::string(hex) : st.key] = {
        {"seen", st.seen}, {"calls", st.calls}, {"reported", st.reported}, {"refusal", st.refusal}};
  }
  return j.dump();
}

void FusionEngine::resetForTest() {
  State& s = *state_;
  flushAll();
  std::lock_guard<std::timed_mutex> guard(s.mu);
  s.catalog = std::make_shared<ChainCatalog>();
  s.learner = ChainLearner(s.options.hotCalls, [this](const HotChain& hot) {
    State& st = *state_;
    st.hotChains.fetch_add(1, std::memory_order_relaxed);
    if (!st.onHot) return;
    HotChain located = hot;
    located.device = st.windowDevice && st.windowDevice->is_cuda() ? st.windowDevice->index() : -1;
    st.onHot(located);
  });
  s.owner.reset();
  s.ownerId.store(std::thread::id());
  s.deferredCalls = 0;
  s.fusedFlushes = 0;
  s.unfusedFlushes = 0;
  s.lastUnfused.clear();
  s.failedFlushes = 0;
  s.windows = 0;
  s.hotChains = 0;
  s.hookGaveUp = 0;
  s.engineErrors = 0;
  enabled_.store(true);
}

}  // namespace hotkernel::fusion
