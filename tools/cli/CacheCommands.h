#pragma once
// `hotkernel cache ls|show|verify|rm|path`: inspect and prune the kernel cache;
// with stats|prune (CacheStatsCommands.h) and export|import (CacheBundleCommands.h).

#include "ExitStatus.h"

namespace CLI {
class App;
}

namespace hotkernel::cli {

// Adds the `cache` command group to `app`. Each command, when it runs, writes
// its result to stdout, diagnostics to stderr, and its exit code to `status`;
// it reports a failure to run (unsafe directory, unreadable database) by
// throwing hotkernel::Error, which main turns into exit code 2.
void addCacheCommands(CLI::App& app, ExitStatus& status);

}  // namespace hotkernel::cli
