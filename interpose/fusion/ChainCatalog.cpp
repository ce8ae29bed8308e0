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
  next->index();
  return next;
}

std::shared_ptr<const ChainCatalog> ChainCatalog::without(const std::string& key) const {
  auto next = std::make_shared<ChainCatalog>();
  for (const ReadyChain& c : chains_) {
    if (c.key != key) next->chains_.push_back(c);
  }
  next->index();
  return next;
}

void ChainCatalog::index() {
  byHead_.clear();
  headOps_.clear();
  for (size_t i = 0; i < chains_.size(); ++i) {
    const chain::ChainPattern& p = chains_[i].pattern;
    if (p.calls.empty()) continue;
    byHead_[headDigest(p.calls.front(), p.metas)].push_back(i);
    headOps_.insert(p.calls.front().op);
  }
}

}  // namespace hotkernel::fusion
