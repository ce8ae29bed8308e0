#include "InstallLayout.h"

#include <unistd.h>

#include <cstdlib>

namespace hotkernel::cli {

std::string executableDirectory() {
  std::string self(4096, '\0');
  const ssize_t n = ::readlink("/proc/self/exe", self.data(), self.size() - 1);
  if (n <= 0) return "";
  self.resize(static_cast<size_t>(n));
  const size_t slash = self.rfind('/');
  if (slash == std::string::npos) return "";
  return slash == 0 ? "/" : self.substr(0, slash);
}

std::string libraryDirectory() {
  const std::string bin = executableDirectory();
  if (bin.empty()) return "";
  const size_t slash = bin.rfind('/');
  const std::string prefix = slash == 0 || slash == std::string::npos ? "" : bin.substr(0, slash);
  return prefix + "/lib";
}

std::string preloadLibraryPath() {
  const std::string lib = libraryDirectory();
  return lib.empty() ? "" : lib + "/" + kPreloadLibraryName;
}

std::string servedLibraryPath() {
  const char* env = std::getenv("HOTKERNEL_LIBRARY");
  if (env != nullptr && *env != '\0') return env;
  const std::string lib = libraryDirectory();
  return lib.empty() ? "" : lib + "/" + kLibraryName;
}

}  // namespace hotkernel::cli
