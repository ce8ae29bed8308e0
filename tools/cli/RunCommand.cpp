#include "RunCommand.h"

#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <memory>

#include "InstallLayout.h"

namespace hotkernel::cli {
namespace {

const char* const kRunUsage = "usage: hotkernel run [--] COMMAND [ARGS...]";

bool sameFile(const std::string& a, const std::string& b) {
  if (a == b) return true;
  struct stat sa;
  struct stat sb;
  return ::stat(a.c_str(), &sa) == 0 && ::stat(b.c_str(), &sb) == 0 && sa.st_dev == sb.st_dev &&
         sa.st_ino == sb.st_ino;
}

std::string baseName(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// LD_PRELOAD's entries, split as the loader splits them (on ':' and spaces), empty ones dropped.
std::vector<std::string> preloadEntries(const std::string& value) {
  std::vector<std::string> entries;
  std::string entry;
  for (char c : value) {
    if (c == ':' || c == ' ') {
      if (!entry.empty()) entries.push_back(entry);
      entry.clear();
    } else {
      entry += c;
    }
  }
  if (!entry.empty()) entries.push_back(entry);
  return entries;
}

void runCallback(CLI::App* run, const std::vector<std::string>& command, ExitStatus& status) {
  for (const std::string& extra : run->remaining()) {
    if (extra == "--") continue;
    std::cerr << "hotkernel run: unknown option '" << extra << "' before the command (put the command after --)\n"
              << kRunUsage << "\n";
    status.code = kExitRunFailed;
    return;
  }
  status.code = execUnderPreload(command);
}

}  // namespace

std::string preloadWith(const std::string& current, const std::string& shim, std::string* note) {
  if (note != nullptr) note->clear();
  std::vector<std::string> kept;
  std::vector<std::string> replaced;
  for (const std::string& entry : preloadEntries(current)) {
    if (sameFile(entry, shim)) return current;
    if (baseName(entry) == kPreloadLibraryName) {
      replaced.push_back(entry);
    } else {
      kept.push_back(entry);
    }
  }
  if (replaced.empty()) {
    std::string value = current;
    while (!value.empty() && (value.back() == ':' || value.back() == ' ')) value.pop_back();
    return value.empty() ? shim : value + ":" + shim;
  }
  if (note != nullptr) {
    *note = "LD_PRELOAD named another hotkernel preload library (";
    for (size_t i = 0; i < replaced.size(); ++i) *note += (i > 0 ? ", " : "") + replaced[i];
    *note += "); using " + shim + " instead";
  }
  std::string value;
  for (const std::string& entry : kept) value += entry + ":";
  return value + shim;
}

int execUnderPreload(const std::vector<std::string>& command) {
  if (command.empty() || command[0].empty()) {
    std::cerr << "hotkernel run: missing command\n" << kRunUsage << "\n";
    return kExitRunFailed;
  }
  const std::string shim = preloadLibraryPath();
  struct stat st;
  if (shim.empty() || ::stat(shim.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
    const std::string why = shim.empty() ? "the hotkernel binary's location is unknown (/proc/self/exe)"
                                         : shim + " is missing or not a file";
    std::cerr << "hotkernel run: cannot find the preload library: " << why << "; hotkernel run looks for "
              << kPreloadLibraryName << " in ../lib next to the hotkernel binary (target hotkernel_preload)\n";
    return kExitRunFailed;
  }
  const char* current = std::getenv("LD_PRELOAD");
  std::string note;
  const std::string preload = preloadWith(current != nullptr ? current : "", shim, &note);
  if (!note.empty()) std::cerr << "hotkernel run: " << note << "\n";
  if (::setenv("LD_PRELOAD", preload.c_str(), 1) != 0) {
    std::cerr << "hotkernel run: cannot set LD_PRELOAD (" << std::strerror(errno) << ")\n";
    return kExitRunFailed;
  }
  std::vector<char*> argv;
  for (const std::string& a : command) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::cout.flush();
  std::cerr.flush();
  ::execvp(argv[0], argv.data());
  const int error = errno;
  if (error == ENOENT || error == ENOTDIR) {
    const bool isPath = command[0].find('/') != std::string::npos;
    std::cerr << "hotkernel run: " << command[0] << ": " << (isPath ? "no such file" : "command not found") << "\n";
    return kExitCommandNotFound;
  }
  std::cerr << "hotkernel run: cannot execute " << command[0] << ": " << std::strerror(error) << "\n";
  return kExitCannotExecute;
}

void addRunCommand(CLI::App& app, ExitStatus& status) {
  auto command = std::make_shared<std::vector<std::string>>();
  CLI::App* run = app.add_subcommand(
      "run", "run a command with hotkernel preloaded: hotkernel run -- python serve.py (LD_PRELOAD appended to)");
  run->add_option("command", *command, "the command and its arguments, passed on unparsed from the first word");
  // Everything from the command's first word on is the command's (options like -u included).
  run->positionals_at_end();
  // Unknown options before the command are refused by the callback, with run's exit code.
  run->allow_extras();
  run->footer(
      "Exit status: the command's. 125: hotkernel run failed (no command, unknown option, preload library "
      "missing); 126: the command cannot be executed; 127: the command was not found.");
  run->callback([run, command, &status] { runCallback(run, *command, status); });
}

}  // namespace hotkernel::cli
