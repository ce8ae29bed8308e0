/*
 * The real definitions behind the shim's wrappers. libc only.
 *
 * Note [Reaching the real dlsym]
 * The shim interposes dlsym (DlsymInterpose.c), so its own lookups call
 * glibc's dlsym through a pointer found with dlvsym(RTLD_NEXT, "dlsym",
 * version): GLIBC_2.34 (where dlsym moved into libc.so.6), else the
 * architecture's base version (GLIBC_2.2.5 on x86-64, GLIBC_2.17 on
 * aarch64, libdl.so.2 before 2.34). It is resolved in the shim's
 * constructor, before any other library's code runs, so that a dlsym call
 * from a malloc interposer cannot recurse into the resolution. A lookup
 * through RTLD_NEXT or RTLD_DEFAULT depends on its caller's object (glibc
 * reads the return address), so such lookups are made from the shim's own
 * code for the shim's own symbols only.
 */
#ifndef HOTKERNEL_REAL_SYMBOL_H
#define HOTKERNEL_REAL_SYMBOL_H

#ifdef __cplusplus
extern "C" {
#endif

typedef void* (*HkDlsymFn)(void*, const char*);

/* glibc's dlsym (Note [Reaching the real dlsym]); NULL if it cannot be found. */
HkDlsymFn hkRealDlsym(void);

/* The definition of `symbol` after the shim's: dlsym(RTLD_NEXT) (the library
 * is in the global scope), else the loaded library whose file name starts
 * with `libraryPrefix` (e.g. "libcudart.so", "libcuda.so"), found among the
 * process's objects and opened with RTLD_NOLOAD. NULL when neither has it:
 * the shim never loads a CUDA library itself. */
void* hkResolveNext(const char* libraryPrefix, const char* symbol);

/* hkResolveNext(...) stored into `*slot` (racing threads store the same pointer). */
void* hkResolveInto(void** slot, const char* libraryPrefix, const char* symbol);

/* `*slot` once resolved, else hkResolveInto(...): one acquire load on the wrappers' path. */
static inline void* hkResolveCached(void** slot, const char* libraryPrefix, const char* symbol) {
  void* fn = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
  return fn ? fn : hkResolveInto(slot, libraryPrefix, symbol);
}

/* Whether `address` lies in the object that holds the shim's code. */
int hkIsShimAddress(const void* address);

#ifdef __cplusplus
}
#endif
#endif
