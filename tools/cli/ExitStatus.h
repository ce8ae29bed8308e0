#pragma once
// Exit codes of every `hotkernel` command, and the slot commands report into.
//
//   0  success
//   1  the command ran and found a problem (verify: an entry failed; show: no such entry)
//   2  the command could not run: bad usage, unsafe or unreadable cache, any hotkernel::Error

namespace hotkernel::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitProblem = 1;
inline constexpr int kExitUsage = 2;

// Commands run as CLI11 callbacks, which return nothing: they set `code`.
struct ExitStatus {
  int code = kExitOk;
};

}  // namespace hotkernel::cli
