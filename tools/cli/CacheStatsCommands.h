#pragma once
// `hotkernel cache stats` (entries by op, decision and fingerprint; which match
// this machine) and `hotkernel cache prune --stale` (Note [Stale fingerprints]).

namespace CLI {
class App;
}

namespace hotkernel::cli {

// Adds `stats` and `prune` to the `cache` command group. Both exit 0 when they
// run (a missing cache reads as empty); failures throw hotkernel::Error (exit 2).
void addCacheStatsCommands(CLI::App& cache);

}  // namespace hotkernel::cli
