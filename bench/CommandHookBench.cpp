// command_hook_bench: the host cost of the shim's CUDA command wrappers
// (Note [Flush before foreign commands] in interpose/preload/CommandHook.h)
// against the fake CUDA libraries of tests/interpose/fake/, so that it runs on
// any machine: a call of cuStreamQuery / cudaStreamQuery straight to the fake
// function, through the shim's export (bound by symbol), through the wrapper
// dlsym hands out on libcuda's handle, and the same with a chain pending but
// the thread inside the own-command guard (the pending load, then the guard).
//
//   build/bin/command_hook_bench [--calls N] [--rounds K] [--out FILE]
//
// The program links the shim as its first dependency (as LD_PRELOAD places
// it). Each round times N calls of every path in turn (steady clock); the
// paths rotate their order between rounds.
//
// Output JSON (format "hotkernel-command-hook-overhead", version 1):
//   {"format", "version", "benchmark", "date", "calls", "rounds",
//    "results": [{"path", "nsPerCall": {"median", "low", "high", "n"}}],
//    "wrapperMinusDirectNs": {"driverExport", "driverDlsym", "runtimeExport"}}
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "hotkernel/hotkernel_shim.h"

extern "C" int cuStreamQuery(void* stream);
extern "C" int cudaStreamQuery(void* stream);

namespace {

using QueryFn = int (*)(void*);

struct Path {
  std::string name;
  QueryFn fn;
  bool guarded;  // a chain pending, the thread inside the own-command guard
  std::vector<double> ns;
};

nlohmann::json summary(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  const double median = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
  return {{"median", median}, {"low", v.front()}, {"high", v.back()}, {"n", n}};
}

double median(std::vector<double> v) { return summary(std::move(v))["median"].get<double>(); }

double timeCalls(QueryFn fn, long calls) {
  void* volatile stream = nullptr;
  int sink = 0;
  const auto start = std::chrono::steady_clock::now();
  for (long i = 0; i < calls; ++i) sink += fn(stream);
  const auto end = std::chrono::steady_clock::now();
  if (sink == -1) std::puts("");
  return std::chrono::duration<double, std::nano>(end - start).count() / static_cast<double>(calls);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"command_hook_bench: the shim's command wrappers against direct calls (fake CUDA libraries)"};
  long calls = 2000000;
  int rounds = 15;
  std::string out;
  app.add_option("--calls", calls, "calls per path and round")->check(CLI::Range(1000L, 1000000000L));
  app.add_option("--rounds", rounds, "rounds")->check(CLI::Range(1, 1000));
  app.add_option("--out", out, "JSON output file");
  CLI11_PARSE(app, argc, argv);

  void* libcuda = dlopen(FAKE_LIBCUDA_PATH, RTLD_NOW | RTLD_LOCAL);
  void* libcudart = dlopen("libcudart.so.12", RTLD_NOW | RTLD_NOLOAD);
  if (!libcuda || !libcudart) {
    std::fprintf(stderr, "command_hook_bench: the fake CUDA libraries are missing: %s\n", dlerror());
    return 2;
  }
  auto own = reinterpret_cast<void* (*)(const char*)>(dlsym(libcuda, "fakecuda_own"));
  std::vector<Path> paths = {
      {"driver direct", reinterpret_cast<QueryFn>(own("cuStreamQuery")), false, {}},
      {"driver shim export", &cuStreamQuery, false, {}},
      {"driver shim dlsym wrapper", reinterpret_cast<QueryFn>(dlsym(libcuda, "cuStreamQuery")), false, {}},
      {"driver shim export, pending inside guard", &cuStreamQuery, true, {}},
      {"runtime direct", reinterpret_cast<QueryFn>(dlsym(libcudart, "cudaStreamQuery")), false, {}},
      {"runtime shim export", &cudaStreamQuery, false, {}},
  };
  for (int r = 0; r < rounds; ++r) {
    for (size_t k = 0; k < paths.size(); ++k) {
      Path& p = paths[(k + static_cast<size_t>(r)) % paths.size()];
      if (p.guarded) {
        hotkernel_shim_set_pending(1);
        hotkernel_shim_enter_own();
      }
      p.ns.push_back(timeCalls(p.fn, calls));
      if (p.guarded) {
        hotkernel_shim_leave_own();
        hotkernel_shim_set_pending(0);
      }
    }
  }

  nlohmann::json results = nlohmann::json::array();
  for (const Path& p : paths) {
    results.push_back({{"path", p.name}, {"nsPerCall", summary(p.ns)}});
    std::printf("%-42s %7.2f ns/call\n", p.name.c_str(), median(p.ns));
  }
  char date[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  const nlohmann::json doc = {
      {"format", "hotkernel-command-hook-overhead"},
      {"version", 1},
      {"benchmark", "command_hook_bench"},
      {"date", date},
      {"calls", calls},
      {"rounds", rounds},
      {"results", results},
      {"wrapperMinusDirectNs",
       {{"driverExport", median(paths[1].ns) - median(paths[0].ns)},
        {"driverDlsym", median(paths[2].ns) - median(paths[0].ns)},
        {"runtimeExport", median(paths[5].ns) - median(paths[4].ns)}}}};
  if (!out.empty()) {
    std::ofstream f(out);
    f << doc.dump(2) << "\n";
    if (!f) {
      std::fprintf(stderr, "command_hook_bench: cannot write %s\n", out.c_str());
      return 2;
    }
  } else {
    std::cout << doc.dump(2) << "\n";
  }
  return 0;
}
