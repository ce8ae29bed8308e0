#include "hotkernel/interpose/ChainCatalog.h"

namespace hotkernel::fusion {

std::string headText(const chain::RecordedCall& call, const chain::TensorMetas& metas) {
  chain::RecordedCall head = call;
  head.outputs.clear();
  return chain::stepText(head, metas);
}

const std::vector<size_t>* ChainCatalog::startingWith(const std::string& text) const {
  auto it = byHead_.find(text);
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
    if (!p.calls.empty()) next->byHead_[headText(p.calls.front(), p.metas)].push_back(i);
  }
  return next;
}

}  // namespace hotkernel::fusion
