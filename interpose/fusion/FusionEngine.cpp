#include "hotkernel/interpose/FusionEngine.h"

#include <ATen/core/stack.h>
#include <c10/core/impl/VirtualGuardImpl.h>
#include <torch/library.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "hotkernel/interpose/BackendKey.h"
#include "CallCapture.h"
#include "ChainLearner.h"
#include "hotkernel/interpose/CommandGate.h"
#include "DeferrableOps.h"
#include "FusionEngineState.h"
#include "HookWait.h"
#include "PendingChain.h"
#include "hotkernel/runtime/CaptureSignal.h"
#include "hotkernel/runtime/DeferredCalls.h"
#include "hotkernel/runtime/Check.h"
#include "hotkernel/runtime/Logging.h"

namespace hotkernel::fusion {
namespace {

// Set while a trampoline runs an original kernel: the calls it makes (a
// composite op's own ops) go straight to their originals.
thread_local bool tInsideOriginal = false;

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


FusionEngine::FusionEngine(std::unique_ptr<CommandGate> gate, FusionOptions options)
    : state_(std::make_unique<State>(std::move(gate), options)) {
  state_->ops = resolveEngineOps(options.evalBatchNorm, options.inPlace, options.passConvolutions);
  state_->originals.resize(state_->ops.size());
  for (size_t i = 0; i < state_->ops.size(); ++i) state_->opIndex[&state_->ops[i].op->schema()] = i;
  state_->setCatalog(std::make_shared<ChainCatalog>());
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
  if (s.installed[k].load()) return;
  // An op without a kernel for this key (a CUDA library this torch was built without, cuDNN's batch norm on the
  // CPU key) is left alone.
  auto takenOver = [key](const ResolvedOp& r) {
    return r.flushing ? r.op->hasKernelForDispatchKey(key) : r.op->hasComputedKernelForDispatchKey(key);
  };
  for (size_t i = 0; i < s.ops.size(); ++i) {
    if (takenOver(s.ops[i])) s.originals[i][k] = s.ops[i].op->getComputedKernelForDispatchKey(key);
  }
  // Leaked: deregistering while serving is unsafe.
  auto* lib = new torch::Library(torch::Library::IMPL, "aten", key, __FILE__, __LINE__);
  size_t taken = 0;
  for (const ResolvedOp& r : s.ops) {
    if (!takenOver(r)) continue;
    const std::string name = r.qualified.substr(6);  // without "aten::"
    lib->impl(name.c_str(), torch::CppFunction::makeFromBoxedFunction<&boxedTrampoline>());
    ++taken;
  }
  s.installed[k].store(true, std::memory_order_release);
  HOTKERNEL_LOG(Info) << "fusion: " << taken << " deferrable, passing or flushing ops on " << c10::toString(key)
                      << (s.gate->covers() ? "" : " (learning only: the shim's command hook is not in the process)");
}

void FusionEngine::setHotCallback(HotCallback callback) {
  std::lock_guard<std::timed_mutex> guard(state_->mu);
  state_->onHot = std::move(callback);
}

void FusionEngine::setStreamProbe(StreamProbe probe) {
  std::lock_guard<std::timed_mutex> guard(state_->mu);
  state_->streamIdle = std::move(probe);
}

void FusionEngine::publish(ReadyChain chain) {
  std::lock_guard<std::timed_mutex> guard(state_->mu);
  state_->setCatalog(state_->catalog->with(std::move(chain)));
}

void FusionEngine::call(const c10::OperatorHandle& op, c10::DispatchKeySet ks, torch::jit::Stack* stack) {
  State& s = *state_;
  auto found = s.opIndex.find(&op.schema());
  HOTKERNEL_INTERNAL_ASSERT(found != s.opIndex.end(), "a fusion trampoline for an unknown op");
  const ResolvedOp& r = s.ops[found->second];
  const c10::DispatchKey key = installedKeyOf(ks, s.installed);
  const auto& original = s.originals[found->second][static_cast<size_t>(key)];
  TORCH_CHECK(original.has_value(), "hotkernel: no original ", r.qualified, " kernel for ", c10::toString(key));
  auto runOriginal = [&] {
    InsideOriginal inside;
    original->callBoxed(op, ks, stack);
  };
  if (tInsideOriginal || !enabled_.load(std::memory_order_relaxed) || !s.gate->covers()) return runOriginal();
  // Another backend's arguments (Note [The key a trampoline runs for]): not this engine's call.
  if (key != backendKeyOf(ks)) return runOriginal();
  if (r.flushing) {  // Note [Ops that flush first]: what is pending runs now, outside the library's calls
    std::unique_lock<std::timed_mutex> lock(s.mu);
    OwnCommands own(*s.gate);
    s.flushPending(*this);
    s.closeWindow();
    s.publishPending();
    lock.unlock();
    return runOriginal();
  }

  // The call's arguments in place on the stack: valid until the original runs (it pops them) or they are dropped.
  const c10::ArrayRef<c10::IValue> args(stack->data() + (stack->size() - r.functionalArgs), r.functionalArgs);
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

  if (r.passing) {  // Note [Ops a chain lets pass]
    bool flushed = true;
    try {
      flushed = s.letPass(*this, args, *device, stream);
    } catch (const std::exception& e) {
      return engineFailed(e.what());
    }
    s.publishPending();
    if (!flushed) lock.unlock();
    return runOriginal();  // inside the own-command guard: its launches do not flush what stays pending
  }

  // Deferral (Note [Deferring a chain]); with nothing pending, only a call of an op that starts a chain
  // may start one (Note [The chain catalog]).
  const bool continuing = s.pending && !s.pending->empty();
  bool starts = !continuing && s.startsChain[found->second] != 0;
  // Note [Idle streams]: a start on a stream with nothing queued runs eagerly (the probe is the engine's own command;
  // one that throws counts as busy: nothing leaves the trampoline).
  if (starts && s.options.defer && s.streamIdle) {
    bool idle = false;
    try {
      idle = s.streamIdle(stream);
    } catch (...) {
      HOTKERNEL_LOG_ONCE(Warn, "fusion-stream-probe") << "fusion: the stream probe failed; chains start as usual";
    }
    if (idle) {
      starts = false;
      s.idleStarts.fetch_add(1, std::memory_order_relaxed);
    }
  }
  if (s.options.defer && !s.catalog->chains().empty() && (continuing || starts)) {
    if (s.pending && (s.pending->device() != *device || s.pending->stream() != stream)) s.flushPending(*this);
    std::optional<std::vector<at::Tensor>> outputs;
    try {
      for (int attempt = 0; attempt < 2 && !outputs && enabled_.load(); ++attempt) {
        if (!s.pending) s.startPending(*device, stream, key);
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
      noteDeferredCall();  // Note [Deferred calls in the recorder]
      s.publishPending();
      torch::jit::drop(*stack, r.functionalArgs);
      for (at::Tensor& t : *outputs) torch::jit::push(*stack, std::move(t));
      return;
    }
    if (s.pending && s.pending->empty()) s.retirePending();
  } else if (s.pending) {
    s.flushPending(*this);
  }

  // Learning (Note [Learning chains]): the arguments outlive the original's call only in a learned window.
  // A skipped window learns nothing (Note [Sampled learning]).
  std::optional<std::vector<c10::IValue>> learned;
  if (!s.skipping) learned = args.vec();
  runOriginal();
  const size_t returns = op.schema().returns().size();
  bool tensors = stack->size() >= returns;
  for (size_t i = 0; tensors && i < returns; ++i) tensors = (*stack)[stack->size() - returns + i].isTensor();
  if (!tensors) {
    s.closeWindow();
  } else if (learned) {
    std::vector<at::Tensor> outs;
    for (size_t i = 0; i < returns; ++i) outs.push_back((*stack)[stack->size() - returns + i].toTensor());
    s.learnCall(r, *learned, *device, stream, outs);
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


}  // namespace hotkernel::fusion
