// The `hotkernel` command-line tool: parses the command line and dispatches
// to the command groups (each in its own file). Exit codes: ExitStatus.h.

#include <CLI/CLI.hpp>
#include <iostream>

#include "CacheCommands.h"
#include "DoctorCommand.h"
#include "ErrorText.h"
#include "ExitStatus.h"
#include "LogCommands.h"
#include "ProfileCommand.h"
#include "RunCommand.h"
#include "WarmupCommand.h"
#include "hotkernel/Config.h"
#include "hotkernel/runtime/Check.h"

int main(int argc, char** argv) {
  using namespace hotkernel::cli;
  if (int rc = maybeRunWarmup(argc, argv); rc >= 0) return rc;
  CLI::App app{"hotkernel: runtime JIT kernel optimizer for PyTorch inference", "hotkernel"};
  app.set_version_flag("--version", "hotkernel " HOTKERNEL_VERSION);
  // One command per invocation; also what lets `hotkernel run log ...` run a program called log.
  app.require_subcommand(0, 1);

  ExitStatus status;
  addCacheCommands(app, status);
  addLogCommands(app, status);
  addProfileCommand(app, status);
  addWarmupCommand(app);
  addRunCommand(app, status);
  addDoctorCommand(app, status);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version arrive here too, with exit code 0.
    return app.exit(e) == 0 ? kExitOk : kExitUsage;
  } catch (const hotkernel::Error& e) {
    std::cerr << "hotkernel: error: " << userMessage(e) << "\n";
    return kExitUsage;
  } catch (const std::exception& e) {
    std::cerr << "hotkernel: unexpected error: " << userMessage(e) << "\n";
    return kExitUsage;
  }
  if (app.get_subcommands().empty()) {
    std::cerr << "hotkernel: missing command\n" << app.help();
    return kExitUsage;
  }
  return status.code;
}
