// softmax_preload_bench: aten softmax with hotkernel vs plain eager, side by
// side in one process, with the project's benchmark method.
//
//   LD_PRELOAD=build/lib/libhotkernel_preload.so HOTKERNEL_SAMPLE=1 \
//     build/bin/softmax_preload_bench --shapes 4096x32000,8192x128256 --dtype bfloat16 --out result.json
//
// For each shape it calls softmax until hotkernel's recorder finds the variant
// hot, waits for the in-process optimizer (record -> NVRTC -> check -> time ->
// swap), then times eager (hotkernel_set_enabled(0)) against hotkernel
// (hotkernel_set_enabled(1)) interleaved, and reports max errors against eager
// and against a float64 reference.
//
// Output format "hotkernel-bench" version 1 (JSON): {format, version, benchmark,
// date, gpu, driver, cudaRuntime, torch, hotkernel, method, results: [...]}.
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <torch/headeronly/version.h>

#include <cstdio>
#include <ctime>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "hotkernel/Config.h"
#include "hotkernel/optimizer/Benchmark.h"

namespace {

struct Api {
  int (*setEnabled)(int) = nullptr;
  int (*waitIdle)(double) = nullptr;
  int (*statusJson)(char*, int) = nullptr;
};

nlohmann::json status(const Api& api) {
  int n = api.statusJson(nullptr, 0);
  std::string buf(static_cast<size_t>(std::max(n, 1)), '\0');
  api.statusJson(buf.data(), n);
  return nlohmann::json::parse(buf.c_str());
}

std::string isoDate() {
  std::time_t t = std::time(nullptr);
  char buf[64];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

double maxAbs(const at::Tensor& a, const at::Tensor& b) {
  return (a.to(at::kDouble) - b.to(at::kDouble)).abs().max().item<double>();
}

int usage(const char* msg) {
  std::cerr << "softmax_preload_bench: " << msg
            << "\nusage: LD_PRELOAD=libhotkernel_preload.so softmax_preload_bench [--shapes RxC,...] "
               "[--dtype bfloat16|float16|float32] [--pairs N] [--out FILE]\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::pair<int64_t, int64_t>> shapes = {{4096, 32000}, {8192, 128256}};
  std::string dtypeName = "bfloat16", outPath;
  int pairs = 41;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--shapes") {
      shapes.clear();
      std::stringstream ss(next());
      std::string item;
      while (std::getline(ss, item, ',')) {
        long long r = 0, c = 0;
        if (std::sscanf(item.c_str(), "%lldx%lld", &r, &c) != 2 || r < 1 || c < 1) return usage("bad --shapes");
        shapes.emplace_back(r, c);
      }
    } else if (a == "--dtype") {
      dtypeName = next();
    } else if (a == "--pairs") {
      pairs = std::atoi(next().c_str());
      if (pairs < 7) return usage("--pairs must be >= 7");
    } else if (a == "--out") {
      outPath = next();
    } else {
      return usage(("unknown argument " + a).c_str());
    }
  }
  at::ScalarType dtype = dtypeName == "bfloat16" ? at::kBFloat16
                         : dtypeName == "float16" ? at::kHalf
                         : dtypeName == "float32" ? at::kFloat
                                                  : at::kByte;
  if (dtype == at::kByte) return usage("bad --dtype");

  Api api;
  api.setEnabled = reinterpret_cast<int (*)(int)>(dlsym(RTLD_DEFAULT, "hotkernel_set_enabled"));
  api.waitIdle = reinterpret_cast<int (*)(double)>(dlsym(RTLD_DEFAULT, "hotkernel_wait_idle"));
  api.statusJson = reinterpret_cast<int (*)(char*, int)>(dlsym(RTLD_DEFAULT, "hotkernel_status_json"));
  if (!api.setEnabled || !api.waitIdle || !api.statusJson) {
    return usage("hotkernel is not loaded: run under LD_PRELOAD=.../libhotkernel_preload.so");
  }
  if (!at::cuda::is_available()) {
    std::cerr << "softmax_preload_bench: no CUDA device\n";
    return 3;
  }

  int driver = 0, runtime = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  nlohmann::json doc = {
      {"format", "hotkernel-bench"},
      {"version", 1},
      {"benchmark", "softmax_preload"},
      {"date", isoDate()},
      {"gpu", at::cuda::getDeviceProperties(0)->name},
      {"driver", driver},
      {"cudaRuntime", runtime},
      {"torch", TORCH_VERSION},
      {"hotkernel", HOTKERNEL_VERSION},
      {"method",
       "CUDA events on a dedicated stream, L2 flushed before each run, eager and hotkernel interleaved "
       "(A B / B A), median of paired ratios with 95% CI (order statistics)"},
      {"results", nlohmann::json::array()}};

  for (auto [rows, cols] : shapes) {
    at::Tensor x = at::randn({rows, cols}, at::TensorOptions().device(at::kCUDA)).mul_(4).to(dtype);
    // Make the variant hot, then let the in-process optimizer finish.
    for (int i = 0; i < 200; ++i) (void)at::softmax(x, -1);
    at::cuda::getCurrentCUDAStream().synchronize();
    const bool idle = api.waitIdle(600.0) == 0;
    nlohmann::json st = status(api);
    std::string kernel;
    for (const auto& p : st["plans"]) {
      if (p["variant"].get<std::string>().find(";rows=" + std::to_string(rows) + ";cols=" + std::to_string(cols)) !=
          std::string::npos) {
        kernel = p["kernel"];
      }
    }
    api.setEnabled(0);
    at::Tensor eager = at::softmax(x, -1);
    api.setEnabled(1);
    at::Tensor mine = at::softmax(x, -1);
    at::Tensor ref = at::softmax(x.to(at::kDouble), -1);

    hotkernel::BenchmarkOptions bo;
    bo.pairs = pairs;
    bo.maxSeconds = 20.0;
    hotkernel::Comparison cmp = hotkernel::benchmarkInterleaved(
        [&] {
          api.setEnabled(0);
          (void)at::softmax(x, -1);
        },
        [&] {
          api.setEnabled(1);
          (void)at::softmax(x, -1);
        },
        0, bo);
    // The copy bandwidth of this GPU, measured in the same run on the same bytes.
    at::Tensor dst = at::empty_like(x);
    hotkernel::Comparison copy = hotkernel::benchmarkInterleaved([&] { dst.copy_(x); }, [&] { dst.copy_(x); }, 0, bo);
    api.setEnabled(1);

    const double bytes = 2.0 * static_cast<double>(x.numel()) * x.element_size();
    const double copyGbps = bytes / (copy.baseline.median * 1e-6) / 1e9;
    nlohmann::json r = {{"op", "softmax"},
                        {"shape", {rows, cols}},
                        {"dtype", dtypeName},
                        {"swapped", !kernel.empty()},
                        {"optimizerIdle", idle},
                        {"kernel", kernel},
                        {"eagerUs", cmp.baseline.median},
                        {"eagerUsCi", {cmp.baseline.low, cmp.baseline.high}},
                        {"hotkernelUs", cmp.candidate.median},
                        {"hotkernelUsCi", {cmp.candidate.low, cmp.candidate.high}},
                        {"speedup", cmp.speedup.median},
                        {"speedupCi", {cmp.speedup.low, cmp.speedup.high}},
                        {"pairs", cmp.speedup.n},
                        {"eagerGBps", bytes / (cmp.baseline.median * 1e-6) / 1e9},
                        {"hotkernelGBps", bytes / (cmp.candidate.median * 1e-6) / 1e9},
                        {"copyGBps", copyGbps},
                        {"hotkernelPctOfCopy", 100.0 * copy.baseline.median / cmp.candidate.median},
                        {"maxAbsErrVsEager", maxAbs(mine, eager)},
                        {"maxAbsErrVsFp64Hotkernel", maxAbs(mine, ref)},
                        {"maxAbsErrVsFp64Eager", maxAbs(eager, ref)}};
    doc["results"].push_back(r);
    std::printf("softmax %s [%lld, %lld]: eager %.1f us, hotkernel %.1f us, speed-up %.3fx (95%% CI %.3f-%.3f), "
                "%.0f%% of copy BW, max|err| vs eager %.3g, kernel: %s\n",
                dtypeName.c_str(), static_cast<long long>(rows), static_cast<long long>(cols), cmp.baseline.median,
                cmp.candidate.median, cmp.speedup.median, cmp.speedup.low, cmp.speedup.high,
                r["hotkernelPctOfCopy"].get<double>(), r["maxAbsErrVsEager"].get<double>(),
                kernel.empty() ? "(none: ATen kept)" : kernel.c_str());
    std::fflush(stdout);
  }
  doc["hotkernelStatus"] = status(api)["tuned"];
  const std::string text = doc.dump(2) + "\n";
  if (!outPath.empty()) {
    std::ofstream f(outPath);
    f << text;
    if (!f) {
      std::cerr << "softmax_preload_bench: cannot write " << outPath << "\n";
      return 1;
    }
  }
  return 0;
}
