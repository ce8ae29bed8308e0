#include "WarmupCommand.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "ExitStatus.h"
#include "WarmupArgs.h"

namespace hotkernel::cli {

void addWarmupCommand(CLI::App& app) {
  app.add_subcommand("warmup",
                     "fill the cache for this GPU from a recorded profile, offline "
                     "(hotkernel warmup --profile FILE [--budget 10m] [--dir DIR]; see hotkernel warmup --help)")
      ->allow_extras();
}

int maybeRunWarmup(int argc, char** argv) {
  if (argc < 2 || std::string(argv[1]) != "warmup") return -1;
  // Bad input is refused here, without torch (Note [Reading a profile safely] in WarmupArgs.h).
  const std::vector<std::string> rest(argv + 2, argv + argc);
  WarmupArgs parsed;
  if (const std::string problem = parseWarmupArgs(rest, &parsed); !problem.empty()) return warmupUsageError(problem);
  if (!parsed.help) {
    ProfileTargets targets;
    if (const std::string problem = loadWarmupTargets(parsed.profilePaths, parsed.device, &targets);
        !problem.empty()) {
      return warmupUsageError(problem);
    }
  }
  std::string self(4096, '\0');
  const ssize_t n = ::readlink("/proc/self/exe", self.data(), self.size() - 1);
  std::string helper = "hotkernel-warmup";
  if (n > 0) {
    self.resize(static_cast<size_t>(n));
    helper = self.substr(0, self.rfind('/') + 1) + "hotkernel-warmup";
  }
  std::vector<char*> args;
  args.push_back(helper.data());
  for (int i = 2; i < argc; ++i) args.push_back(argv[i]);
  args.push_back(nullptr);
  ::execv(helper.c_str(), args.data());
  std::cerr << "hotkernel: error: cannot run " << helper << " (" << std::strerror(errno)
            << "); it is built with torch (HOTKERNEL_ENABLE_TORCH=ON)\n";
  return kExitUsage;
}

}  // namespace hotkernel::cli
