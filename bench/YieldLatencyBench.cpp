// yield_latency_bench: how fast the background optimizer yields the GPU when
// serving traffic resumes.
//
//   build/bin/yield_latency_bench [--rows R --cols C] [--pulses N] [--out FILE]
//
// A thread tunes a softmax variant with the optimizer's idle gate (as the
// in-process optimizer does). The main thread, at random moments, plays a
// serving burst: it reports activity and records the time; the optimizer's
// yield point records when it stopped issuing GPU work (it returns to the gate
// only after its last unit of work finished on the GPU). Latency = stop time -
// activity time; reported as median, p95 and max over the pulses.
// Output: "hotkernel-bench" v1 JSON, benchmark "yield_latency".
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <cuda_runtime_api.h>
#include <torch/headeronly/version.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <iostream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>
#include <vector>

#include "hotkernel/Config.h"
#include "hotkernel/runtime/IdleGate.h"
#include "hotkernel/optimizer/SoftmaxTuner.h"
#include "hotkernel/optimizer/Statistics.h"

using hotkernel::IdleGate;

int main(int argc, char** argv) {
  int64_t rows = 4096, cols = 32000;
  int pulses = 25;
  std::string outPath;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--rows") rows = std::atoll(next().c_str());
    else if (a == "--cols") cols = std::atoll(next().c_str());
    else if (a == "--pulses") pulses = std::atoi(next().c_str());
    else if (a == "--out") outPath = next();
    else {
      std::cerr << "usage: yield_latency_bench [--rows R] [--cols C] [--pulses N] [--out FILE]\n";
      return 2;
    }
  }
  if (!at::cuda::is_available()) {
    std::cerr << "yield_latency_bench: no CUDA device\n";
    return 3;
  }
  constexpr double kIdleMs = 20.0;
  std::mutex mu;
  int64_t pendingActivityNs = 0;  // guarded by mu: the activity waiting for a yield
  std::vector<double> latenciesMs;
  std::atomic<bool> done{false};
  std::atomic<int> units{0};
  std::atomic<int64_t> lastUnitNs{0};  // when the optimizer last passed a yield point
  int skipped = 0;                     // pulses that found the optimizer compiling (no GPU work to yield)

  std::thread optimizer([&] {
    IdleGate::ScopedOptimizerThread mark;
    hotkernel::TunerOptions o;
    o.yieldPoint = [&] {
      ++units;
      lastUnitNs = IdleGate::nowNs();
      if (!IdleGate::instance().idleFor(kIdleMs)) {
        const int64_t stoppedNs = IdleGate::nowNs();  // no GPU work of ours is in flight here
        std::lock_guard<std::mutex> g(mu);
        if (pendingActivityNs) {
          latenciesMs.push_back((stoppedNs - pendingActivityNs) / 1e6);
          pendingActivityNs = 0;
        }
      }
      return IdleGate::instance().waitUntilIdle(kIdleMs, nullptr, 60.0);
    };
    try {
      for (int round = 0; !done.load(); ++round) {
        hotkernel::tuneSoftmax({hotkernel::kernels::DType::BFloat16, rows, cols}, 0, o);
      }
    } catch (const std::exception& e) {
      std::cerr << "tuning stopped: " << e.what() << "\n";
    }
  });

  std::mt19937 rng(std::random_device{}());
  std::uniform_int_distribution<int> gapMs(60, 250);
  std::this_thread::sleep_for(std::chrono::seconds(2));  // let tuning reach the GPU phase
  for (int p = 0; p < pulses; ++p) {
    std::this_thread::sleep_for(std::chrono::milliseconds(gapMs(rng)));
    {
      std::lock_guard<std::mutex> g(mu);
      // Units of GPU work last at most a few ms; a longer silence means the
      // optimizer is compiling on the CPU and holds no GPU work to yield.
      if (IdleGate::nowNs() - lastUnitNs.load() > 50'000'000) {
        ++skipped;
      } else {
        pendingActivityNs = IdleGate::nowNs();
      }
    }
    // A serving burst of ~2 x idle time: activity every millisecond.
    for (int k = 0; k < 2 * static_cast<int>(kIdleMs); ++k) {
      IdleGate::instance().noteActivity();
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  done = true;
  optimizer.join();

  std::vector<double> l = latenciesMs;
  std::sort(l.begin(), l.end());
  nlohmann::json doc = {{"format", "hotkernel-bench"}, {"version", 1}, {"benchmark", "yield_latency"}};
  std::time_t t = std::time(nullptr);
  char date[64];
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  int driver = 0;
  cudaDriverGetVersion(&driver);
  doc["date"] = date;
  doc["gpu"] = at::cuda::getDeviceProperties(0)->name;
  doc["driver"] = driver;
  doc["torch"] = TORCH_VERSION;
  doc["hotkernel"] = HOTKERNEL_VERSION;
  doc["variant"] = {{"op", "softmax"}, {"dtype", "bfloat16"}, {"rows", rows}, {"cols", cols}};
  doc["pulses"] = pulses;
  doc["measured"] = l.size();
  doc["unitsOfWork"] = units.load();
  doc["pulsesDuringCompile"] = skipped;
  doc["idleMs"] = kIdleMs;
  if (!l.empty()) {
    doc["latencyMsMedian"] = l[l.size() / 2];
    doc["latencyMsP95"] = l[std::min(l.size() - 1, static_cast<size_t>(0.95 * l.size()))];
    doc["latencyMsMax"] = l.back();
    doc["latenciesMs"] = l;
  }
  std::printf("yield latency over %zu pulses: median %.3f ms, p95 %.3f ms, max %.3f ms\n", l.size(),
              l.empty() ? 0.0 : l[l.size() / 2], l.empty() ? 0.0 : doc["latencyMsP95"].get<double>(),
              l.empty() ? 0.0 : l.back());
  if (!outPath.empty()) {
    std::ofstream f(outPath);
    f << doc.dump(2) << "\n";
  }
  return l.empty() ? 1 : 0;
}
