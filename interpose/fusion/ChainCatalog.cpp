#include "hotkernel/interpose/ChainCatalog.h"

namespace hotkernel::fusion {

uint64_t headDigest(const chain::RecordedCall& call, const chain::TensorMetas& metas) {
  return chain::stepDigest(call, metas, /*withOutputs=*/false);
}

const std::vector<size_t>* ChainCatalog::startingWith(uint64_t digest) const {
  auto it = byHead_.find(digest);
  return it == byHead_.end() ? nullptr : &it->second;
}

std::shared_ptr<const ChainCatalog> ChainCatalog::with(ReadyChain chain) const {
  auto next = std::make_shared<ChainCatalog>();
  for (const ReadyChain& c : chains_) {
    if (c.key != chain.key) next->chains_.push_back(c);
  }
  next->chains_.push_back(std::move(chain));
  for (size_t i = 0; i < next->chains_.size(); ++i) {
    const chain::ChainPattern& p = next->chains_[i].pattern;
    if (p.calls.empty()) continue;
    next->byHead_[headDigest(p.calls.front(), p.metas)].push_back(i);
    next->headOps_.insert(p.calls.front().op);
  }
  return next;
}

}  // namespace hotkernel::fusion
