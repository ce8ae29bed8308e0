/* The real definitions behind the shim's wrappers (Note [Reaching the real dlsym]). */
#define _GNU_SOURCE
#include "RealSymbol.h"

#include <dlfcn.h>
#include <link.h>
#include <string.h>

typedef void* (*HkDlopenFn)(const char*, int);

static HkDlsymFn g_realDlsym = NULL; /* atomic */

HkDlsymFn hkRealDlsym(void) {
  HkDlsymFn fn = __atomic_load_n(&g_realDlsym, __ATOMIC_ACQUIRE);
  if (fn) return fn;
  static const char* const kVersions[] = {"GLIBC_2.34", "GLIBC_2.2.5", "GLIBC_2.17"};
  for (size_t i = 0; i < sizeof kVersions / sizeof kVersions[0] && !fn; ++i) {
    fn = (HkDlsymFn)dlvsym(RTLD_NEXT, "dlsym", kVersions[i]);
  }
  if (fn) __atomic_store_n(&g_realDlsym, fn, __ATOMIC_RELEASE);
  return fn;
}

__attribute__((constructor)) static void resolveRealDlsymEarly(void) { (void)hkRealDlsym(); }

struct FindLibrary {
  const char* prefix;
  char path[4096];
};

static int findLibrary(struct dl_phdr_info* info, size_t size, void* data) {
  (void)size;
  struct FindLibrary* find = (struct FindLibrary*)data;
  const char* name = info->dlpi_name;
  if (!name || !*name) return 0;
  const char* base = strrchr(name, '/');
  base = base ? base + 1 : name;
  if (strncmp(base, find->prefix, strlen(find->prefix)) != 0) return 0;
  strncpy(find->path, name, sizeof find->path - 1);
  find->path[sizeof find->path - 1] = '\0';
  return 1;
}

void* hkResolveNext(const char* libraryPrefix, const char* symbol) {
  HkDlsymFn sym = hkRealDlsym();
  if (!sym) return NULL;
  void* fn = sym(RTLD_NEXT, symbol);
  if (fn) return fn;
  struct FindLibrary find = {libraryPrefix, {0}};
  if (!dl_iterate_phdr(findLibrary, &find)) return NULL;
  /* The real dlopen (the shim interposes dlopen; RTLD_NOLOAD never loads). */
  HkDlopenFn realDlopen = (HkDlopenFn)sym(RTLD_NEXT, "dlopen");
  if (!realDlopen) return NULL;
  void* h = realDlopen(find.path, RTLD_LAZY | RTLD_NOLOAD);
  return h ? sym(h, symbol) : NULL;
}

void* hkResolveInto(void** slot, const char* libraryPrefix, const char* symbol) {
  void* fn = hkResolveNext(libraryPrefix, symbol);
  if (fn) __atomic_store_n(slot, fn, __ATOMIC_RELEASE);
  return fn;
}

int hkIsShimAddress(const void* address) {
  Dl_info own, other;
  if (!dladdr((const void*)&hkIsShimAddress, &own) || !dladdr(address, &other)) return 0;
  return own.dli_fbase == other.dli_fbase;
}
