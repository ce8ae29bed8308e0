// hotkernel-warmup: fills the kernel cache for this GPU from a recorded
// profile, offline, with no model (inputs are synthesized per variant).
//
//   hotkernel-warmup --profile FILE [--budget 10m] [--dir DIR] [--device N] [--json OUT]
//
// Targets are the profile's variants of ops a family models, ranked by
// expected saving (Note [Amdahl ranking] in optimizer/Ranking.h): each
// variant's ATen kernel is timed on this GPU, the copy bandwidth is measured
// once, and the saving is (estimated calls x ATen time) x headroom to the
// roofline. The budget is split over the targets in proportion to their
// saving (re-split over what is left after each target); a target whose ATen
// kernel already runs at >= 95% of its roofline is recorded as "keep ATen"
// without a search. Variants that already have a decision in the cache are
// skipped, so a second run resumes where the first stopped. The budget is
// also checked before every unit of GPU work; a target cut short is left
// undecided for the next run. Exit: 0 done (or budget reached), 2 bad input
// (arguments or profile: tools/cli/WarmupArgs.h, Note [Reading a profile safely]),
// 3 no CUDA device.
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
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "hotkernel/interpose/Engine.h"
#include "WarmupArgs.h"
#include "WarmupSummary.h"
#include "hotkernel/Config.h"
#include "hotkernel/optimizer/GpuTargetMeasurer.h"
#include "hotkernel/kernels/VariantOptions.h"
#include "hotkernel/optimizer/ProfileTargets.h"
#include "hotkernel/optimizer/QueueRanker.h"
#include "hotkernel/optimizer/RankingLog.h"
#include "hotkernel/runtime/Logging.h"

namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

int main(int argc, char** argv) {
  // The same checks `hotkernel warmup` runs before it executes this program (tools/cli/WarmupArgs.h).
  hotkernel::cli::WarmupArgs args;
  const std::vector<std::string> argList(argv + 1, argv + argc);
  if (const std::string problem = hotkernel::cli::parseWarmupArgs(argList, &args); !problem.empty()) {
    return hotkernel::cli::warmupUsageError(problem);
  }
  if (args.help) {
    std::cerr << "hotkernel warmup: fills the kernel cache for this GPU from a recorded profile\n"
              << hotkernel::cli::warmupUsageText();
    return 0;
  }
  std::string profiles;  // "a.json" or "a.json + b.json", for the messages and the summary
  for (const std::string& p : args.profilePaths) profiles += (profiles.empty() ? "" : " + ") + p;
  const std::string& jsonOut = args.jsonOut;
  const double budget = args.budgetSeconds;
  const int device = args.device;
  if (!args.cacheDir.empty()) setenv("HOTKERNEL_CACHE_DIR", args.cacheDir.c_str(), 1);
  if (!std::getenv("HOTKERNEL_LOG_LEVEL")) hotkernel::setLogLevel(hotkernel::LogLevel::Warn);

  // Note [Reading a profile safely]: a directory, FIFO, device, unreadable or malformed file is a usage error.
  hotkernel::ProfileTargets fromProfile;
  if (const std::string problem = hotkernel::cli::loadWarmupTargets(args.profilePaths, device, &fromProfile);
      !problem.empty()) {
    return hotkernel::cli::warmupUsageError(problem);
  }
  if (!at::cuda::is_available() || device >= at::cuda::device_count()) {
    std::cerr << "hotkernel warmup: no CUDA device " << device << "; warm-up needs the GPU it fills the cache for\n";
    return 3;
  }

  hotkernel::Engine& rt = hotkernel::Engine::instance();
  rt.ensureDevice(device);
  const auto start = Clock::now();
  const auto deadline = start + std::chrono::duration<double>(budget);
  auto left = [&] { return std::chrono::duration<double>(deadline - Clock::now()).count(); };
  auto inBudget = [&] { return Clock::now() < deadline; };

  // Note [Amdahl ranking]: peaks and ATen times measured here, on this GPU.
  hotkernel::GpuMeasurerOptions mo;
  mo.memoryCapBytes = hotkernel::config().optimizerMemoryMb > 0 ? hotkernel::config().optimizerMemoryMb << 20 : 0;
  mo.yieldPoint = inBudget;
  hotkernel::GpuTargetMeasurer measurer(mo);
  std::map<std::string, double> calls;
  std::vector<hotkernel::OptimizerJob> pending;
  for (const hotkernel::ProfileTarget& t : fromProfile.targets) {
    calls[hotkernel::jobId(t.job)] = t.estimatedCalls;
    pending.push_back(t.job);
  }
  std::unique_ptr<hotkernel::QueueRanker> ranker =
      rt.makeRanker(measurer, [&calls](const hotkernel::OptimizerJob& j) { return calls.at(hotkernel::jobId(j)); });
  const size_t total = pending.size();
  std::printf("warm-up of %zu target(s) from %s (%d other variant(s) not served), budget %.0f s\n", total,
              profiles.c_str(), fromProfile.ignored, budget);
  if (fromProfile.takenByChains > 0) {
    std::printf("%d variant(s) not tuned: every recorded call of theirs ran inside a fused chain\n",
                fromProfile.takenByChains);
  }
  nlohmann::json results = nlohmann::json::array();
  nlohmann::json ranking = nlohmann::json::array();
  double best = 0, copyGBs = 0;
  size_t done = 0, skipped = 0, index = 0;
  bool budgetReached = false, rankingPrinted = false;
  auto removePending = [&pending](const hotkernel::OptimizerJob& job) {
    const std::string id = hotkernel::jobId(job);
    pending.erase(std::remove_if(pending.begin(), pending.end(),
                                 [&id](const hotkernel::OptimizerJob& p) { return hotkernel::jobId(p) == id; }),
                  pending.end());
  };
  while (!pending.empty()) {
    if (left() <= 0) {
      budgetReached = true;
      break;
    }
    // Re-ranked after each target: what is left of the budget is split over what is left.
    hotkernel::QueueRanking r = ranker->rank(pending, std::max(0.0, left()));
    if (!rankingPrinted) {
      rankingPrinted = true;
      if (r.peaks) copyGBs = r.peaks->copyBytesPerSecond / 1e9;
      std::printf("ranking (copy bandwidth %.0f GB/s measured): largest expected saving first\n", copyGBs);
      for (const hotkernel::OptimizerJob& j : r.order.queue) {
        if (!j.target) continue;
        const hotkernel::RankedTarget& t = *j.target;
        std::printf("  %s %s: ~%.0f calls x %.1f us, roofline %.1f us (%.0f%%), expected saving %.3f s, budget %.0f s\n",
                    j.op.c_str(), t.target.variant.c_str(), calls.at(hotkernel::jobId(j)),
                    t.target.currentSecondsPerCall * 1e6, t.rooflineSecondsPerCall * 1e6, t.rooflineFraction * 100,
                    t.expectedSavingSeconds, t.budgetSeconds);
        nlohmann::json entry = hotkernel::rankingJson(t);
        entry["op"] = j.op;
        entry["variant"] = t.target.variant;
        ranking.push_back(entry);
      }
    }
    // Dropped without a search: decided in the cache, near the roofline (recorded as keep ATen), no calls.
    for (size_t k = 0; k < r.order.dropped.size(); ++k) {
      const hotkernel::SkippedTarget& s = r.skipped[k];
      ++index;
      ++done;
      if (s.reason == hotkernel::TargetStop::Decided) {
        ++skipped;
        std::printf("[%zu/%zu] %s %s: already decided in the cache, skipped\n", index, total, s.target.op.c_str(),
                    s.target.variant.c_str());
      } else {
        const std::string why = hotkernel::skippedTargetExperiment(s, "").reason;
        std::printf("[%zu/%zu] %s %s: %s\n", index, total, s.target.op.c_str(), s.target.variant.c_str(),
                    why.c_str());
        results.push_back({{"op", s.target.op}, {"variant", s.target.variant}, {"decision", "keep_aten"},
                           {"stop", hotkernel::toString(s.reason)}, {"reason", why}});
      }
      removePending(r.order.dropped[k]);
    }
    if (r.order.queue.empty()) break;
    const hotkernel::OptimizerJob job = r.order.queue.front();
    removePending(job);
    ++index;
    const std::string variant = hotkernel::kernels::variantString(job.key);
    if (job.target) {
      std::printf("[%zu/%zu] %s %s (~%.0f calls, expected saving %.3f s, budget %.0f s): tuning...\n", index, total,
                  job.op.c_str(), variant.c_str(), calls.at(hotkernel::jobId(job)), job.target->expectedSavingSeconds,
                  job.target->budgetSeconds);
    } else {
      std::printf("[%zu/%zu] %s %s (~%.0f calls, not ranked): tuning...\n", index, total, job.op.c_str(),
                  variant.c_str(), calls.at(hotkernel::jobId(job)));
    }
    std::fflush(stdout);
    try {
      nlohmann::json res = rt.optimizeVariant(job.op, job.key, inBudget, job.target);
      ++done;
      const double speedup = res.value("speedup", 0.0);
      best = std::max(best, speedup);
      const std::string stop = res.contains("metrics") && res["metrics"].contains("target")
                                   ? res["metrics"]["target"].value("stop", "none")
                                   : "none";
      res.erase("metrics");
      res["stop"] = stop;
      results.push_back(res);
      std::printf("[%zu/%zu] %s: %s%s (search stop: %s) | done %zu/%zu, best speed-up %.2fx, %.0f s left\n", index,
                  total, variant.c_str(), res.value("decision", "?").c_str(),
                  speedup > 0 ? (" " + std::to_string(speedup).substr(0, 5) + "x").c_str() : "", stop.c_str(), done,
                  total, best, std::max(0.0, left()));
    } catch (const std::exception& e) {
      if (left() <= 0) {
        budgetReached = true;
        std::printf("[%zu/%zu] %s: budget reached; run again to resume\n", index, total, variant.c_str());
        break;
      }
      std::printf("[%zu/%zu] %s: failed (%s); the ATen kernel stays\n", index, total, variant.c_str(), e.what());
      results.push_back({{"op", job.op}, {"variant", variant}, {"decision", "failed"}, {"error", e.what()}});
    }
    std::fflush(stdout);
  }
  std::printf("warm-up %s: %zu/%zu target(s) decided (%zu already cached), best speed-up %.2fx, %.0f s used\n",
              budgetReached ? "stopped at the budget" : "finished", done, total, skipped, best,
              std::chrono::duration<double>(Clock::now() - start).count());
  if (!jsonOut.empty()) {
    std::ofstream f(jsonOut);
    std::time_t now = std::time(nullptr);
    char date[64];
    std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
    int driver = 0;
    cudaDriverGetVersion(&driver);
    hotkernel::cli::WarmupSummary summary;  // Note [Warm-up summary format]
    summary.date = date;
    summary.gpu = at::cuda::getDeviceProperties(device)->name;
    summary.driver = driver;
    summary.torch = TORCH_VERSION;
    summary.hotkernel = HOTKERNEL_VERSION;
    summary.profile = profiles;
    summary.budgetSeconds = budget;
    summary.budgetReached = budgetReached;
    summary.targets = total;
    summary.takenByChains = static_cast<size_t>(fromProfile.takenByChains);
    summary.copyGbPerSecond = copyGBs;
    summary.ranking = ranking;
    summary.decided = done;
    summary.alreadyCached = skipped;
    summary.results = results;
    f << summary.toJson().dump(2) << "\n";
  }
  return 0;
}
