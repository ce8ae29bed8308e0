// Linked against the installed libhotkernel.so: starting proves that the
// loader finds it and, through its RUNPATH, the torch it was built against.
// The engine is not started (no hotkernel_start()), so nothing is served.
#include <cstdio>

#include "hotkernel/hotkernel.h"

int main() {
  const int plans = hotkernel_plan_count();
  std::printf("plans=%d\n", plans);
  return plans == 0 ? 0 : 1;
}
