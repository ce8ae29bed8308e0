#pragma once
// Permission checks for the cache directory and database files.
//
// Note [Why the cache directory must be private]
// The runtime loads cubins from the cache into the serving process, so the
// cache is code. A directory that another user can write (or a symlink that
// points into one) would let them plant or swap a database. We therefore
// accept only a real directory owned by the effective user with no group or
// other write bit, and real files inside it with the same properties. Once the
// directory passes, nobody but its owner (and root) can create, rename or
// replace files in it, so checking the files by path and then opening them
// (SQLite opens with O_NOFOLLOW) leaves no window for another user.
// Ancestors of the directory are checked too (Note [Ancestors of the cache
// directory] in SafePath.cpp), and no component of the path may be a symlink
// (Note [No symlinks in the cache path] there).

#include <string>

namespace hotkernel::cache::detail {

// `path` made absolute (relative to the working directory), trailing slashes removed.
std::string absolutePath(const std::string& path);

// Throws Error unless `dir` is a private directory (see the Note) under a path
// without symlinks. False when it does not exist.
bool checkPrivateDirectory(const std::string& dir);

// Creates `dir` and missing parents with mode 0700 (races with other creators
// are fine), then checks it like checkPrivateDirectory.
void ensurePrivateDirectory(const std::string& dir);

// Throws Error unless `file` is a regular file (not a symlink) owned by the
// effective user and not writable by group/others. False when it does not exist.
bool checkPrivateFile(const std::string& file);

// Creates `file` empty with mode 0600 unless it exists (never following a
// symlink), then checks it like checkPrivateFile.
void ensurePrivateFile(const std::string& file);

// Note [Read-only cache directories]
// A cache that a process only reads may also belong to root: a directory baked
// into a container image, root-owned and read-only for the serving user. Root
// can write anything in any case, so accepting its files trusts no one new;
// any other owner, group or other write bits and symlinks are refused as for
// a private directory. Such a directory is opened immutable when this process
// cannot write it (CacheStore::openBaked): nobody but root changes it while
// it is open.

// checkPrivateDirectory and checkPrivateFile for a read-only open: the owner
// may also be root.
bool checkReadableDirectory(const std::string& dir);
bool checkReadableFile(const std::string& file);

// Whether this process may create files in `dir` (access(2) with W_OK).
bool directoryWritable(const std::string& dir);

}  // namespace hotkernel::cache::detail
