#pragma once
// The chain-fusion engine of a process (issue 20): trampolines on the
// deferrable ops that learn hot chains and defer the calls of chains that
// have a validated fused kernel, flushed by the next call that does not
// continue them or by any command hotkernel does not issue (the shim's
// hook). On unless HOTKERNEL_FUSION=0.
//
// Note [The fusion engine's lock]
// One mutex guards the learner, the pending chain and the catalog pointer.
// The thread that serves the deferrable ops (the first one to call one, the
// owner) takes it for the length of a call; a call on another thread flushes
// what is pending and runs its original kernel, neither learned nor deferred.
// The shim's hook takes the lock by trying for a bounded time, which
// depends on the command's kind and thread (HookWait.h):
//   - a launch, copy, memset, graph launch, capture, host callback or stream
//     memory op, on any thread: 10 s. When another thread holds the lock it
//     is usually flushing a pending chain (its call flushes what is pending),
//     which such a command may read: the owner's own `.item()` copy, or
//     another thread's copy of a tensor the owner handed it. It must wait
//     until those kernels are launched. These commands are never issued
//     under a lock a flush takes; the bound only breaks a deadlock nobody
//     expects, and giving up there is an error in the log.
//   - an event record, stream wait, synchronize or query: 50 ms on the
//     owner, 500 us on another thread. The caching allocator issues these
//     under its own mutex, which a flush or a taken call (an output's
//     allocation) may need, so an unbounded wait could deadlock; a flush
//     takes far less than 50 ms, and another thread's events wait the least
//     because the owner takes that mutex inside the lock on every call.
// A hook that gives up is counted (hookGaveUp) and said once in the log.
// Everything done under the lock is inside the
// shim's own-command guard, so it never calls the hook itself.

#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/DispatchKey.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "hotkernel/interpose/ChainCatalog.h"
#include "hotkernel/interpose/FusionBypass.h"

namespace hotkernel::fusion {

class CommandGate;

struct FusionStats {
  uint64_t deferredCalls = 0;   // calls taken into a chain
  uint64_t fusedFlushes = 0;    // chains run as one fused kernel
  uint64_t unfusedFlushes = 0;  // chains replayed call by call
  uint64_t failedFlushes = 0;   // replays that threw (fusion is then off)
  uint64_t windows = 0;         // learning windows counted
  uint64_t hotChains = 0;       // chains reported hot
  uint64_t readyChains = 0;     // chains in the catalog
  uint64_t hookGaveUp = 0;      // hook calls that could not take the lock in time
  uint64_t passedCalls = 0;     // GEMMs and convolutions run while a chain stayed pending (Note [Ops a chain lets pass])
  uint64_t retiredChains = 0;   // chains taken out of the catalog (Note [Retiring a chain that never launches])
  uint64_t idleStarts = 0;      // chain starts run eagerly: the stream had nothing queued (Note [Idle streams])
  bool covered = false;         // the shim's hook covers every command (deferral possible)
  std::string lastUnfused;      // why the latest unfused flush did not fuse ("" before any)
};

struct FusionOptions {
  int64_t hotCalls = 50;  // windows of one pattern before it is hot
  bool defer = true;      // false: learn only
  // Tests: every deferred output is filled with NaN when it is allocated, so
  // that a read of memory the chain never wrote shows as NaN (the fuzz suite);
  // off in a serving process.
  bool poisonDeferredOutputs = false;
  // Note [Sampled learning]: once learnOneWindowIn * hotCalls windows in a
  // row taught nothing new, about one window in learnOneWindowIn is learned until
  // one does; 1: every window.
  int64_t learnOneWindowIn = 8;
  // Note [Eval BatchNorm in a chain]: eval native_batch_norm and cudnn_batch_norm calls join chains too (Note
  // [cuDNN's batch norm in a chain]; without it cudnn_batch_norm calls flush first)
  // (HOTKERNEL_FUSION_BATCH_NORM, on in a serving process by default; off here unless asked for).
  bool evalBatchNorm = false;
  // Note [In-place steps]: in-place pointwise ops (relu_, add_.Tensor, ...) on a pending value extend its chain
  // (HOTKERNEL_FUSION_IN_PLACE, on in a serving process by default; off here unless asked for).
  bool inPlace = false;
  // Note [Ops a chain lets pass]: a convolution that reads no pending value runs while the chain stays pending
  // (HOTKERNEL_FUSION_PASS_CONVOLUTIONS, on in a serving process by default; off here unless asked for: a cuDNN
  // convolution then flushes first).
  bool passConvolutions = false;
};

// Note [Idle streams]
// A deferred chain's GPU work is issued at its flush, not call by call. When
// the host runs ahead of the GPU that costs nothing: the stream's queue holds
// earlier work while the chain is pending. When the GPU has caught up (a
// host-bound stretch: small shapes, a model that waits for the GPU often),
// the GPU idles until the flush and the fused kernel's time is exposed where
// the separate kernels would have overlapped the host's issuing. With a
// stream probe set (setStreamProbe; HOTKERNEL_FUSION_START=busy in a serving
// process), a call that would start a chain first asks whether its stream
// has work queued; if not, the call runs eagerly and is learned as usual
// (FusionStats::idleStarts counts them), and the next start asks again. A
// chain already pending is never cut short: the probe decides starts only.
// The probe is one query of the stream, issued as the engine's own command.
class FusionEngine {
 public:
  using HotCallback = std::function<void(const HotChain&)>;
  // Whether `stream` has no work queued (Note [Idle streams]); must not throw.
  using StreamProbe = std::function<bool(const c10::Stream& stream)>;

  // The process's engine, created by the first installProcessEngine (later
  // calls return it unchanged); nullptr before. Leaked: the dispatcher may
  // call the trampolines during exit.
  static FusionEngine* installProcessEngine(std::unique_ptr<CommandGate> gate, FusionOptions options);
  static FusionEngine* process();
  // installProcessEngine with the shim's command gate (a process under the preload).
  static FusionEngine* installWithShim(FusionOptions options);

  // Registers the trampoline of every deferrable op for `key` (CUDA in a
  // process; CPU in the tests), once per key; call it after the served ops'
  // trampolines, whose kernels it then calls as the originals. Throws Error
  // for an unknown key.
  void install(c10::DispatchKey key);
  // Called (on the thread that closes the window, under the engine's lock:
  // it must only queue) for each chain that turns hot.
  void setHotCallback(HotCallback callback);
  // Sets (or, with nullptr, clears) the probe Note [Idle streams] asks before a chain starts; any thread.
  void setStreamProbe(StreamProbe probe);
  // Adds a chain with a validated kernel to the catalog (any thread).
  void publish(ReadyChain chain);
  // Runs whatever is pending and ends the learning window (the shim's hook,
  // a fork, the exit); never throws.
  void flushAll() noexcept;
  // Switched off: everything pending runs, no call is learned or deferred.
  // After a failed replay or an error of the engine itself (logged once; the
  // call runs its original) it stays off: switching it on does nothing.
  void setEnabled(bool enabled) noexcept;
  bool enabled() const noexcept { return enabled_.load(std::memory_order_relaxed); }
  FusionStats stats() const;
  // The learner's patterns: key -> {seen (windows), calls, reported, refusal}, as JSON text; at most
  // kMaxPatternsShown, the most seen first.
  std::string patternsJson() const;
  // Note [Fork] (interpose/engine/EngineExit.cpp): prepare flushes and holds
  // the lock through fork(); parent and child release it; the child is then
  // switched off (its CUDA is the parent's).
  void prepareFork() noexcept;
  void afterForkParent() noexcept;
  void afterForkChild() noexcept;
  // Tests: forgets the catalog, the learner's counts and the owner thread.
  void resetForTest();

  // The trampoline's body.
  void call(const c10::OperatorHandle& op, c10::DispatchKeySet ks, torch::jit::Stack* stack);
  // The shim's hook's body.
  void onForeignCommand(int kind) noexcept;

  ~FusionEngine();

 private:
  FusionEngine(std::unique_ptr<CommandGate> gate, FusionOptions options);
  struct State;
  std::unique_ptr<State> state_;
  std::atomic<bool> enabled_{true};
};

}  // namespace hotkernel::fusion
