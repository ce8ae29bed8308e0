// hotkernel-warmup: fills the kernel cache for this GPU from a recorded
// profile, offline, with no model (inputs are synthesized per variant).
//
//   hotkernel-warmup --profile FILE [--budget 10m] [--cache-dir DIR] [--device N] [--json OUT]
//
// Targets are the profile's variants of ops hotkernel serves, largest expected
// GPU time first (estimated calls x bytes moved). Variants that already have a
// decision in the cache are skipped, so a second run resumes where the first
// stopped. The budget is checked before every unit of GPU work; a target cut
// short is left undecided for the next run. Exit: 0 done (or budget reached),
// 2 bad input, 3 no CUDA device.
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <cuda_runtime_api.h>
#include <torch/headeronly/version.h>

#include <ctime>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "Runtime.h"
#include "hotkernel/Config.h"
#include "hotkernel/kernels/SoftmaxFamily.h"
#include "hotkernel/optimizer/PlanFactory.h"
#include "hotkernel/runtime/Logging.h"

namespace {

using Clock = std::chrono::steady_clock;

int usage(const std::string& msg) {
  std::cerr << "hotkernel warmup: " << msg
            << "\nusage: hotkernel warmup --profile FILE [--budget DURATION] [--cache-dir DIR] [--device N] "
               "[--json OUT]\n  DURATION: seconds, or a number with s, m or h (e.g. 90s, 10m, 1h)\n";
  return 2;
}

// "90", "90s", "10m", "1h" -> seconds; negative on error.
double parseDuration(const std::string& s) {
  if (s.empty()) return -1;
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (end == s.c_str() || v <= 0) return -1;
  std::string unit(end);
  if (unit.empty() || unit == "s") return v;
  if (unit == "m") return v * 60;
  if (unit == "h") return v * 3600;
  return -1;
}

struct Target {
  hotkernel::VariantKey key;
  double estimatedCalls = 0;
  double weight = 0;  // expected GPU time proxy: calls x bytes moved
};

}  // namespace

int main(int argc, char** argv) {
  std::string profilePath, cacheDir, jsonOut;
  double budget = 3600;
  int device = 0;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--profile") profilePath = next();
    else if (a == "--budget") {
      budget = parseDuration(next());
      if (budget <= 0) return usage("bad --budget");
    } else if (a == "--cache-dir") cacheDir = next();
    else if (a == "--device") device = std::atoi(next().c_str());
    else if (a == "--json") jsonOut = next();
    else if (a == "-h" || a == "--help") {
      usage("fills the kernel cache for this GPU from a recorded profile");
      return 0;
    } else return usage("unknown argument '" + a + "'");
  }
  if (profilePath.empty()) return usage("--profile is required");
  if (!cacheDir.empty()) setenv("HOTKERNEL_CACHE_DIR", cacheDir.c_str(), 1);
  if (!std::getenv("HOTKERNEL_LOG_LEVEL")) hotkernel::setLogLevel(hotkernel::LogLevel::Warn);

  nlohmann::json profile;
  {
    std::ifstream f(profilePath);
    if (!f) return usage("cannot read " + profilePath);
    profile = nlohmann::json::parse(f, nullptr, /*allow_exceptions=*/false);
  }
  if (!profile.is_object() || profile.value("format", "") != "hotkernel-profile" ||
      profile.value("version", 0) != 1 || !profile.contains("variants") || !profile["variants"].is_array()) {
    return usage(profilePath + " is not a hotkernel profile (format hotkernel-profile, version 1)");
  }
  if (!at::cuda::is_available() || device >= at::cuda::device_count()) {
    std::cerr << "hotkernel warmup: no CUDA device " << device << "; warm-up needs the GPU it fills the cache for\n";
    return 3;
  }

  std::vector<Target> targets;
  int ignored = 0;
  for (const auto& v : profile["variants"]) {
    try {
      if (v.at("op").get<std::string>() != "aten::_softmax") {
        ++ignored;
        continue;
      }
      Target t;
      t.key.dtype = static_cast<int32_t>(hotkernel::kernels::parseDType(v.at("dtype").get<std::string>()));
      t.key.device = device;
      t.key.rows = v.at("rows").get<int64_t>();
      t.key.cols = v.at("cols").get<int64_t>();
      t.estimatedCalls = v.value("estimatedCalls", 0.0);
      const hotkernel::kernels::SoftmaxVariant sv{static_cast<hotkernel::kernels::DType>(t.key.dtype), t.key.rows,
                                                  t.key.cols};
      if (!hotkernel::kernels::SoftmaxFamily::guardVariant(sv)) {
        ++ignored;
        continue;
      }
      t.weight = t.estimatedCalls * hotkernel::kernels::SoftmaxFamily::bytesMoved(sv);
      targets.push_back(t);
    } catch (const std::exception& e) {
      return usage("malformed variant in the profile: " + v.dump() + " (" + e.what() + ")");
    }
  }
  std::sort(targets.begin(), targets.end(), [](const Target& a, const Target& b) { return a.weight > b.weight; });

  hotkernel::Runtime& rt = hotkernel::Runtime::instance();
  rt.ensureDevice(device);
  const auto decided = rt.decisions();
  const auto start = Clock::now();
  const auto deadline = start + std::chrono::duration<double>(budget);
  auto left = [&] { return std::chrono::duration<double>(deadline - Clock::now()).count(); };
  std::printf("warm-up of %zu target(s) from %s (%d other variant(s) not served), budget %.0f s\n", targets.size(),
              profilePath.c_str(), ignored, budget);
  nlohmann::json results = nlohmann::json::array();
  double best = 0;
  size_t done = 0, skipped = 0;
  bool budgetReached = false;
  for (size_t i = 0; i < targets.size(); ++i) {
    const std::string variant = hotkernel::variantString(targets[i].key);
    if (decided.count(variant)) {
      ++skipped;
      ++done;
      std::printf("[%zu/%zu] %s: already decided in the cache, skipped\n", i + 1, targets.size(), variant.c_str());
      continue;
    }
    if (left() <= 0) {
      budgetReached = true;
      break;
    }
    std::printf("[%zu/%zu] %s (~%.0f calls): tuning...\n", i + 1, targets.size(), variant.c_str(),
                targets[i].estimatedCalls);
    std::fflush(stdout);
    try {
      nlohmann::json r = rt.optimizeVariant("aten::_softmax", targets[i].key, [&] { return Clock::now() < deadline; });
      ++done;
      const double speedup = r.value("speedup", 0.0);
      best = std::max(best, speedup);
      r.erase("metrics");
      results.push_back(r);
      std::printf("[%zu/%zu] %s: %s%s | done %zu/%zu, best speed-up %.2fx, %.0f s left\n", i + 1, targets.size(),
                  variant.c_str(), r.value("decision", "?").c_str(),
                  speedup > 0 ? (" " + std::to_string(speedup).substr(0, 5) + "x").c_str() : "", done,
                  targets.size(), best, std::max(0.0, left()));
    } catch (const std::exception& e) {
      if (left() <= 0) {
        budgetReached = true;
        std::printf("[%zu/%zu] %s: budget reached; run again to resume\n", i + 1, targets.size(), variant.c_str());
        break;
      }
      std::printf("[%zu/%zu] %s: failed (%s); the ATen kernel stays\n", i + 1, targets.size(), variant.c_str(),
                  e.what());
      results.push_back({{"variant", variant}, {"decision", "failed"}, {"error", e.what()}});
    }
    std::fflush(stdout);
  }
  std::printf("warm-up %s: %zu/%zu target(s) decided (%zu already cached), best speed-up %.2fx, %.0f s used\n",
              budgetReached ? "stopped at the budget" : "finished", done, targets.size(), skipped, best,
              std::chrono::duration<double>(Clock::now() - start).count());
  if (!jsonOut.empty()) {
    std::ofstream f(jsonOut);
    std::time_t now = std::time(nullptr);
    char date[64];
    std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
    int driver = 0;
    cudaDriverGetVersion(&driver);
    f << nlohmann::json({{"format", "hotkernel-warmup"},
                         {"version", 1},
                         {"date", date},
                         {"gpu", at::cuda::getDeviceProperties(device)->name},
                         {"driver", driver},
                         {"torch", TORCH_VERSION},
                         {"hotkernel", HOTKERNEL_VERSION},
                         {"profile", profilePath},
                         {"budgetSeconds", budget},
                         {"budgetReached", budgetReached},
                         {"targets", targets.size()},
                         {"decided", done},
                         {"alreadyCached", skipped},
                         {"results", results}})
             .dump(2)
      << "\n";
  }
  return 0;
}
