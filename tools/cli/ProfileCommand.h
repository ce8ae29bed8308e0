#pragma once
// `hotkernel profile FILE... [--json] [--top N] [--by calls|gpu-time] [--dir D]`:
// the ranked view of recorded profiles (HOTKERNEL_PROFILE; several merged:
// Note [Merging profiles for the view] in ProfileView.h): ops and their
// variants by GPU time when the profiles carry it (HOTKERNEL_CUPTI=1), else by
// calls, with their share of the total, the family of this build that serves
// each variant, and what the cache (--dir) holds for it on this machine: a
// verified kernel entry and its speed-up, a keep-ATen decision, or nothing.
// Exit codes:
//   0  the view was printed
//   1  --by gpu-time, and no profile carries GPU time
//   2  bad usage, or a file that cannot be read or is not a profile (one line naming it)

#include "ExitStatus.h"

namespace CLI {
class App;
}

namespace hotkernel::cli {

void addProfileCommand(CLI::App& app, ExitStatus& status);

}  // namespace hotkernel::cli
