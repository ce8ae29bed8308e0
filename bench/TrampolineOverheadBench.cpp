// trampoline_overhead_bench: the host cost a served op's trampoline adds to a
// call it does not serve (no plan for the variant: it checks the switch, keys
// the call, looks the plan up and calls the original kernel), measured on the
// CPU dispatch key so that it runs on any machine.
//
//   build/bin/trampoline_overhead_bench [--rows R --cols C] [--calls N] [--rounds K] [--out FILE]
//
// Each op (sum, mean, amax, argmax over dim -1, _softmax) runs on a small
// float32 CPU tensor, one intra-op thread, in loops of --calls calls timed by
// the steady clock. Phase 1 (K rounds, ops interleaved): no trampoline, the
// dispatcher calls ATen's CPU kernel. Then the trampolines are installed on
// the CPU key (what HOTKERNEL_OPS does on the CUDA key) and phase 2 alternates
// K rounds with the trampolines routing to their plans (none published, so
// every call falls back) and K rounds with the served ops switched off
// (hotkernel_set_enabled(0): the trampoline only checks the switch). Phase 1
// cannot be interleaved with phase 2 (a registration is not undone), so its
// comparison carries any drift between the phases; run the program several
// times to see the spread between processes.
//
// What it does not include: the CUDA trampoline's device index and lazy GPU
// start check (a few loads and compares; Note [Lazy GPU start] in
// interpose/engine/Engine.h) and the recorder's sampling (it is the same for
// every op, served or not).
//
// Output JSON (format "hotkernel-trampoline-overhead", version 1):
//   {"format", "version", "benchmark", "date", "machine": {"cpu", "torch"},
//    "shape", "calls", "rounds", "results": [{"op", "nsPerCall": {"none",
//    "fallback", "disabled"}: {"median", "low", "high", "n"}, "fallbackMinusNoneNs",
//    "fallbackMinusDisabledNs"}]}
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/headeronly/version.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <functional>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "hotkernel/interpose/ServedOps.h"

namespace {

struct Op {
  const char* name;
  const hotkernel::ServedOp& served;
  std::function<at::Tensor(const at::Tensor&)> call;
};

nlohmann::json summary(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  const double median = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
  return {{"median", median}, {"low", v.front()}, {"high", v.back()}, {"n", n}};
}

std::string cpuModel() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("model name", 0) == 0) {
      const size_t colon = line.find(':');
      return colon == std::string::npos ? line : line.substr(colon + 2);
    }
  }
  return "unknown";
}

bool positiveArg(const std::string& text, int64_t& out) {
  try {
    size_t used = 0;
    const long long v = std::stoll(text, &used);
    if (used != text.size() || v < 1) return false;
    out = v;
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

}  // namespace

int main(int argc, char** argv) {
  int64_t rows = 4, cols = 64, calls = 20000, rounds = 15;
  std::string outPath;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const std::string v = i + 1 < argc ? argv[i + 1] : "";
    int64_t* target = a == "--rows" ? &rows : a == "--cols" ? &cols : a == "--calls" ? &calls
                    : a == "--rounds"                          ? &rounds
                                                               : nullptr;
    if (target) {
      if (!positiveArg(v, *target)) {
        std::cerr << "trampoline_overhead_bench: " << a << " needs a positive integer, got '" << v << "'\n";
        return 2;
      }
      ++i;
    } else if (a == "--out" && !v.empty()) {
      outPath = v;
      ++i;
    } else {
      std::cerr << "usage: trampoline_overhead_bench [--rows R] [--cols C] [--calls N] [--rounds K] [--out FILE]\n";
      return 2;
    }
  }
  if (rounds < 3) {
    std::cerr << "trampoline_overhead_bench: --rounds must be at least 3\n";
    return 2;
  }
  at::set_num_threads(1);
  const at::Tensor x = at::randn({rows, cols});
  using hotkernel::servedOp;
  const std::vector<Op> ops = {
      {"sum", servedOp("aten::sum.dim_IntList"), [](const at::Tensor& t) { return at::sum(t, {-1}); }},
      {"mean", servedOp("aten::mean.dim"), [](const at::Tensor& t) { return at::mean(t, {-1}); }},
      {"amax", servedOp("aten::amax"), [](const at::Tensor& t) { return at::amax(t, {-1}); }},
      {"argmax", servedOp("aten::argmax"), [](const at::Tensor& t) { return at::argmax(t, -1); }},
      {"softmax", servedOp("aten::_softmax"), [](const at::Tensor& t) { return at::_softmax(t, -1, false); }},
  };
  // ns per call of one loop of `calls` calls of op i.
  auto loop = [&](const Op& op) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int64_t c = 0; c < calls; ++c) (void)op.call(x);
    return std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count() /
           static_cast<double>(calls);
  };
  std::vector<std::vector<double>> none(ops.size()), fallback(ops.size()), disabled(ops.size());
  for (const Op& op : ops) (void)loop(op);  // warm-up
  for (int64_t r = 0; r < rounds; ++r) {
    for (size_t i = 0; i < ops.size(); ++i) none[i].push_back(loop(ops[i]));
  }
  try {
    for (const Op& op : ops) hotkernel::installServedOp(op.served, c10::DispatchKey::CPU, nullptr);
  } catch (const std::exception& e) {
    std::cerr << "trampoline_overhead_bench: cannot install the trampolines: " << e.what() << "\n";
    return 1;
  }
  for (const Op& op : ops) {
    if (!hotkernel::servedOpInstalled(op.served, c10::DispatchKey::CPU)) {
      std::cerr << "trampoline_overhead_bench: " << op.name << "'s trampoline is not installed\n";
      return 1;
    }
  }
  const uint64_t missesBefore = hotkernel::missesOf(servedOp("aten::sum.dim_IntList"));
  for (const Op& op : ops) (void)loop(op);  // warm-up through the trampolines
  for (int64_t r = 0; r < rounds; ++r) {
    hotkernel::setServedOpsEnabled(true);
    for (size_t i = 0; i < ops.size(); ++i) fallback[i].push_back(loop(ops[i]));
    hotkernel::setServedOpsEnabled(false);
    for (size_t i = 0; i < ops.size(); ++i) disabled[i].push_back(loop(ops[i]));
  }
  hotkernel::setServedOpsEnabled(true);
  // The enabled loops went through the trampoline and fell back (a miss each).
  if (hotkernel::missesOf(servedOp("aten::sum.dim_IntList")) <= missesBefore) {
    std::cerr << "trampoline_overhead_bench: sum's trampoline counted no fallback: it was not on the path\n";
    return 1;
  }

  nlohmann::json results = nlohmann::json::array();
  std::printf("%-8s %12s %12s %12s %14s\n", "op", "none ns", "fallback ns", "disabled ns", "fallback-none");
  for (size_t i = 0; i < ops.size(); ++i) {
    const nlohmann::json n = summary(none[i]), f = summary(fallback[i]), d = summary(disabled[i]);
    const double fn = f["median"].get<double>() - n["median"].get<double>();
    const double fd = f["median"].get<double>() - d["median"].get<double>();
    std::printf("%-8s %12.1f %12.1f %12.1f %+14.1f\n", ops[i].name, n["median"].get<double>(),
                f["median"].get<double>(), d["median"].get<double>(), fn);
    results.push_back({{"op", ops[i].name},
                       {"nsPerCall", {{"none", n}, {"fallback", f}, {"disabled", d}}},
                       {"fallbackMinusNoneNs", fn},
                       {"fallbackMinusDisabledNs", fd}});
  }
  char date[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  const nlohmann::json doc = {{"format", "hotkernel-trampoline-overhead"},
                              {"version", 1},
                              {"benchmark", "trampoline_overhead"},
                              {"date", date},
                              {"machine", {{"cpu", cpuModel()}, {"torch", TORCH_VERSION}}},
                              {"shape", {rows, cols}},
                              {"calls", calls},
                              {"rounds", rounds},
                              {"results", results}};
  if (!outPath.empty()) {
    std::ofstream out(outPath);
    out << doc.dump(1) << "\n";
    if (!out) {
      std::cerr << "trampoline_overhead_bench: cannot write " << outPath << "\n";
      return 1;
    }
    std::printf("written %s\n", outPath.c_str());
  }
  return 0;
}
