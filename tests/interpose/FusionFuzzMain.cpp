// fusion_fuzz: the fusion fuzz suite's long run (Note [Fusion fuzz
// programs]). Runs N programs from a seed and writes a JSON report
// (format "hotkernel-fusion-fuzz", version 1: documented in bench/README.md);
// --merge sums reports of several runs (other seeds) into one. Exit status:
// 0 no mismatch, 1 mismatches, 2 bad usage or an unreadable report (or, in
// fusion_fuzz_gpu, no CUDA device). Built a second time as fusion_fuzz_gpu
// (HOTKERNEL_FUSION_FUZZ_GPU): the same programs on the GPU with real fused
// kernels (Note [The fuzz suite on a GPU]); --shim there takes the commands
// through the preloaded shim (Note [The fuzz suite under the shim]). The
// report's `device` ("cpu" / "cuda") and `shim` (bool) are optional fields
// of version 1 (absent: "cpu", false), as are `requestedPrograms` and
// `stoppedEarly` (true when --seconds ran out or SIGINT / SIGTERM arrived
// first: the report then counts the programs run; merged: any run's).
#include <signal.h>
#include <sys/utsname.h>
#include <torch/version.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <ctime>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "FusionFuzz.h"

#ifdef HOTKERNEL_FUSION_FUZZ_GPU
#include "FuzzChainKernels.h"
#else
#include "FuzzHostKernels.h"
#endif

using namespace hotkernel::fusion::fuzz;
using nlohmann::json;

namespace {

volatile sig_atomic_t stopSignal = 0;
extern "C" void onStopSignal(int) { stopSignal = 1; }

constexpr const char* kFormat = "hotkernel-fusion-fuzz";
constexpr int kVersion = 1;

std::string cpuModel() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      const size_t colon = line.find(':');
      if (colon != std::string::npos) return line.substr(colon + 2);
    }
  }
  return "unknown";
}

json machine() {
  utsname u{};
  uname(&u);
  json m = {{"cpu", cpuModel()}, {"kernel", std::string(u.sysname) + " " + u.release}, {"arch", u.machine}};
#ifdef HOTKERNEL_FUSION_FUZZ_GPU
  const hotkernel::DeviceInfo d = hotkernel::queryDevice(0);
  m["gpu"] = d.name;
  m["driver"] = d.driverVersion;
#endif
  return m;
}

std::string utcNow() {
  const std::time_t now = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  return buf;
}

int merge(const std::vector<std::string>& files, const std::string& out) {
  json total = {{"format", kFormat}, {"version", kVersion}, {"programs", 0}, {"mismatches", 0},
                {"unwrittenReads", 0}, {"seconds", 0.0}, {"runs", json::array()}, {"counts", json::object()},
                {"failures", json::array()}};
  for (const std::string& f : files) {
    std::ifstream in(f);
    json r = json::parse(in, nullptr, false);
    if (r.is_discarded() || r.value("format", "") != kFormat || r.value("version", 0) != kVersion) {
      std::cerr << "fusion_fuzz: " << f << " is not a " << kFormat << " v" << kVersion << " report\n";
      return 2;
    }
    for (const char* k : {"programs", "mismatches", "unwrittenReads"}) total[k] = total[k].get<int64_t>() + r[k].get<int64_t>();
    total["seconds"] = total["seconds"].get<double>() + r["seconds"].get<double>();
    for (auto& [k, v] : r["counts"].items()) total["counts"][k] = total["counts"].value(k, uint64_t{0}) + v.get<uint64_t>();
    for (auto& f2 : r["failures"]) total["failures"].push_back(f2);
    for (auto& run : r.value("runs", json::array())) total["runs"].push_back(run);
    if (!r.contains("runs")) total["runs"].push_back({{"seed", r["seed"]}, {"programs", r["programs"]}, {"seconds", r["seconds"]}});
    for (const char* k : {"machine", "torch", "date"}) total[k] = r[k];
    total["device"] = r.value("device", std::string("cpu"));
    total["shim"] = r.value("shim", false);
    total["stoppedEarly"] = total.value("stoppedEarly", false) || r.value("stoppedEarly", false);
    total["requestedPrograms"] = total.value("requestedPrograms", int64_t{0}) + r.value("requestedPrograms", r["programs"].get<int64_t>());
  }
  std::ofstream o(out);
  o << total.dump(2) << "\n";
  std::cout << "merged " << files.size() << " reports: " << total["programs"] << " programs, " << total["mismatches"]
            << " mismatches, " << total["unwrittenReads"] << " unwritten reads\n";
  // The first failures on stdout too: a device call may bring back its output and not the reports.
  size_t shown = 0;
  for (const auto& f : total["failures"]) {
    if (shown++ == 10) break;
    std::cout << "  " << f.get<std::string>() << "\n";
  }
  return total["mismatches"].get<int64_t>() == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"The fusion engine's fuzz suite on the CPU: random programs against plain eager"};
  FuzzOptions options;
  std::string out;
  std::vector<std::string> mergeFiles;
  app.add_option("--programs", options.programs, "programs to run")->check(CLI::Range(int64_t{1}, int64_t{1} << 40));
  app.add_option("--seed", options.seed, "the run's seed");
  app.add_option("--programs-per-pool", options.programsPerPool, "programs between two learned pools")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 40));
  app.add_option("--templates", options.templatesPerPool, "chain templates per pool")->check(CLI::Range(1, 1000));
  app.add_option("--json", out, "write the report here");
  app.add_option("--first-program", options.firstProgram, "start at this program (to replay a failure)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 40));
  double budgetSeconds = 0;
  app.add_option("--seconds", budgetSeconds,
                 "start no program after this many seconds (0: none); the report counts the programs run")
      ->check(CLI::Range(0.0, 1e9));
  bool trace = false;
  app.add_flag("--trace", trace, "write the engine run's actions to stderr");
  bool shim = false;
#ifdef HOTKERNEL_FUSION_FUZZ_GPU
  int64_t poisonMiB = 0;
  app.add_option("--poison-allocator", poisonMiB,
                 "fill this many MiB of the CUDA caching allocator's blocks with 0xff bytes (NaN in every float "
                 "type) before the run, so that a read of memory nothing wrote shows from the first program "
                 "(Note [Stale memory in the GPU fuzz])")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 20));
  app.add_flag("--shim", shim,
               "commands through the preloaded shim's hook, real CUDA commands for the programs' own "
               "(Note [The fuzz suite under the shim])");
#endif
#ifndef HOTKERNEL_FUSION_FUZZ_GPU
  bool hostKernels = false;
  app.add_flag("--host-kernels", hostKernels,
               "the pools' fused kernels are the generator's, compiled for the host "
               "(Note [Generated kernels in the CPU fuzz]), instead of the interpreter's and exact ones");
#endif
  app.add_option("--merge", mergeFiles, "sum these reports into --json instead of running");
  CLI11_PARSE(app, argc, argv);
  if (!mergeFiles.empty()) {
    if (out.empty()) {
      std::cerr << "fusion_fuzz: --merge needs --json\n";
      return 2;
    }
    return merge(mergeFiles, out);
  }
  if (trace) options.trace = &std::cerr;
#ifdef HOTKERNEL_FUSION_FUZZ_GPU
  if (!at::cuda::is_available() || at::cuda::device_count() == 0) {
    std::cerr << "fusion_fuzz_gpu: no CUDA device\n";
    return 2;
  }
  setFuzzDevice(c10::DeviceType::CUDA);
  if (shim && !setFuzzShim()) {
    std::cerr << "fusion_fuzz_gpu: --shim needs the shim's command hook covering every command: run it as "
                 "HOTKERNEL=0 LD_PRELOAD=<build>/lib/libhotkernel_preload.so fusion_fuzz_gpu --shim ...\n";
    return 2;
  }
  if (poisonMiB > 0) gpu::poisonCachingAllocator(poisonMiB);
  gpu::FuzzKernelCounts kernelCounts;
  options.makeKernels = gpu::chainKernelMaker(kernelCounts);
  const std::string device = "cuda";
#else
  host::HostKernelCounts hostCounts;
  if (hostKernels) options.makeKernels = host::hostKernelMaker(hostCounts);
  const std::string device = "cpu";
#endif
  const auto start = std::chrono::steady_clock::now();
  // A deadline or a signal ends the run between two programs, with its report (Note [Fusion fuzz programs]).
  struct sigaction sa {};
  sa.sa_handler = onStopSignal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  bool stoppedEarly = false;
  options.stop = [&] {
    const bool late = budgetSeconds > 0 &&
                      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() > budgetSeconds;
    stoppedEarly = stoppedEarly || late || stopSignal != 0;
    return stoppedEarly;
  };
  options.progress = [&](int64_t done) {
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (done % 50000 == 0) std::cerr << "fusion_fuzz: " << done << " programs, " << s << " s\n";
  };
#ifdef HOTKERNEL_FUSION_FUZZ_GPU
  FuzzReport r = runFusionFuzz(options);
  gpu::addKernelCounts(r, kernelCounts);
#else
  FuzzReport r = runFusionFuzz(options);
  if (hostKernels) host::addHostKernelCounts(r, hostCounts);
#endif
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  json j = {{"format", kFormat},
            {"version", kVersion},
            {"seed", options.seed},
            {"device", device},
            {"shim", shim},
            {"programs", r.programs},
            {"requestedPrograms", options.programs},
            {"stoppedEarly", stoppedEarly},
            {"programsPerPool", options.programsPerPool},
            {"templatesPerPool", options.templatesPerPool},
            {"mismatches", r.mismatches},
            {"unwrittenReads", r.unwrittenReads},
            {"seconds", seconds},
            {"counts", r.counts},
            {"failures", r.failures},
            {"machine", machine()},
            {"torch", TORCH_VERSION},
            {"date", utcNow()}};
  std::cout << r.programs << " programs" << (stoppedEarly ? " (stopped early)" : "") << " in " << seconds << " s: " << r.mismatches << " mismatches, "
            << r.unwrittenReads << " unwritten reads\n";
  for (const std::string& f : r.failures) std::cout << "  " << f << "\n";
  if (!out.empty()) {
    std::ofstream o(out);
    o << j.dump(2) << "\n";
  }
  return r.mismatches == 0 ? 0 : 1;
}
