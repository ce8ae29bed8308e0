#include "SafePath.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "hotkernel/runtime/Check.h"

namespace hotkernel::cache::detail {
namespace {

std::string octalMode(mode_t mode) {
  char buf[8];
  std::snprintf(buf, sizeof(buf), "%04o", static_cast<unsigned>(mode & 07777));
  return buf;
}

// Common to directories and files. Returns false when `path` does not exist.
bool lstatChecked(const std::string& path, const char* kind, struct stat* st) {
  if (::lstat(path.c_str(), st) != 0) {
    if (errno != ENOENT && errno != ENOTDIR) {
      HOTKERNEL_THROW("cannot inspect cache ", kind, " ", path, ": ", std::strerror(errno));
    }
    return false;
  }
  if (S_ISLNK(st->st_mode)) {
    HOTKERNEL_THROW("refusing cache ", kind, " ", path,
                    ": it is a symlink (a link could redirect the cache to a location other users control); "
                    "point HOTKERNEL_CACHE_DIR at the real path");
  }
  if (st->st_uid != ::geteuid()) {
    HOTKERNEL_THROW("refusing cache ", kind, " ", path, ": it is owned by uid ", st->st_uid,
                    ", not by the current user (uid ", ::geteuid(), ")");
  }
  if (st->st_mode & (S_IWGRP | S_IWOTH)) {
    HOTKERNEL_THROW("refusing cache ", kind, " ", path, ": it is writable by group or others (mode ",
                    octalMode(st->st_mode), "); run: chmod go-w ", path);
  }
  return true;
}

}  // namespace

std::string absolutePath(const std::string& path) {
  if (path.empty()) {
    HOTKERNEL_THROW("empty cache directory path");
  }
  std::string out = path;
  if (out[0] != '/') {
    char buf[4096];
    if (::getcwd(buf, sizeof(buf)) == nullptr) {
      HOTKERNEL_THROW("getcwd failed: ", std::strerror(errno));
    }
    std::string cwd = buf;
    out = (cwd == "/" ? "" : cwd) + "/" + out;
  }
  // A trailing slash would make lstat follow a symlink to a directory.
  while (out.size() > 1 && out.back() == '/') out.pop_back();
  return out;
}

bool checkPrivateDirectory(const std::string& dir) {
  struct stat st;
  if (!lstatChecked(dir, "directory", &st)) return false;
  if (!S_ISDIR(st.st_mode)) {
    HOTKERNEL_THROW("refusing cache directory ", dir, ": it exists but is not a directory");
  }
  return true;
}

void ensurePrivateDirectory(const std::string& dir) {
  if (checkPrivateDirectory(dir)) return;
  // Create missing ancestors first, each 0700 (as for ~/.cache, the XDG spec asks for 0700).
  for (size_t pos = dir.find('/', 1); pos != std::string::npos; pos = dir.find('/', pos + 1)) {
    std::string prefix = dir.substr(0, pos);
    if (::mkdir(prefix.c_str(), 0700) != 0) {
      if (errno != EEXIST) {
        HOTKERNEL_THROW("cannot create directory ", prefix, ": ", std::strerror(errno));
      }
    }
  }
  if (::mkdir(dir.c_str(), 0700) != 0) {
    if (errno != EEXIST) {
      HOTKERNEL_THROW("cannot create cache directory ", dir, ": ", std::strerror(errno));
    }
  }
  if (!checkPrivateDirectory(dir)) {
    HOTKERNEL_THROW("cache directory ", dir, " vanished while it was being created");
  }
}

bool checkPrivateFile(const std::string& file) {
  struct stat st;
  if (!lstatChecked(file, "file", &st)) return false;
  if (!S_ISREG(st.st_mode)) {
    HOTKERNEL_THROW("refusing cache file ", file, ": it is not a regular file");
  }
  return true;
}

void ensurePrivateFile(const std::string& file) {
  // O_EXCL fails with EEXIST on any existing name, a dangling symlink included.
  int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd >= 0) {
    ::close(fd);
  } else {
    if (errno != EEXIST) {
      HOTKERNEL_THROW("cannot create cache file ", file, ": ", std::strerror(errno));
    }
  }
  if (!checkPrivateFile(file)) {
    HOTKERNEL_THROW("cache file ", file, " vanished while being created");
  }
}

}  // namespace hotkernel::cache::detail
