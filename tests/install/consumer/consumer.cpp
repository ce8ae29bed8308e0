// Prints the paths the installed CMake package gives for the shim and the CLI
// (install_test.sh compares them with the prefix) and checks that both exist
// and that the C API header declares what dlsym users call.
#include <dlfcn.h>
#include <sys/stat.h>

#include <cstdio>

#include "hotkernel/hotkernel.h"

int main() {
  struct stat st;
  if (::stat(HK_PRELOAD, &st) != 0 || !S_ISREG(st.st_mode)) {
    std::fprintf(stderr, "consumer: the shim %s is not a file\n", HK_PRELOAD);
    return 1;
  }
  if (::stat(HK_CLI, &st) != 0 || (st.st_mode & S_IXUSR) == 0) {
    std::fprintf(stderr, "consumer: the CLI %s is not executable\n", HK_CLI);
    return 1;
  }
  // Without the shim the library is not in the process: the lookup finds nothing.
  using PlanCount = decltype(&hotkernel_plan_count);
  const auto planCount = reinterpret_cast<PlanCount>(::dlsym(RTLD_DEFAULT, "hotkernel_plan_count"));
  std::printf("preload=%s\ncli=%s\nloaded=%d\n", HK_PRELOAD, HK_CLI, planCount != nullptr ? 1 : 0);
  return 0;
}
