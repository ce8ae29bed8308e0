#include "CacheCommon.h"

#include <CLI/CLI.hpp>
#include <iostream>

#include "hotkernel/runtime/Config.h"

namespace hotkernel::cli {

void addCacheDirOption(CLI::App* cmd, std::string& dir) {
  cmd->add_option(
      "--dir", dir,
      "cache directory (default: $HOTKERNEL_CACHE_DIR, else $XDG_CACHE_HOME/hotkernel or ~/.cache/hotkernel)");
}

void addKeyFileOption(CLI::App* cmd, std::string& keyFile, const std::string& purpose) {
  cmd->add_option("--key-file", keyFile, "HMAC key " + purpose + " (default: $HOTKERNEL_CACHE_KEY_FILE)");
}

std::string resolveCacheDir(const std::string& dir) { return dir.empty() ? hotkernel::config().cacheDir : dir; }

cache::EntryTrust trustFromKeyFile(const std::string& keyFile, const std::string& dir) {
  const std::string path = keyFile.empty() ? hotkernel::config().cacheKeyFile : keyFile;
  if (path.empty()) return cache::EntryTrust::none();
  return cache::EntryTrust::withKey(cache::EntryKey::fromFile(path, dir));
}

void printNoCache(const std::string& dir) { std::cerr << "no hotkernel cache at " << dir << "\n"; }

}  // namespace hotkernel::cli
