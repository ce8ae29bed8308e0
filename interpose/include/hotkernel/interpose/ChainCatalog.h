#pragma once
// The chains the engine may defer: each learned pattern with its built
// chain and a validated fused kernel, published as an immutable snapshot.
//
// Note [The chain catalog]
// A snapshot is never changed once published: publishing copies the
// current one, adds the chain and swaps the pointer (atomically; readers
// hold their snapshot through a shared_ptr while they use it), so a chain
// pending on an old snapshot stays valid while a new one is published.
// Chains are found by their first step's digest without its outputs (the
// op, its arguments and its tensors' metadata), then matched step by step
// (Note [Chain patterns]). The ops that start a chain are kept apart too: a
// call of any other op with nothing pending starts no chain, and the engine
// learns it without capturing it for a match first.

#include <ATen/core/Tensor.h>
#include <c10/core/Stream.h>

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "hotkernel/chain/ChainBuilder.h"
#include "hotkernel/chain/ChainPattern.h"

namespace hotkernel::fusion {

// One chain's fused kernel, launched on `stream` with the chain's inputs
// and outputs in ChainBuild order. Returns false when it did not launch
// (the engine then replays the calls unfused); never throws.
class FusedChainKernel {
 public:
  virtual ~FusedChainKernel() = default;
  virtual bool launch(const std::vector<at::Tensor>& inputs, const std::vector<at::Tensor>& outputs,
                      c10::Stream stream) noexcept = 0;
  // For logs and status: "t256v4r1i4".
  virtual std::string describe() const = 0;
};

// A chain the learner found hot (Note [Learning chains]): its pattern and
// the chain built from it, for the optimizer to tune.
struct HotChain {
  chain::ChainPattern pattern;
  chain::ChainBuild build;
  std::string key;  // pattern.key()
  int device = -1;  // the device its calls ran on (-1: the CPU)
};

struct ReadyChain {
  chain::ChainPattern pattern;
  chain::ChainBuild build;  // built with pattern.live: inputValues / outputValues are pattern ids
  std::shared_ptr<FusedChainKernel> kernel;
  std::string key;  // pattern.key()
};

class ChainCatalog {
 public:
  const std::vector<ReadyChain>& chains() const { return chains_; }
  // Indices of the chains whose first step may be `head` (a call without
  // outputs, with its inputs' metadata), by headDigest; the caller compares
  // the steps.
  const std::vector<size_t>* startingWith(uint64_t headDigest) const;
  // Whether a chain's first step is a call of `op` ("aten::mul.Tensor").
  bool startsWithOp(const std::string& op) const { return headOps_.count(op) != 0; }
  // A copy with `chain` added (replacing one of the same key).
  std::shared_ptr<const ChainCatalog> with(ReadyChain chain) const;
  // A copy without the chain of `key` (the same chains when there is none).
  std::shared_ptr<const ChainCatalog> without(const std::string& key) const;

 private:
  std::vector<ReadyChain> chains_;
  std::unordered_map<uint64_t, std::vector<size_t>> byHead_;
  std::unordered_set<std::string> headOps_;

  // Indexes chains_ by head digest and head op (after chains_ changed).
  void index();
};

// The digest a chain's first call is indexed by: the step without its outputs.
uint64_t headDigest(const chain::RecordedCall& call, const chain::TensorMetas& metas);

}  // namespace hotkernel::fusion
