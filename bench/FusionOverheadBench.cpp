// fusion_overhead_bench: the host cost the chain-fusion engine's boxed
// trampolines add per call, measured on the CPU dispatch key so that it runs
// on any machine (the CUDA key's trampoline does the same work, plus the
// shim's hook where a foreign command ends a window or flushes a chain).
//
//   build/bin/fusion_overhead_bench [--rows R --cols C] [--calls N] [--rounds K] [--out FILE]
//
// A program is SwiGLU as eager code, `silu(g) * u` (two deferrable calls),
// followed by what the shim does before the next foreign command (the
// engine's onForeignCommand). Phase 1 (K rounds): no trampoline. Then the
// engine is installed on the CPU key with a gate that covers every command,
// and phase 2 alternates K rounds of each mode:
//   learning  no chain published: each call runs its original and joins the
//             learning window, which the command closes and counts;
//   deferred  the program's chain published with a kernel that launches
//             nothing: each call is matched and its outputs allocated, the
//             command flushes the chain "fused" (the time of the fused kernel
//             itself is not the host's);
//   other     only another program's chain published (`tanh(g) * u`): the
//             calls start no chain, so they are learned (sampled) as in
//             `learning` after the catalog's check: what a serving process
//             pays on the ops outside its published chains;
//   off       FusionEngine::setEnabled(false): the trampoline checks the switch
//             and calls the original.
// Phase 1 cannot be interleaved with phase 2 (a registration is not undone).
// Output JSON (format "hotkernel-fusion-overhead", version 2; version 1 had no "other"):
//   {"format", "version", "benchmark", "date", "machine": {"cpu", "torch"},
//    "shape", "calls", "rounds", "callsPerProgram",
//    "nsPerCall": {"none", "learning", "deferred", "other", "off"}: {"median", "low", "high", "n"},
//    "learningMinusNoneNs", "deferredMinusNoneNs", "otherMinusNoneNs", "offMinusNoneNs"}
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/headeronly/version.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "hotkernel/interpose/CommandGate.h"
#include "hotkernel/interpose/FusionEngine.h"

namespace {

using namespace hotkernel::fusion;

// Every command reaches the engine (the bench calls onForeignCommand itself).
class CoveringGate final : public CommandGate {
 public:
  bool covers() override { return true; }
  void setFlushHook(FlushHook) override {}
  void setPending(int) override {}
  void enterOwn() override {}
  void leaveOwn() override {}
};

// Launches nothing: the host's share of a fused flush.
class NoKernel final : public FusedChainKernel {
 public:
  bool launch(const std::vector<at::Tensor>&, const std::vector<at::Tensor>&, c10::Stream) noexcept override {
    return true;
  }
  std::string describe() const override { return "no kernel (host cost only)"; }
};

nlohmann::json summary(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  const double median = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
  return {{"median", median}, {"low", v.front()}, {"high", v.back()}, {"n", n}};
}

double median(std::vector<double> v) { return summary(std::move(v))["median"].get<double>(); }

}  // namespace

int main(int argc, char** argv) {
  int64_t rows = 8, cols = 64, calls = 2000, rounds = 9;
  std::string out;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::cerr << a << " needs a value\n";
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--rows") rows = std::stoll(next());
    else if (a == "--cols") cols = std::stoll(next());
    else if (a == "--calls") calls = std::stoll(next());
    else if (a == "--rounds") rounds = std::stoll(next());
    else if (a == "--out") out = next();
    else {
      std::cerr << "usage: fusion_overhead_bench [--rows R --cols C] [--calls N] [--rounds K] [--out FILE]\n";
      return 2;
    }
  }
  if (rows < 1 || cols < 1 || calls < 1 || rounds < 1) {
    std::cerr << "--rows, --cols, --calls and --rounds must be at least 1\n";
    return 2;
  }
  at::set_num_threads(1);
  const at::Tensor g = at::randn({rows, cols}), u = at::randn({rows, cols});
  FusionEngine* engine = nullptr;
  auto program = [&] {
    at::Tensor y = at::silu(g) * u;
    if (engine) engine->onForeignCommand(1);
    return y;
  };
  auto otherProgram = [&] {
    at::Tensor y = at::tanh(g) * u;
    if (engine) engine->onForeignCommand(1);
    return y;
  };
  auto timeRound = [&] {
    const auto t0 = std::chrono::steady_clock::now();
    for (int64_t c = 0; c < calls; ++c) program();
    const auto t1 = std::chrono::steady_clock::now();
    return std::chrono::duration<double, std::nano>(t1 - t0).count() / static_cast<double>(calls * 2);
  };
  for (int w = 0; w < 3; ++w) timeRound();
  std::vector<double> none, learning, deferred, other, off;
  for (int64_t r = 0; r < rounds; ++r) none.push_back(timeRound());

  engine = FusionEngine::installProcessEngine(std::make_unique<CoveringGate>(), FusionOptions{2, true});
  engine->install(c10::DispatchKey::CPU);
  std::vector<HotChain> hot;
  engine->setHotCallback([&](const HotChain& h) { hot.push_back(h); });
  for (int w = 0; w < 4; ++w) {
    at::Tensor keep = program();
  }
  for (int w = 0; w < 4; ++w) {
    at::Tensor keep = otherProgram();
  }
  engine->setHotCallback(nullptr);
  if (hot.size() != 2) {
    std::cerr << "the two programs' chains were not learned: " << engine->patternsJson() << "\n";
    return 1;
  }
  for (int64_t r = 0; r < rounds; ++r) {
    engine->resetForTest();  // forgets the catalog: learning
    learning.push_back(timeRound());
    engine->publish(ReadyChain{hot[1].pattern, hot[1].build, std::make_shared<NoKernel>(), hot[1].key});
    other.push_back(timeRound());
    engine->publish(ReadyChain{hot[0].pattern, hot[0].build, std::make_shared<NoKernel>(), hot[0].key});
    deferred.push_back(timeRound());
    engine->setEnabled(false);
    off.push_back(timeRound());
    engine->setEnabled(true);
  }
  const FusionStats stats = engine->stats();
  const double base = median(none);
  std::time_t now = std::time(nullptr);
  char date[32];
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  nlohmann::json j = {
      {"format", "hotkernel-fusion-overhead"},
      {"version", 2},
      {"benchmark", "fusion_overhead"},
      {"date", date},
      {"machine", {{"cpu", "host"}, {"torch", TORCH_VERSION}}},
      {"shape", {rows, cols}},
      {"calls", calls},
      {"rounds", rounds},
      {"callsPerProgram", 2},
      {"nsPerCall",
       {{"none", summary(none)},
        {"learning", summary(learning)},
        {"deferred", summary(deferred)},
        {"other", summary(other)},
        {"off", summary(off)}}},
      {"learningMinusNoneNs", median(learning) - base},
      {"deferredMinusNoneNs", median(deferred) - base},
      {"otherMinusNoneNs", median(other) - base},
      {"offMinusNoneNs", median(off) - base},
      {"fusedFlushes", stats.fusedFlushes},
      {"unfusedFlushes", stats.unfusedFlushes}};
  std::cout << j.dump(2) << "\n";
  if (!out.empty()) std::ofstream(out) << j.dump(2) << "\n";
  return stats.fusedFlushes > 0 ? 0 : 1;
}
