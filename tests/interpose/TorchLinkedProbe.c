/* Linked to libtorch_cpu.so, includes no torch header. Prints whether the
 * hotkernel C API is reachable in this process (i.e. the preload shim loaded
 * libhotkernel.so through its __libc_start_main entry). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>

int main(void) {
  int (*planCount)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "hotkernel_plan_count");
  printf("hotkernel=%s plans=%d\n", planCount ? "loaded" : "absent", planCount ? planCount() : -1);
  return 0;
}
