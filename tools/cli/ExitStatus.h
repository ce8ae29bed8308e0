#pragma once
// Exit codes of every `hotkernel` command, and the slot commands report into.
//
//   0  success
//   1  the command ran and found a problem (verify: an entry failed; show: no such entry; export: nothing
//      to export; import: the bundle refused, nothing imported)
//   2  the command could not run: bad usage, unsafe or unreadable cache, any hotkernel::Error
//
// `hotkernel run` exits with its command's status (the command replaces the
// process); its own failures use the codes env(1) and nohup(1) use, apart
// from any the command returns in practice:
//   125  hotkernel run itself failed: no command, an unknown option before it, the preload library missing
//   126  the command was found but cannot be executed (permissions, not an executable)
//   127  the command was not found

namespace hotkernel::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitProblem = 1;
inline constexpr int kExitUsage = 2;
inline constexpr int kExitRunFailed = 125;
inline constexpr int kExitCannotExecute = 126;
inline constexpr int kExitCommandNotFound = 127;

// Commands run as CLI11 callbacks, which return nothing: they set `code`.
struct ExitStatus {
  int code = kExitOk;
};

}  // namespace hotkernel::cli
