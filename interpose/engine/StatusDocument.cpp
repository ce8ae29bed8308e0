// The status document's fusion object (Note [Status document, version 2]).

#include "StatusDocument.h"

#include <utility>

namespace hotkernel::engine {

nlohmann::json fusionStatusDocument(bool on, const fusion::FusionStats& stats, nlohmann::json patterns) {
  return {{"on", on},
          {"covered", stats.covered},
          {"deferred_calls", stats.deferredCalls},
          {"fused_flushes", stats.fusedFlushes},
          {"unfused_flushes", stats.unfusedFlushes},
          {"failed_flushes", stats.failedFlushes},
          {"windows", stats.windows},
          {"hot_chains", stats.hotChains},
          {"ready_chains", stats.readyChains},
          {"hook_gave_up", stats.hookGaveUp},
          {"passed_calls", stats.passedCalls},  // GEMMs and convolutions run while a chain stayed pending
          {"idle_starts", stats.idleStarts},    // chain starts run eagerly on an idle stream (Note [Idle streams])
          {"retired_chains", stats.retiredChains},  // whose kernel kept refusing to launch
          {"last_unfused", stats.lastUnfused},  // why the latest unfused flush did not fuse
          // Why a chain never fuses: each pattern's windows, calls and the builder's refusal.
          {"patterns", std::move(patterns)}};
}

}  // namespace hotkernel::engine
