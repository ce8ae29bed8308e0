// The runtime's side of the process's exit and of fork (Note [Ordered exit]
// in runtime/ExitGate.h, Note [Fork] below): the hooks, the optimizer's yield
// point and its unit lock. Kept out of Engine.cpp; no torch headers here.

#include <dlfcn.h>
#include <pthread.h>
#include <unistd.h>

#include <cstdlib>

#include "TerminationHook.h"
#include "hotkernel/interpose/Recorder.h"
#include "hotkernel/interpose/Engine.h"
#include "hotkernel/interpose/FusionEngine.h"
#include "hotkernel/interpose/ServedOps.h"
#include "hotkernel/runtime/IdleGate.h"
#include "hotkernel/runtime/ExitGate.h"
#include "hotkernel/runtime/Logging.h"

namespace hotkernel {
namespace {

// Note [Ordered exit] (runtime/ExitGate.h): how long the exit hook waits for
// the optimizer's unit of GPU work in flight before it abandons it.
constexpr double kExitWaitSeconds = 2.0;

void exitHook() { Engine::instance().shutdown(); }

// Whether this thread holds Engine::unitMu_ (Note [Fork]): the optimizer
// thread inside a Engine::UnitHold, between two yield points.
thread_local bool tHoldsUnit = false;

// Py_AtExit, when the host is a Python interpreter (the executable exports
// the C API); null in a libtorch C++ binary.
using PyAtExitFn = int (*)(void (*)());
PyAtExitFn pythonAtExit() { return reinterpret_cast<PyAtExitFn>(dlsym(RTLD_DEFAULT, "Py_AtExit")); }

}  // namespace

void Engine::installExitHandlers() {
  // Note [Ordered exit]: this atexit hook runs after CUDA's teardown (CUDA
  // initializes later); it only matters when CUDA was never used.
  // armExitHook() adds the one that runs first, and a Python host runs
  // Py_AtExit hooks before any atexit handler.
  std::atexit(&exitHook);
  if (PyAtExitFn atExit = pythonAtExit(); atExit && atExit(&exitHook) != 0) {
    HOTKERNEL_LOG(Debug) << "Py_AtExit is full; the exit hook runs from atexit";
  }
  pthread_atfork(&Engine::forkPrepare, &Engine::forkParent, &Engine::forkChild);
  // Note [The profile on SIGTERM]: only when a profile is asked for.
  if (!config().profilePath.empty() && !installTerminationHook(&exitHook)) {
    HOTKERNEL_LOG(Debug) << "SIGTERM has the host's handler; the profile is written when the host exits";
  }
}

bool Engine::yieldToServing() {
  // Note [Fork]: none of our GPU work is in flight here; a fork may go on.
  const bool held = tHoldsUnit;
  if (held) {
    tHoldsUnit = false;
    unitMu_.unlock();
  }
  ExitGate& exit = ExitGate::process();
  exit.parkIfExiting();  // Note [Ordered exit]: parks without the unit lock
  const bool idle = IdleGate::instance().waitUntilIdle(
      static_cast<double>(config().idleMs), [this, &exit] { return stopping_.load() || exit.exiting(); },
      24 * 3600.0);
  exit.parkIfExiting();
  if (held) {
    unitMu_.lock();
    tHoldsUnit = true;
  }
  return idle;
}

Engine::UnitHold::UnitHold(Engine& r) : r_(r) {
  r_.unitMu_.lock();
  tHoldsUnit = true;
}

Engine::UnitHold::~UnitHold() {
  if (tHoldsUnit) {
    tHoldsUnit = false;
    r_.unitMu_.unlock();
  }
}

void Engine::armExitHook() noexcept {
  if (exitHookArmed_.exchange(true)) return;
  // Note [Ordered exit]: CUDA registered its teardown when it initialized,
  // before this call; atexit runs handlers in reverse order, so this one runs
  // before CUDA's.
  if (std::atexit(&exitHook) != 0) {
    HOTKERNEL_LOG_ONCE(Warn, "atexit") << "cannot register the exit hook; a process exiting while the optimizer "
                                       << "works may not stop it in time";
  }
}

void Engine::shutdown() noexcept {
  if (shutDown_.exchange(true)) return;
  try {
    if (forkedChild_.load()) {
      // Note [Fork]: the optimizer thread is the parent's; the profile file too.
      HOTKERNEL_LOG(Debug) << "forked child exiting: no optimizer to stop, no profile written";
      return;
    }
    // Served ops go back to ATen: other threads may still run ops while the process tears down.
    // Pending chains run first, before CUDA's teardown.
    if (fusion::FusionEngine* f = fusion::FusionEngine::process()) f->setEnabled(false);
    setServedOpsEnabled(false);
    // Note [Ordered exit]: the optimizer parks at its next yield point; no GPU
    // work of ours runs past this wait unless a unit outlasts it.
    const bool settled = ExitGate::process().begin(kExitWaitSeconds, [this] {
      return !worker_ || !worker_->jobRunning();
    });
    stopping_.store(true);
    if (!settled) {
      HOTKERNEL_LOG(Info) << "exit: the optimizer's unit of GPU work in flight did not end within "
                          << kExitWaitSeconds << " s; abandoned";
    }
    const std::string path = profilePathFor(config().profilePath, static_cast<long>(::getpid()));
    if (!path.empty() && Recorder::instance().writeProfile(path)) {
      HOTKERNEL_LOG(Info) << "profile written to " << path;
    }
  } catch (...) {
  }
}

// Note [Fork]
// A child forked from a process running hotkernel inherits its memory but
// only the forking thread: the optimizer thread is gone, with whatever locks
// it held, and the SQLite connection must not be used across fork. So:
//  - the prepare handler first takes the optimizer's unit lock, which the
//    optimizer holds while it does GPU work and releases at each yield point:
//    fork waits for the unit in flight (a compile batch at most), and the
//    child never inherits a lock of torch's held mid-unit (such as the
//    caching allocator's, which the child's interpreter takes when it frees
//    the parent's CUDA tensors at exit);
//  - then the recorder's and the runtime's locks, so that the child does not
//    inherit them held by another thread;
//  - the child marks itself: it serves what the parent had published,
//    records nothing for tuning, opens and writes no cache, and its exit
//    neither waits for an optimizer nor writes the parent's profile file.
// A fork from the optimizer thread itself does not happen (it spawns its
// helpers with posix_spawn, which runs no fork handlers). vfork and
// posix_spawn from the host run none either and need none.
void Engine::forkPrepare() {
  Engine& r = instance();
  if (fusion::FusionEngine* f = fusion::FusionEngine::process()) f->prepareFork();
  if (!tHoldsUnit) r.unitMu_.lock();
  Recorder::instance().lockForFork();
  r.mu_.lock();
}

void Engine::forkParent() {
  Engine& r = instance();
  r.mu_.unlock();
  Recorder::instance().unlockAfterFork();
  if (!tHoldsUnit) r.unitMu_.unlock();
  if (fusion::FusionEngine* f = fusion::FusionEngine::process()) f->afterForkParent();
}

void Engine::forkChild() {
  Engine& r = instance();
  r.forkedChild_.store(true);
  resetTerminationHookInChild();  // Note [The profile on SIGTERM]: no waiting thread here
  r.mu_.unlock();
  Recorder::instance().unlockAfterFork();
  if (!tHoldsUnit) r.unitMu_.unlock();
  if (fusion::FusionEngine* f = fusion::FusionEngine::process()) f->afterForkChild();
}

}  // namespace hotkernel
