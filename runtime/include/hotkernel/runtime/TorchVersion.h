#pragma once
// Which torch a process has, against the one libhotkernel.so was built for.
//
// Note [The process's torch]
// libhotkernel.so is compiled against one torch's headers (class layouts,
// inline functions, dispatcher signatures). In a process whose libtorch is
// another version the dynamic linker still binds its symbols by name to the
// libtorch already loaded, so a mismatch shows up as wrong results or a
// crash, not as a failed load. At start the engine therefore finds the file
// that holds the process's libc10 (dladdr), reads the version written beside
// it (torch/version.py of a wheel: `__version__ = '2.11.0+cu130'`; libtorch's
// build-version file of the C++ distribution), and stays off with one log
// line when it differs from the build's (the full version, its local tag
// included: "+cu130" names the CUDA runtime). A torch whose version cannot be
// read (a source tree without either file) is reported once and trusted.
// No torch here: the engine passes the path; the tests pass files.

#include <optional>
#include <string>

namespace hotkernel {

// The version written beside `libraryPath` (a file in torch/lib/ or
// libtorch/lib/): ../version.py's __version__, else ../build-version's first
// line. nullopt when neither is there or readable, or neither holds a version.
std::optional<std::string> torchVersionBeside(const std::string& libraryPath);

// "" when a process with torch `found` can use a library built for `built`;
// else one line saying what differs. An empty `built` (a build that did not
// record it) matches anything. Versions compare whole ("2.11.0+cu130" is not
// "2.11.0+cu128"); a built version without a local tag matches any tag.
std::string torchMismatch(const std::string& built, const std::string& found);

}  // namespace hotkernel
