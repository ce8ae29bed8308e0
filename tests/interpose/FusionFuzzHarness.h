#pragma once
// The CPU model of a GPU serving process that the fusion fuzz suite runs the
// engine in (issue 20): the process's fusion engine on the CPU key with a
// fake command gate, CPU streams, and fused chain kernels that read and
// write raw storage like the real ones.
//
// Note [The fuzz suite's model of a GPU process]
// On a GPU the shim calls the engine's flush hook before every CUDA command
// hotkernel does not issue; on the CPU nothing does, so the programs fire a
// "command" (FuzzGate::command) exactly where a GPU process would issue one:
// before a kernel of an op the engine does not take (in-place ops, other
// ops, copies), before `.item()`'s copy, at an event record, a stream wait, a
// synchronize. View ops and in-place metadata changes (`t_`, `unsqueeze_`)
// issue none, as on a GPU. The own-command guard is per thread, as the
// shim's is. The CPU has one stream; CpuStreams replaces the CPU's device
// guard with one that keeps a current stream per thread (ids 0..n), so the
// engine's stream checks (a chain stays on its stream, a flush runs on it)
// see real stream changes. A fused kernel gets the chain's values as
// pointers and reads and writes them in the chain pattern's layout, as the
// generated CUDA kernel does (not through the tensors' current metadata).
// Two kernels: InterpreterKernel computes the chain with the chain
// interpreter in Fused mode (float32 intermediates: within the chain's
// tolerance of eager), ExactKernel evaluates the pattern's calls with ATen
// (bit for bit eager), so that values downstream of a fused chain can be
// compared bit for bit too.
//
// Note [The fuzz suite on a GPU]
// With the device set to CUDA (setFuzzDevice, before the engine is first
// used) the same programs run on the GPU with the engine on the CUDA key and
// real fused kernels (the caller's kernel maker: NVRTC-compiled chain plans
// behind loggedKernel). The gate stays the fake one (the test binary is not
// preloaded with the shim): commands fire where the CPU model fires them.
// Streams are three real streams of the device (its default stream and two of
// its pool). A program on real streams must order its own work, or eager
// itself races: a stream switch records an event on the old stream and makes
// the new one wait on it (both commands a process would issue), and a step on
// the worker thread runs on the caller's stream. Values are compared on the
// host.

#include <ATen/core/Tensor.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "hotkernel/chain/ChainCodegen.h"
#include "hotkernel/chain/ChainVariant.h"
#include "hotkernel/interpose/ChainCatalog.h"
#include "hotkernel/interpose/CommandGate.h"
#include "hotkernel/interpose/FusionEngine.h"
#include "hotkernel/hotkernel_shim.h"

namespace hotkernel::fusion::fuzz {

// The shim's kinds (HotkernelCommandKind): the hook's wait depends on them (Note [The fusion engine's lock]).
enum class CommandKind {
  Launch = HOTKERNEL_COMMAND_LAUNCH,
  Copy = HOTKERNEL_COMMAND_COPY,
  EventRecord = HOTKERNEL_COMMAND_EVENT_RECORD,
  StreamWait = HOTKERNEL_COMMAND_STREAM_WAIT,
  Synchronize = HOTKERNEL_COMMAND_SYNCHRONIZE
};

class FuzzGate final : public CommandGate {
 public:
  bool covers() override;
  void setFlushHook(FlushHook h) override;
  void setPending(int count) override;
  void enterOwn() override;
  void leaveOwn() override;

  // A command this thread issues: the hook first when something is pending
  // and the thread is outside the own guard (the shim's rule). Under the
  // shim (setFuzzShim) a real CUDA command of that kind instead, whose
  // wrapper in the shim calls the hook.
  void command(CommandKind kind);
  int pending() const { return pending_.load(); }
  uint64_t hooksFired() const { return hooksFired_.load(); }

 private:
  friend FusionEngine& fuzzEngine();
  static void countingHook(int kind);

  std::atomic<FlushHook> hook_{nullptr};
  std::atomic<int> pending_{0};
  std::atomic<uint64_t> hooksFired_{0};
  std::unique_ptr<CommandGate> shim_;  // Note [The fuzz suite under the shim]; set before the engine is installed
};

// Note [The fuzz suite under the shim]
// In a process preloaded with the shim (HOTKERNEL=0 LD_PRELOAD=
// libhotkernel_preload.so: the shim's CUDA wrappers without the rest of
// hotkernel), the fuzz engine's gate forwards to the shim's command hook:
// every CUDA command the process issues that hotkernel does not (ATen's
// kernels of other ops, copies, the caching allocator's events, syncs, the
// real commands standing for the programs' own) reaches the engine through
// the shim as in a serving process, so a command the shim misses shows as a
// mismatch. A program's own command is then a real one of its kind on the
// current stream, issued through torch so that it goes through the shim as
// torch's do: a `fill_` (a kernel launch of an op the engine does not take),
// a device-to-device `copy_`, an event record, a stream wait on it, an event
// synchronize. GPU only; call before fuzzEngine() is first used; false (and
// nothing changed) when the shim's hook is not in the process or does not
// cover every command.
bool setFuzzShim();
bool fuzzUnderShim();

// The device the programs run on (CPU or CUDA): set before fuzzEngine() is
// first called, once per process.
void setFuzzDevice(c10::DeviceType type);
c10::DeviceType fuzzDevice();

// Replaces the CPU's device guard (once per process) with one whose current
// stream is per thread.
void installCpuStreams();
// The fuzz streams 0..kFuzzStreams-1 (Note [The fuzz suite on a GPU]): the
// calling thread's current one (-1: another stream), making one current, and
// the id of a stream (-1: not a fuzz stream).
constexpr int kFuzzStreams = 3;
int currentFuzzStream();
void setCurrentFuzzStream(int id);
int fuzzStreamId(const c10::Stream& s);
// Switches this thread to stream `id`, the new stream waiting on the old one
// on a GPU (the caller fires the commands).
void orderedSwitch(int id);
// Waits for the work of every fuzz stream (nothing on the CPU).
void synchronizeFuzzStreams();

// What the fused kernels wrote, for the checker: by storage (a value the
// flush reads or writes as taken may be another TensorImpl on the same
// storage: Note [Values as a chain took them]), on which stream, with which
// tolerance. The log holds a weak reference to every storage it saw until
// it is cleared (once per program), so no other storage can take that
// address meanwhile: a storage's writes are its own, including those a flush
// on another thread makes while the op that returns the value is still in
// its call.
class LaunchLog {
 public:
  struct Write {
    int stream = 0;
    double tolerance = 0;  // of the chain's fused arithmetic against eager; 0: an exact kernel
  };
  void launched(bool fusedArithmetic);
  void wrote(const at::Tensor& t, int stream, double tolerance);
  // The writes into `storage` since the log was cleared.
  std::vector<Write> written(const c10::StorageImpl* storage) const;
  uint64_t interpreterLaunches() const { return interpreterLaunches_.load(); }
  uint64_t exactLaunches() const { return exactLaunches_.load(); }
  uint64_t deviceLaunches() const { return deviceLaunches_.load(); }
  void launchedOnDevice() { deviceLaunches_.fetch_add(1); }
  void clear();

 private:
  mutable std::mutex mu_;
  std::map<const c10::StorageImpl*, std::vector<Write>> writes_;  // Precondition: mu_ held.
  std::vector<c10::weak_intrusive_ptr<c10::StorageImpl>> pins_;   // Precondition: mu_ held.
  std::atomic<uint64_t> interpreterLaunches_{0}, exactLaunches_{0}, deviceLaunches_{0};
};

// A chain's fused kernel on the CPU (Note [The fuzz suite's model of a GPU
// process]); `skipLastOutput` plants a bug (the last output is never
// written) for the suite's own test.
std::shared_ptr<FusedChainKernel> makeInterpreterKernel(const HotChain& chain, LaunchLog& log, bool skipLastOutput);
std::shared_ptr<FusedChainKernel> makeExactKernel(const HotChain& chain, LaunchLog& log, bool skipLastOutput);

// The parameter points a pool draws for a hot chain's variant `v`, in the
// order they are tried (Note [Fuzz kernels on a GPU]): its space shuffled by
// the chain's key, rounding as ATen where the variant has a layout and the
// chain a 16-bit value. The GPU's and the host's kernel makers draw so.
std::vector<chain::ChainKernelParams> fuzzKernelPoints(const HotChain& hot, const chain::ChainVariant& v);

// A device kernel (a compiled chain plan) whose successful launches are
// logged: each output written on its stream, within `tolerance` of eager.
std::shared_ptr<FusedChainKernel> loggedKernel(std::shared_ptr<FusedChainKernel> inner, LaunchLog& log,
                                               double tolerance);

// The process's engine on the fuzz device's key with the fuzz gate (hot after
// 3 windows, deferred outputs filled with NaN), installed once.
FusionEngine& fuzzEngine();
FuzzGate& fuzzGate();

}  // namespace hotkernel::fusion::fuzz
