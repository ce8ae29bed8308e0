#pragma once
// `hotkernel cache export` and `hotkernel cache import`: a cache bundle
// (Note [Cache bundle format, version 1] in hotkernel/cache/Bundle.h) written
// from and read into the cache, to ship a warmed cache to other machines.

#include "ExitStatus.h"

namespace CLI {
class App;
}

namespace hotkernel::cli {

// Adds `export` and `import` to the `cache` command group. Exit codes:
// export 0 written, 1 nothing to export (no file written), 2 bad usage (no
// fingerprint of this machine known without --fingerprint or --all), a refused
// key file, an unwritable --out; import 0 imported (also when nothing
// changed), 1 the bundle refused (not a bundle, another format version,
// truncated, damaged, unsigned or badly signed under a configured key,
// malformed), 2 the file unreadable, a refused key file, an unsafe cache.
void addCacheBundleCommands(CLI::App& cache, ExitStatus& status);

}  // namespace hotkernel::cli
