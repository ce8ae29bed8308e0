#pragma once
// `hotkernel run [--] COMMAND [ARGS...]`: runs any command with hotkernel
// preloaded, e.g. `hotkernel run -- python serve.py`.
//
// Note [Running a command under the preload]
// The shim is <prefix>/lib/libhotkernel_preload.so (InstallLayout.h), given
// to the loader by its absolute path, so the command may change directory or
// run from anywhere. It is appended to LD_PRELOAD, never replacing what is
// there (the loader takes entries separated by ':' or spaces; the caller's
// come first); an entry that already names the same file is kept and nothing
// is added, so nested `hotkernel run` calls preload the shim once. An entry
// naming another libhotkernel_preload.so (another build or install) is
// replaced by this one, with a note on stderr: two shims would each load a
// hotkernel library into the process. The command then replaces this process
// (execvp: PATH is searched; its exit status, signals and pid are the
// command's own). Exit codes of run's own failures: ExitStatus.h (125, 126, 127).

#include <string>
#include <vector>

#include "ExitStatus.h"

namespace CLI {
class App;
}

namespace hotkernel::cli {

// Adds the `run` command to `app`. `app` must allow at most one subcommand
// (require_subcommand(0, 1)), so that a command named like a hotkernel
// command (`hotkernel run log ...`) is taken as the command to run.
void addRunCommand(CLI::App& app, ExitStatus& status);

// LD_PRELOAD's new value: `current` with `shim` appended (Note [Running a
// command under the preload]). `*note` (when non-null) is set to one line when
// another hotkernel shim was replaced, else cleared.
std::string preloadWith(const std::string& current, const std::string& shim, std::string* note = nullptr);

// Sets LD_PRELOAD and executes `command`. Returns only on failure, with the
// exit code (ExitStatus.h) after one line on stderr.
int execUnderPreload(const std::vector<std::string>& command);

}  // namespace hotkernel::cli
