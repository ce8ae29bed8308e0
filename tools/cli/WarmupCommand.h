#pragma once
// `hotkernel warmup ...`: the offline cache warm-up. It needs torch and a GPU,
// which this CLI never loads, so it executes `hotkernel-warmup` (built next to
// this binary from tools/warmup/) with the same arguments.

#include <CLI/CLI.hpp>

namespace hotkernel::cli {

// Lists `warmup` in --help; the arguments themselves are the helper's.
void addWarmupCommand(CLI::App& app);

// If argv[1] is "warmup", checks the arguments and the profile (WarmupArgs.h:
// kExitUsage with one message when they are bad), then replaces this process
// with hotkernel-warmup and does not return; returns kExitUsage if the helper
// cannot be executed. Returns -1 when the command is not `warmup`.
int maybeRunWarmup(int argc, char** argv);

}  // namespace hotkernel::cli
