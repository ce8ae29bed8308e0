// The fusion engine's counters, its learned patterns as JSON and the test
// reset: what the status document and the tests read.
#include <algorithm>
#include <cstdio>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "FusionEngineState.h"
#include "hotkernel/interpose/FusionEngine.h"

namespace hotkernel::fusion {

FusionStats FusionEngine::stats() const {
  State& s = *state_;
  FusionStats out;
  out.deferredCalls = s.deferredCalls.load();
  out.fusedFlushes = s.fusedFlushes.load();
  out.unfusedFlushes = s.unfusedFlushes.load();
  out.failedFlushes = s.failedFlushes.load();
  out.windows = s.windows.load();
  out.hotChains = s.hotChains.load();
  out.hookGaveUp = s.hookGaveUp.load();
  out.passedCalls = s.passedCalls.load();
  out.retiredChains = s.retiredChains.load();
  out.idleStarts = s.idleStarts.load();
  {
    std::lock_guard<std::timed_mutex> guard(s.mu);
    out.readyChains = s.catalog->chains().size();
    out.lastUnfused = s.lastUnfused;
  }
  out.covered = s.gate->covers();
  return out;
}

std::string FusionEngine::patternsJson() const {
  State& s = *state_;
  constexpr size_t kMaxPatternsShown = 32;
  std::vector<std::pair<uint64_t, ChainLearner::PatternStats>> all;
  {
    std::lock_guard<std::timed_mutex> guard(s.mu);
    all.assign(s.learner.patterns().begin(), s.learner.patterns().end());
  }
  std::stable_sort(all.begin(), all.end(), [](const auto& a, const auto& b) { return a.second.seen > b.second.seen; });
  if (all.size() > kMaxPatternsShown) all.resize(kMaxPatternsShown);
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [digest, st] : all) {
    char hex[17];
    std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(digest));
    j[st.key.empty() ? std::string(hex) : st.key] = {
        {"seen", st.seen},         {"calls", st.calls},          {"reported", st.reported},
        {"refusal", st.refusal}, {"segments", st.segments}};
  }
  return j.dump();
}

void FusionEngine::resetForTest() {
  State& s = *state_;
  flushAll();
  std::lock_guard<std::timed_mutex> guard(s.mu);
  s.setCatalog(std::make_shared<ChainCatalog>());
  s.learner = ChainLearner(s.options.hotCalls, [this](const HotChain& hot) {
    State& st = *state_;
    st.hotChains.fetch_add(1, std::memory_order_relaxed);
    if (!st.onHot) return;
    HotChain located = hot;
    located.device = st.windowDevice && st.windowDevice->is_cuda() ? st.windowDevice->index() : -1;
    st.onHot(located);
  });
  s.owner.reset();
  s.skipping = false;
  s.lastNews = 0;
  s.learnedSinceNews = 0;
  s.windowTick = 0;
  s.sampleDraws.seed();
  s.windowsEnded = 0;
  s.ownerId.store(std::thread::id());
  s.deferredCalls = 0;
  s.fusedFlushes = 0;
  s.unfusedFlushes = 0;
  s.lastUnfused.clear();
  s.failedFlushes = 0;
  s.windows = 0;
  s.hotChains = 0;
  s.hookGaveUp = 0;
  s.passedCalls = 0;
  s.retiredChains = 0;
  s.idleStarts = 0;
  s.streamIdle = nullptr;
  s.refusedInARow.clear();
  s.engineErrors = 0;
  enabled_.store(true);
}
}  // namespace hotkernel::fusion
