#pragma once
// A chain being deferred: the calls taken so far, their arguments and the
// outputs already returned to the caller, not yet computed.
//
// Note [Deferring a chain]
// A chain starts at a call whose first step some catalog chain has and
// grows while each next call is the next step of at least one of them
// (Note [Chain patterns]); each taken call gets its outputs allocated with
// the pattern's metadata (the caching allocator, on the call's stream) and
// returns them at once (an in-place call returns the tensor it writes, a
// value the chain returned before: Note [In-place steps in the table]). The chain holds every input's and output's storage
// (its own TensorImpls: Note [A pending chain holds no caller's TensorImpl]),
// so no storage of it is reused before it runs. It runs at its
// flush: a complete candidate whose fused kernel writes every value still
// referenced elsewhere (ValueTable::referencedElsewhere) launches once on
// the chain's stream; otherwise every call is replayed in order into its
// outputs (Note [Replaying a deferred call]), which is what eager computes;
// either way each value is read and written as the chain took it (Note
// [Values as a chain took them]).

#include <ATen/core/Tensor.h>
#include <c10/core/DispatchKey.h>
#include <c10/core/Stream.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "CallCapture.h"
#include "hotkernel/interpose/ChainCatalog.h"
#include "DeferrableOps.h"

namespace hotkernel::fusion {

class PendingChain {
 public:
  PendingChain(std::shared_ptr<const ChainCatalog> catalog, c10::Device device, c10::Stream stream,
               c10::DispatchKey backend, bool poison = false)
      : catalog_(std::move(catalog)), device_(device), stream_(stream), backend_(backend), poison_(poison) {}

  // Note [A spare pending chain]
  // A chain's vectors (its calls, deferred calls, values and candidates)
  // grow from empty to a handful of entries per chain, a few allocations a
  // call on the deferral's hot path. The engine keeps the empty chain of the
  // last flush and restarts it for the next one (a chain's vectors keep their
  // capacity when cleared), with the catalog, device and stream of its start:
  // a restarted chain holds nothing of its previous one (not even the values
  // a take that threw had numbered).
  // Precondition: empty().
  void restart(std::shared_ptr<const ChainCatalog> catalog, c10::Device device, c10::Stream stream,
               c10::DispatchKey backend, bool poison);

  // Takes `args` of `op` as the chain's next step (the first one when the
  // chain is empty) if a candidate has it; returns its outputs, or nullopt
  // (nothing changed) when no candidate continues with it.
  std::optional<std::vector<at::Tensor>> take(const ResolvedOp& op, c10::ArrayRef<c10::IValue> args);

  enum class Flush { Fused, Unfused, Failed };
  // Computes the chain (fused or unfused); the chain is empty afterwards.
  // Never throws; Failed: a replayed call threw (logged), its outputs and
  // the later ones hold garbage.
  Flush flush() noexcept;

  bool empty() const { return calls_.empty(); }
  size_t size() const { return calls_.size(); }
  c10::Device device() const { return device_; }
  c10::Stream stream() const { return stream_; }
  // Every input and output the chain took.
  const ValueTable& values() const { return values_; }
  // The candidate chosen by the last Fused flush ("" when none): its key in the catalog this chain holds.
  const std::string& lastFusedKey() const { return lastFusedKey_ != nullptr ? *lastFusedKey_ : kNoKey; }
  // Why the last flush ran unfused ("" when it fused or had nothing to run):
  // no complete candidate, a held value no candidate writes, or a kernel that
  // did not launch.
  const std::string& lastUnfusedWhy() const { return lastUnfusedWhy_; }
  // The candidate whose fused kernel did not launch at the last flush ("" when none refused).
  const std::string& lastRefusedKey() const { return lastRefusedKey_; }

 private:
  // A call's arguments and outputs, each tensor as the chain took it (Note
  // [Values as a chain took them]).
  struct Deferred {
    const ResolvedOp* op = nullptr;
    std::vector<c10::IValue> args;
    std::vector<at::Tensor> outputs;
  };
  // The complete candidate whose outputs cover the live values, or nullptr
  // with `why` saying so.
  const ReadyChain* fusedCandidate(std::string& why) const;
  bool replay() noexcept;
  void reset();

  static inline const std::string kNoKey;
  std::shared_ptr<const ChainCatalog> catalog_;
  c10::Device device_;
  c10::Stream stream_;
  c10::DispatchKey backend_;
  bool poison_;  // FusionOptions::poisonDeferredOutputs
  ValueTable values_{true};
  std::vector<chain::RecordedCall> calls_;
  std::vector<Deferred> deferred_;
  std::vector<size_t> candidates_;  // catalog indices still matching every call taken
  std::vector<size_t> next_;        // take()'s scratch for the next candidates (its capacity kept)
  const std::string* lastFusedKey_ = nullptr;  // into catalog_, which this chain holds: no copy a flush
  std::string lastUnfusedWhy_;
  std::string lastRefusedKey_;
};

}  // namespace hotkernel::fusion
