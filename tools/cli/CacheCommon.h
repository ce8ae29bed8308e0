#pragma once
// What the `cache` commands share: the --dir and --key-file options, the
// directory and key they resolve to, and the line for a missing cache.

#include <string>

#include "hotkernel/cache/EntryKey.h"

namespace CLI {
class App;
}

namespace hotkernel::cli {

// Adds --dir to `cmd`, stored in `dir`.
void addCacheDirOption(CLI::App* cmd, std::string& dir);
// Adds --key-file to `cmd`, stored in `keyFile`; `purpose` ends the help text's first clause.
void addKeyFileOption(CLI::App* cmd, std::string& keyFile, const std::string& purpose);

// --dir's value, else HOTKERNEL_CACHE_DIR / the default.
std::string resolveCacheDir(const std::string& dir);

// The key named by --key-file, else HOTKERNEL_CACHE_KEY_FILE; none when both
// are empty. A refused key file throws (exit 2): a command never falls back
// to working without the key it was asked to use.
cache::EntryTrust trustFromKeyFile(const std::string& keyFile, const std::string& dir);

// "no hotkernel cache at <dir>" on stderr.
void printNoCache(const std::string& dir);

}  // namespace hotkernel::cli
