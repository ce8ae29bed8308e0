#pragma once
// The summary hotkernel-warmup writes with --json OUT, made without torch so
// that its format is tested on any machine (tools/warmup/WarmupMain.cpp fills it).
//
// Note [Warm-up summary format]
// One JSON object, written with two-space indentation. Version 2:
//   {"format":"hotkernel-warmup","version":2,
//    "date":"YYYY-MM-DDTHH:MM:SSZ",   UTC, when the summary was written
//    "gpu":"NVIDIA H200","driver":13000,"torch":"2.11.0+cu130","hotkernel":"0.1.0",
//    "profile":"a.json + b.json",      the --profile files
//    "budget_seconds":600,"budget_reached":false,
//    "targets":12,                     variants of the profiles a family serves
//    "taken_by_chains":2,              variants left out: fused chains took every recorded call (added in
//                                      version 2; Note [Deferred calls in the recorder])
//    "copy_gbs":4200.5,                the copy bandwidth measured for the roofline, GB/s
//    "ranking":[{"op","variant","gpu_seconds","current_us","roofline_us","roofline_fraction",
//                "headroom","expected_saving_seconds","budget_seconds"}...],  (rankingJson, RankingLog.h)
//    "decided":10,"already_cached":3,
//    "results":[{"op","variant","decision","speedup"?,"stop"} | {"op","variant","decision":"keep_aten","stop",
//                "reason"} | {"op","variant","decision":"failed","error"}...]}
// Every key is snake_case (docs/design/json-style.md). Version 1 spelled
// "budgetSeconds", "budgetReached", "copyGBs", "alreadyCached" and the
// ranking's keys in camelCase; nothing in hotkernel reads the summary back.

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>

namespace hotkernel::cli {

inline constexpr const char* kWarmupSummaryFormat = "hotkernel-warmup";
inline constexpr int kWarmupSummaryVersion = 2;

struct WarmupSummary {
  std::string date;  // ISO 8601, UTC
  std::string gpu;
  int driver = 0;  // cudaDriverGetVersion
  std::string torch;
  std::string hotkernel;
  std::string profile;
  double budgetSeconds = 0;
  bool budgetReached = false;
  size_t targets = 0;
  size_t takenByChains = 0;
  double copyGbPerSecond = 0;
  nlohmann::json ranking = nlohmann::json::array();  // rankingJson objects with "op" and "variant"
  size_t decided = 0;
  size_t alreadyCached = 0;
  nlohmann::json results = nlohmann::json::array();  // one object per target decided or failed

  // The document of Note [Warm-up summary format].
  nlohmann::json toJson() const;
};

}  // namespace hotkernel::cli
