// nvtx_overhead_bench: the host cost of the NVTX range around a plan's launch
// (Note [NVTX ranges around plan launches] in runtime/NvtxRange.h): CPU time
// per CudaKernelLauncher::launch of one empty kernel, from a launcher loaded
// with ranges off and one loaded with ranges on, in one process.
//
//   build/bin/nvtx_overhead_bench [--fake-driver PATH] [--launches N] [--rounds K] [--out FILE]
//
// On a GPU it launches a real empty kernel (compiled by NVRTC for device 0)
// through the real driver on the legacy default stream. Without one,
// --fake-driver build/tests/runtime/fakedriver/libcuda.so.1 loads the fake
// driver of the tests (launches that run nothing, of an image it does not
// read, so nothing is compiled), which isolates the range's own cost. Each round times N launches of each launcher (steady clock; the
// order alternates between rounds) and synchronizes the context after each
// batch, outside the timing, so that the launch queue never fills; the
// paired difference on - off is taken per round. A third loop times a push
// and pop of the registered name alone. Run it under a profiler (nsys
// profile -t cuda,nvtx) to see the ranges and their cost with a tool
// attached; "profilerAttached" records whether NVTX_INJECTION64_PATH is set.
//
// Output JSON (format "hotkernel-nvtx-overhead", version 1):
//   {"format", "version", "benchmark", "date", "machine": {"cpu", "device",
//    "driverVersion", "fakeDriver"}, "profilerAttached", "launches", "rounds",
//    "nsPerLaunch": {"off", "on"}: {"median", "low", "high", "n"},
//    "onMinusOffNs": {"median", "low", "high", "n"} (per round),
//    "rangeOnlyNs": {"median", "low", "high", "n"} (a push and a pop)}
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "hotkernel/runtime/CudaDriver.h"
#include "hotkernel/runtime/CudaKernelLauncher.h"
#include "hotkernel/runtime/NvtxRange.h"
#include "hotkernel/runtime/Nvrtc.h"

namespace {

using namespace hotkernel;
using Clock = std::chrono::steady_clock;

constexpr const char* kKernelSource =
    "extern \"C\" __global__ void hk_nvtx_bench(const void* in, void* out, long long rows, long long cols) {}\n";

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

std::string utcNow() {
  const std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

// ns per launch of `n` launches (no synchronization inside the timing).
double timeLaunches(const CudaKernelLauncher& launcher, long n, bool& ok) {
  const RowKernelArgs args{nullptr, nullptr, 0, 0};
  const auto t0 = Clock::now();
  for (long i = 0; i < n; ++i) ok &= launcher.launch(args, nullptr);
  const auto t1 = Clock::now();
  return std::chrono::duration<double, std::nano>(t1 - t0).count() / static_cast<double>(n);
}

double timeRangeOnly(const NvtxRangeName& name, long n) {
  const auto t0 = Clock::now();
  for (long i = 0; i < n; ++i) {
    name.push();
    name.pop();
  }
  const auto t1 = Clock::now();
  return std::chrono::duration<double, std::nano>(t1 - t0).count() / static_cast<double>(n);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"nvtx_overhead_bench: CPU time per plan launch with the NVTX range on and off"};
  std::string fakeDriver, out;
  long launches = 256;
  int rounds = 200;
  app.add_option("--fake-driver", fakeDriver, "a fake libcuda.so.1 to load instead of the driver (no GPU needed)");
  app.add_option("--launches", launches, "launches per launcher and round")->check(CLI::Range(16L, 1000000L));
  app.add_option("--rounds", rounds, "rounds")->check(CLI::Range(3, 100000));
  app.add_option("--out", out, "JSON output file");
  CLI11_PARSE(app, argc, argv);

  // Loaded first, the fake is what the runtime's dlopen("libcuda.so.1") finds (its soname is loaded).
  if (!fakeDriver.empty() && !::dlopen(fakeDriver.c_str(), RTLD_NOW | RTLD_GLOBAL)) {
    std::cerr << "nvtx_overhead_bench: cannot load " << fakeDriver << ": " << ::dlerror() << "\n";
    return 2;
  }
  if (cudaDriver() == nullptr) {
    std::cerr << "nvtx_overhead_bench: no CUDA driver; without a GPU pass --fake-driver "
                 "build/tests/runtime/fakedriver/libcuda.so.1\n";
    return 2;
  }
  using SyncFn = int (*)();
  void* driver = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  const auto synchronize = driver ? reinterpret_cast<SyncFn>(::dlsym(driver, "cuCtxSynchronize")) : nullptr;
  if (!synchronize) {
    std::cerr << "nvtx_overhead_bench: the driver has no cuCtxSynchronize\n";
    return 2;
  }
  try {
    const DeviceInfo device = queryDevice(0);
    std::string cubin = "the fake driver reads no image";
    if (fakeDriver.empty()) {
      if (!nvrtcAvailable()) {
        std::cerr << "nvtx_overhead_bench: NVRTC unavailable: " << nvrtcUnavailableReason() << "\n";
        return 2;
      }
      cubin = compileToCubin(kKernelSource, "nvtx_bench.cu", device.nvrtcArch(), {}).cubin;
    }
    const LaunchGeometry geometry{1, 32, 0};
    setNvtxRanges(false);
    const auto off = CudaKernelLauncher::load(0, cubin, "hk_nvtx_bench", geometry, 16, "nvtx_bench[off]");
    setNvtxRanges(true);
    const auto on = CudaKernelLauncher::load(0, cubin, "hk_nvtx_bench", geometry, 16,
                                             "nvtx_bench[empty kernel] for 1 CTA x 32 threads");
    const NvtxRangeName rangeOnly = NvtxRangeName::registered("nvtx_bench[range only]");

    bool ok = true;
    for (int i = 0; i < 4; ++i) {  // warm-up: first launches, NVTX's first call (its tool lookup)
      timeLaunches(*off, launches, ok);
      timeLaunches(*on, launches, ok);
      synchronize();
    }
    std::vector<double> offNs, onNs, diffNs, rangeNs;
    for (int r = 0; r < rounds; ++r) {
      double a = 0, b = 0;
      if (r % 2 == 0) {
        a = timeLaunches(*off, launches, ok);
        synchronize();
        b = timeLaunches(*on, launches, ok);
      } else {
        b = timeLaunches(*on, launches, ok);
        synchronize();
        a = timeLaunches(*off, launches, ok);
      }
      synchronize();
      offNs.push_back(a);
      onNs.push_back(b);
      diffNs.push_back(b - a);
      rangeNs.push_back(timeRangeOnly(rangeOnly, launches));
    }
    if (!ok) {
      std::cerr << "nvtx_overhead_bench: a launch failed\n";
      return 1;
    }
    const char* tool = std::getenv("NVTX_INJECTION64_PATH");
    nlohmann::json doc = {
        {"format", "hotkernel-nvtx-overhead"},
        {"version", 1},
        {"benchmark", "nvtx_overhead_bench"},
        {"date", utcNow()},
        {"machine",
         {{"cpu", cpuModel()},
          {"device", device.name},
          {"driverVersion", device.driverVersion},
          {"fakeDriver", !fakeDriver.empty()}}},
        {"profilerAttached", tool != nullptr && *tool != '\0'},
        {"launches", launches},
        {"rounds", rounds},
        {"nsPerLaunch", {{"off", summary(offNs)}, {"on", summary(onNs)}}},
        {"onMinusOffNs", summary(diffNs)},
        {"rangeOnlyNs", summary(rangeNs)},
    };
    std::printf("%s: off %.1f ns/launch, on %.1f ns/launch, on - off %.1f ns (median of %d rounds), "
                "push + pop alone %.1f ns\n",
                device.name.c_str(), doc["nsPerLaunch"]["off"]["median"].get<double>(),
                doc["nsPerLaunch"]["on"]["median"].get<double>(), doc["onMinusOffNs"]["median"].get<double>(), rounds,
                doc["rangeOnlyNs"]["median"].get<double>());
    if (!out.empty()) {
      std::ofstream f(out);
      f << doc.dump(1) << "\n";
      if (!f) {
        std::cerr << "nvtx_overhead_bench: cannot write " << out << "\n";
        return 2;
      }
      std::printf("written %s\n", out.c_str());
    }
  } catch (const std::exception& e) {
    std::cerr << "nvtx_overhead_bench: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
