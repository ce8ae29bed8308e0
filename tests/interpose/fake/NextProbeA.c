/* hk_probe_value's first definition and a lookup of the next one through
 * dlsym(RTLD_NEXT) (CommandHookTest: Note [Lookups on libcuda's handle]). */
#define _GNU_SOURCE
#include <dlfcn.h>

__attribute__((visibility("default"))) int hk_probe_value(void) { return 1; }

__attribute__((visibility("default"))) void* hk_probe_next(void) {
  /* Not a tail call: glibc must see this library as the caller. */
  void* volatile next = dlsym(RTLD_NEXT, "hk_probe_value");
  return next;
}
