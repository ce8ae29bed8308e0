#include "SafePath.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
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
// `rootOwnerAllowed`: Note [Read-only cache directories].
bool lstatChecked(const std::string& path, const char* kind, struct stat* st, bool rootOwnerAllowed = false) {
  if (::lstat(path.c_str(), st) != 0) {
    if (errno != ENOENT && errno != ENOTDIR) {
      const int err = errno;
      // A read-only cache the serving user cannot enter: usually a baked cache left private by its root writer.
      HOTKERNEL_THROW("cannot inspect cache ", kind, " ", path, ": ", std::strerror(err),
                      err == EACCES && rootOwnerAllowed
                          ? " (a read-only cache must be readable by the serving user: chmod -R a+rX it when "
                            "baking it into an image)"
                          : "");
    }
    return false;
  }
  if (S_ISLNK(st->st_mode)) {
    HOTKERNEL_THROW("refusing cache ", kind, " ", path,
                    ": it is a symlink (a link could redirect the cache to a location other users control); "
                    "point HOTKERNEL_CACHE_DIR at the real path");
  }
  if (st->st_uid != ::geteuid() && !(rootOwnerAllowed && st->st_uid == 0)) {
    HOTKERNEL_THROW("refusing cache ", kind, " ", path, ": it is owned by uid ", st->st_uid,
                    ", not by the current user (uid ", ::geteuid(), ")", rootOwnerAllowed ? " or root" : "");
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

// Note [Ancestors of the cache directory]
// A private directory inside a directory that others can write is not
// private: they can rename it away and put their own in its place. Like ssh's
// StrictModes, every ancestor must be owned by root
// or by us, and writable by others or by a foreign group only with the sticky
// bit set (as /tmp is), which keeps them from renaming entries they do not own.
void checkAncestors(const std::string& dir) {
  const std::string parent = dir.substr(0, std::max<size_t>(dir.rfind('/'), 1));
  char* resolved = ::realpath(parent.c_str(), nullptr);
  if (!resolved) {
    HOTKERNEL_THROW("refusing cache directory ", dir, ": cannot resolve its parent (", std::strerror(errno), ")");
  }
  std::string path(resolved);
  std::free(resolved);
  while (true) {
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) {
      HOTKERNEL_THROW("refusing cache directory ", dir, ": cannot stat ancestor ", path, " (", std::strerror(errno), ")");
    }
    const bool sticky = (st.st_mode & S_ISVTX) != 0;
    if (st.st_uid != 0 && st.st_uid != ::geteuid()) {
      HOTKERNEL_THROW("refusing cache directory ", dir, ": ancestor ", path, " is owned by another user (uid ",
                      st.st_uid, ")");
    }
    if (!sticky && ((st.st_mode & S_IWOTH) || ((st.st_mode & S_IWGRP) && st.st_gid != ::getegid()))) {
      char mode[16];
      std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
      HOTKERNEL_THROW("refusing cache directory ", dir, ": ancestor ", path,
                      " is writable by other users and not sticky (mode ", mode, ")");
    }
    if (path == "/") break;
    const size_t slash = path.rfind('/');
    path = slash == 0 ? "/" : path.substr(0, slash);
  }
}

// Note [No symlinks in the cache path]
// SQLite opens the database with SQLITE_OPEN_NOFOLLOW, which refuses a path
// with a symlink in any component ("unable to open database file"). A link in
// the path is also a way around these checks: whoever owns it can re-point it
// after they ran. So every component of the path must be a real directory;
// the refusal names the link and its target, the path to use instead. The
// check runs before anything is created, so nothing appears behind a link.
void checkNoSymlinkComponents(const std::string& dir) {
  for (size_t pos = dir.find('/', 1); pos != std::string::npos; pos = dir.find('/', pos + 1)) {
    const std::string prefix = dir.substr(0, pos);
    struct stat st;
    if (::lstat(prefix.c_str(), &st) != 0 || !S_ISLNK(st.st_mode)) continue;
    char* resolved = ::realpath(prefix.c_str(), nullptr);
    std::string target = resolved ? resolved : "an unresolvable target";
    std::free(resolved);
    HOTKERNEL_THROW("refusing cache directory ", dir, ": path component ", prefix, " is a symlink (owned by uid ",
                    st.st_uid, ", to ", target,
                    "); the cache path must not contain links: point HOTKERNEL_CACHE_DIR at the real path");
  }
}

namespace {

bool checkDirectory(const std::string& dir, bool rootOwnerAllowed) {
  checkNoSymlinkComponents(dir);
  struct stat st;
  if (!lstatChecked(dir, "directory", &st, rootOwnerAllowed)) return false;
  if (!S_ISDIR(st.st_mode)) {
    HOTKERNEL_THROW("refusing cache directory ", dir, ": it exists but is not a directory");
  }
  checkAncestors(dir);
  return true;
}

bool checkFile(const std::string& file, bool rootOwnerAllowed) {
  struct stat st;
  if (!lstatChecked(file, "file", &st, rootOwnerAllowed)) return false;
  if (!S_ISREG(st.st_mode)) {
    HOTKERNEL_THROW("refusing cache file ", file, ": it is not a regular file");
  }
  return true;
}

}  // namespace

bool checkPrivateDirectory(const std::string& dir) { return checkDirectory(dir, /*rootOwnerAllowed=*/false); }

bool checkReadableDirectory(const std::string& dir) { return checkDirectory(dir, /*rootOwnerAllowed=*/true); }

bool directoryWritable(const std::string& dir) { return ::access(dir.c_str(), W_OK) == 0; }

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

bool checkPrivateFile(const std::string& file) { return checkFile(file, /*rootOwnerAllowed=*/false); }

bool checkReadableFile(const std::string& file) { return checkFile(file, /*rootOwnerAllowed=*/true); }

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
