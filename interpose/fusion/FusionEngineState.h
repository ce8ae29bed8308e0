#pragma once
// The fusion engine's state (FusionEngine::State), shared by FusionEngine.cpp
// (the dispatcher path and the flush hook) and FusionEngineStats.cpp (the
// counters, the patterns and the test reset). Internal to interpose/fusion.

#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/DispatchKey.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "CallCapture.h"
#include "ChainLearner.h"
#include "DeferrableOps.h"
#include "PendingChain.h"
#include "hotkernel/interpose/CommandGate.h"
#include "hotkernel/interpose/FusionBypass.h"
#include "hotkernel/interpose/FusionEngine.h"
#include "hotkernel/runtime/Logging.h"

namespace hotkernel::fusion {

constexpr size_t kNumKeys = static_cast<size_t>(c10::DispatchKey::EndOfRuntimeBackendKeys) + 1;

// What the engine runs itself (originals, flushes) is the engine's own: no trampoline defers it, no hook flushes it.
using InsideOriginal = FusionBypass;

struct FusionEngine::State {
  std::unique_ptr<CommandGate> gate;
  FusionOptions options;
  std::vector<ResolvedOp> ops;
  // Into `ops`, by the address of the op's registered schema (the dispatcher keeps one per op for the
  // process: a pointer hash on every call instead of hashing the op's name and overload).
  std::unordered_map<const c10::FunctionSchema*, size_t> opIndex;
  std::mutex installMu;
  // Written under installMu before a key's trampolines are registered; read-only afterwards.
  std::vector<std::array<std::optional<c10::SafeKernelFunction>, kNumKeys>> originals;
  std::array<std::atomic<bool>, kNumKeys> installed{};  // set after the key's originals (installedKeyOf)

  // Note [The fusion engine's lock]
  std::timed_mutex mu;
  // Precondition for the members below: mu held.
  HotCallback onHot;
  FusionEngine::StreamProbe streamIdle;  // Note [Idle streams]; empty: every start defers
  std::shared_ptr<const ChainCatalog> catalog = std::make_shared<ChainCatalog>();
  // startsChain[i]: whether ops[i] is the first call of a chain in `catalog` (Note [The chain catalog]), by op
  // index so that the dispatch path hashes no name; set with the catalog (setCatalog).
  std::vector<char> startsChain;

  // Precondition: mu held (or the engine not yet installed).
  void setCatalog(std::shared_ptr<const ChainCatalog> next) {
    catalog = std::move(next);
    startsChain.assign(ops.size(), 0);
    for (size_t i = 0; i < ops.size(); ++i) startsChain[i] = catalog->startsWithOp(ops[i].qualified) ? 1 : 0;
  }
  ChainLearner learner;
  std::optional<c10::Device> windowDevice;
  std::optional<c10::Stream> windowStream;
  std::unique_ptr<PendingChain> pending;
  // Note [A spare pending chain]: the last flushed chain, empty, restarted by the next start.
  std::unique_ptr<PendingChain> spare;
  std::optional<std::thread::id> owner;
  std::string lastUnfused;  // FusionStats::lastUnfused
  // Note [Sampled learning]
  bool skipping = false;          // the current window is not learned
  uint64_t lastNews = 0;          // learner.news() when a window last ended
  uint64_t learnedSinceNews = 0;  // learned windows ended since the learner's news changed
  uint64_t windowTick = 0;        // windows ended while sampling
  std::minstd_rand sampleDraws;   // which window sampling learns (a fixed seed: a run is reproducible)
  uint64_t windowsEnded = 0;      // windows ended, learned or skipped (Note [Learning a pattern that recurs])
  // A copy of `owner` the hook reads without the lock; default-constructed (no thread) until it is set.
  std::atomic<std::thread::id> ownerId{};

  std::atomic<uint64_t> deferredCalls{0}, fusedFlushes{0}, unfusedFlushes{0}, failedFlushes{0}, windows{0},
      hotChains{0}, hookGaveUp{0}, engineErrors{0}, passedCalls{0}, retiredChains{0}, idleStarts{0};

  // Note [Retiring a chain that never launches]
  // A published chain whose kernel refuses to launch (its plan's guard: an
  // input's pointer not aligned for the kernel's vector width, an output over
  // an input) is replayed op by op, correct but no faster than eager, and its
  // calls still pay for being deferred. After kRetireAfterRefusals flushes in
  // a row whose chosen kernel refused (none launched in between) the chain
  // is taken out of the catalog for the process and the log says so once; a
  // launch resets the count. The learner never reports the pattern again
  // (it was reported), so the calls run eagerly from then on.
  static constexpr int kRetireAfterRefusals = 8;
  // Precondition: mu held.
  std::unordered_map<std::string, int> refusedInARow;  // by chain key

  State(std::unique_ptr<CommandGate> g, FusionOptions o)
      : gate(std::move(g)), options(o), learner(o.hotCalls, [this](const HotChain& hot) {
          hotChains.fetch_add(1, std::memory_order_relaxed);
          if (!onHot) return;
          HotChain located = hot;
          located.device = windowDevice && windowDevice->is_cuda() ? windowDevice->index() : -1;
          onHot(located);
        }) {}

  // Precondition: mu held; `pending` empty or null. Note [A spare pending chain]
  void retirePending() {
    if (pending) spare = std::move(pending);
  }
  // Precondition: mu held, `pending` null. The chain a start takes: the spare, restarted, or a new one.
  void startPending(c10::Device device, c10::Stream stream, c10::DispatchKey key) {
    if (spare) {
      pending = std::move(spare);
      pending->restart(catalog, device, stream, key, options.poisonDeferredOutputs);
    } else {
      pending = std::make_unique<PendingChain>(catalog, device, stream, key, options.poisonDeferredOutputs);
    }
  }

  // Precondition: mu held.
  // A skipped window keeps the hook on: the next command ends it (Note [Sampled learning]).
  void publishPending() { gate->setPending((pending && !pending->empty()) || learner.open() || skipping ? 1 : 0); }

  // Precondition: mu held, inside the own-command guard.
  bool flushPending(FusionEngine& engine) {
    if (!pending || pending->empty()) {
      retirePending();
      return true;
    }
    PendingChain::Flush how;
    {
      InsideOriginal inside;  // what the flush runs (copies, a test kernel's ops) is the engine's own
      how = pending->flush();
    }
    const std::string why = pending->lastUnfusedWhy();
    if (how == PendingChain::Flush::Fused && !refusedInARow.empty()) {
      refusedInARow.erase(pending->lastFusedKey());  // erasing a std::string key does not allocate
    }
    if (const std::string& refused = pending->lastRefusedKey(); !refused.empty()) noteRefusal(refused, why);
    retirePending();
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

  // Note [Retiring a chain that never launches]. Never throws (it runs on the
  // dispatcher's path): a count or a catalog it cannot allocate keeps the chain.
  // Precondition: mu held.
  void noteRefusal(const std::string& key, const std::string& why) noexcept {
    try {
      if (++refusedInARow[key] < kRetireAfterRefusals) return;
      refusedInARow.erase(key);
      setCatalog(catalog->without(key));
      retiredChains.fetch_add(1, std::memory_order_relaxed);
      HOTKERNEL_LOG_ONCE(Info, "fusion-retired:" + key)
          << "fusion: chain " << key.substr(0, 16) << " is no longer deferred: " << why << " " << kRetireAfterRefusals
          << " times in a row; its calls run eagerly";
    } catch (...) {
    }
  }

  // Before a passing op's original (Note [Ops a chain lets pass]): flushes the
  // pending chain and closes the learning window when the call reads one of
  // their values or runs on another stream; what it does not read stays.
  // Returns false when a flush failed.
  // Precondition: mu held, inside the own-command guard.
  bool letPass(FusionEngine& engine, c10::ArrayRef<c10::IValue> args, c10::Device device, c10::Stream stream) {
    bool ok = true;
    if (pending && !pending->empty() &&
        (pending->device() != device || pending->stream() != stream || readsAValue(args, pending->values()))) {
      ok = flushPending(engine);
    }
    if (learner.open() && (windowDevice != device || windowStream != stream || readsAValue(args, learner.values()))) {
      closeWindow();
    }
    if (pending && !pending->empty()) passedCalls.fetch_add(1, std::memory_order_relaxed);
    return ok;
  }

  // Appends a call that ran (or was deferred) with `outputs` to the learning
  // window; anything that cannot take part ends the window.
  // Precondition: mu held.
  void learnCall(const ResolvedOp& r, c10::ArrayRef<c10::IValue> args, c10::Device device, c10::Stream stream,
                 const std::vector<at::Tensor>& outputs) noexcept {
    if (skipping) return;  // Note [Sampled learning]
    try {
      learnCallOrThrow(r, args, device, stream, outputs);
    } catch (const std::exception& e) {
      dropWindow();
      HOTKERNEL_LOG_ONCE(Warn, "fusion-learn-error") << "fusion: a learning window was dropped: " << e.what();
    } catch (...) {
      dropWindow();
    }
  }

  // Precondition: mu held.
  void learnCallOrThrow(const ResolvedOp& r, c10::ArrayRef<c10::IValue> args, c10::Device device,
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
    if (!learner.append(std::move(call), outputs, r.inPlace)) {
      closeWindow();  // the calls before it are the window
    } else if (learner.full()) {
      // A pending chain's references would make its values look live: such a window is not counted.
      if (pending && !pending->empty()) {
        dropWindow();
      } else {
        closeWindow();
      }
    }
  }

  // The learning window, dropped uncounted. Precondition: mu held.
  void dropWindow() noexcept {
    learner.drop();
    windowDevice.reset();
    windowStream.reset();
  }

  // Precondition: mu held.
  void closeWindow() noexcept {
    const bool ended = learner.open() || skipping;
    if (learner.open()) windows.fetch_add(1, std::memory_order_relaxed);
    if (ended) ++windowsEnded;
    try {
      learner.close(windowsEnded);
    } catch (const std::exception& e) {
      learner.drop();
      HOTKERNEL_LOG_ONCE(Warn, "fusion-learn-error") << "fusion: a learning window was dropped: " << e.what();
    } catch (...) {
      learner.drop();
    }
    windowDevice.reset();
    windowStream.reset();
    if (ended) chooseNextWindow();
  }

  // Note [Sampled learning]
  // Learning costs every deferrable call a capture of its arguments and
  // outputs, and a serving process repeats the same windows for as long as
  // it runs: once learnOneWindowIn * hotCalls windows in a row taught the
  // learner nothing (no pattern it had not seen, none turned hot or
  // refused), about one window in learnOneWindowIn is learned; the others
  // are skipped whole (no call captured, a skipped window ends where a
  // learned one would: at a command or a call that closes it), so a
  // learned window starts where windows start. The first news learns every
  // window again. Which window is learned is drawn (one chance in
  // learnOneWindowIn each), not every learnOneWindowIn-th: a process repeats
  // steps of the same windows, and a stride that divides a step's window
  // count would learn the same positions every step and never the others.
  // What is skipped is learning only: deferral and flushes are unchanged,
  // and a pattern that appears later is learned about learnOneWindowIn
  // times slower until it is seen twice; from then on its recurrences hold
  // learning on (Note [Learning a pattern that recurs]).
  // Precondition: mu held; a window (learned or skipped) just ended.
  void chooseNextWindow() {
    if (learner.news() != lastNews) {
      lastNews = learner.news();
      learnedSinceNews = 0;
    } else if (!skipping) {
      ++learnedSinceNews;
    }
    const int64_t every = options.learnOneWindowIn;
    // Note [Learning a pattern that recurs]: a pattern on its way to hot holds learning on.
    const bool sampled = every > 1 && learnedSinceNews >= static_cast<uint64_t>(every * options.hotCalls) &&
                         windowsEnded >= learner.learnUntil();
    if (sampled && windowTick == 0) {
      HOTKERNEL_LOG_ONCE(Info, "fusion-sampled-learning")
          << "fusion: " << learnedSinceNews << " learning windows taught nothing new; about one window in " << every
          << ", drawn, is learned until one does";
    }
    if (sampled) ++windowTick;
    skipping = sampled && sampleDraws() % static_cast<uint64_t>(every) != 0;
  }
};

}  // namespace hotkernel::fusion
