#pragma once
// Where hotkernel's files are, found from the `hotkernel` binary's own
// location, so that a build tree and an installed prefix work alike:
//   <prefix>/bin/hotkernel
//   <prefix>/lib/libhotkernel_preload.so   the libc-only shim for LD_PRELOAD
//   <prefix>/lib/libhotkernel.so           the library the shim loads (next to itself)
// <prefix> is the directory above the binary's, the binary's path resolved
// (/proc/self/exe), so a symlink to the binary elsewhere finds the same files.

#include <string>

namespace hotkernel::cli {

inline constexpr const char* kPreloadLibraryName = "libhotkernel_preload.so";
inline constexpr const char* kLibraryName = "libhotkernel.so";

// The absolute directory holding the running binary; "" when /proc/self/exe cannot be read.
std::string executableDirectory();

// <prefix>/lib: the directory of the shim and the library; "" when the binary's location is unknown.
std::string libraryDirectory();

// <prefix>/lib/libhotkernel_preload.so, absolute (whether or not it exists); "" when unknown.
std::string preloadLibraryPath();

// The library the shim loads: $HOTKERNEL_LIBRARY when set, else libhotkernel.so beside the shim
// (interpose/preload/Preload.c); "" when unknown.
std::string servedLibraryPath();

}  // namespace hotkernel::cli
