#include "WarmupSummary.h"

namespace hotkernel::cli {

nlohmann::json WarmupSummary::toJson() const {
  return {{"format", kWarmupSummaryFormat},
          {"version", kWarmupSummaryVersion},
          {"date", date},
          {"gpu", gpu},
          {"driver", driver},
          {"torch", torch},
          {"hotkernel", hotkernel},
          {"profile", profile},
          {"budget_seconds", budgetSeconds},
          {"budget_reached", budgetReached},
          {"targets", targets},
          {"taken_by_chains", takenByChains},
          {"copy_gbs", copyGbPerSecond},
          {"ranking", ranking},
          {"decided", decided},
          {"already_cached", alreadyCached},
          {"results", results}};
}

}  // namespace hotkernel::cli
