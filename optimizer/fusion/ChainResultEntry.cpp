// The cache entry of a chain tuning (ChainTuner.h).

#include "hotkernel/chain/ChainEntry.h"
#include "hotkernel/optimizer/ChainTuner.h"
#include "hotkernel/optimizer/ResultEntry.h"

namespace hotkernel {

cache::Entry chainResultEntry(const DeviceFingerprints& fingerprints, const chain::ChainVariant& v,
                              const TuneOutcome& out) {
  cache::Entry entry =
      resultEntry(fingerprints, v.device, chain::kChainOp, chain::chainVariantString(v), chain::kChainFamily, out);
  // Note [Chain entry params, v1]: a keep_aten entry names its chain too.
  if (!out.accepted) entry.params = chain::chainEntryParams(v, std::nullopt).dump();
  return entry;
}

}  // namespace hotkernel
