// Writes and reads the commit log; its byte format is
// Note [Commit log format, version 1] in CommitLog.h.

#include "CommitLog.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>

#include "hotkernel/runtime/Check.h"
#include "hotkernel/runtime/Hash.h"
#include "hotkernel/runtime/JsonFields.h"

namespace hotkernel::cache::detail {
namespace {

constexpr size_t kLineDigestChars = 16;

std::string lineDigest(const std::string& json) { return sha256Hex(json).substr(0, kLineDigestChars); }

// An open, flock()ed descriptor of the log as it is named now.
class LockedLog {
 public:
  // Note [The commit log's lock file]
  // Writers and the compactor serialize on a flock() of "<log>.lock", a file
  // that is never replaced; the log itself is replaced by a compaction
  // (rename), so a lock on the log's inode would be lost with it, and a
  // writer would have to retry for as long as compactions follow each other.
  explicit LockedLog(const std::string& path) : path_(path) {
    const std::string lockPath = path + ".lock";
    lockFd_ = ::open(lockPath.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (lockFd_ < 0) {
      HOTKERNEL_THROW("cannot open cache commit log lock ", lockPath, ": ", std::strerror(errno));
    }
    while (::flock(lockFd_, LOCK_EX) != 0) {
      if (errno != EINTR) {
        const int err = errno;
        ::close(lockFd_);
        HOTKERNEL_THROW("cannot lock cache commit log ", lockPath, ": ", std::strerror(err));
      }
    }
    fd_ = ::open(path.c_str(), O_RDWR | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    struct stat byFd;
    if (fd_ < 0 || ::fstat(fd_, &byFd) != 0) {
      const int err = errno;
      if (fd_ >= 0) ::close(fd_);
      ::close(lockFd_);  // releases the lock
      HOTKERNEL_THROW("cannot open cache commit log ", path, ": ", std::strerror(err));
    }
    size_ = byFd.st_size;
  }
  ~LockedLog() {
    if (fd_ >= 0) ::close(fd_);
    if (lockFd_ >= 0) ::close(lockFd_);  // releases the lock
  }
  LockedLog(const LockedLog&) = delete;
  LockedLog& operator=(const LockedLog&) = delete;

  int fd() const { return fd_; }
  off_t size() const { return size_; }

  // Writes all of `bytes` at the end of the file.
  void append(const std::string& bytes) {
    size_t done = 0;
    while (done < bytes.size()) {
      ssize_t n = ::write(fd_, bytes.data() + done, bytes.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        HOTKERNEL_THROW("cannot append to cache commit log ", path_, ": ", std::strerror(n < 0 ? errno : EIO));
      }
      done += static_cast<size_t>(n);
    }
  }

  std::string readAll() const {
    std::string out;
    char buf[65536];
    off_t offset = 0;
    while (true) {
      ssize_t n = ::pread(fd_, buf, sizeof(buf), offset);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        HOTKERNEL_THROW("cannot read cache commit log ", path_, ": ", std::strerror(errno));
      }
      if (n == 0) break;
      out.append(buf, static_cast<size_t>(n));
      offset += n;
    }
    return out;
  }

 private:
  std::string path_;
  int lockFd_ = -1;  // "<log>.lock", flock()ed for the object's lifetime
  int fd_ = -1;
  off_t size_ = 0;
};

bool parseLine(const std::string& line, CommitRecord& out) {
  if (line.size() < kLineDigestChars + 2 || line[kLineDigestChars] != ' ') return false;
  std::string json = line.substr(kLineDigestChars + 1);
  if (line.compare(0, kLineDigestChars, lineDigest(json)) != 0) return false;
  // A line whose digest matches but whose fields do not (another writer's bug) counts as damaged.
  const std::string where = "commit record";
  try {
    const nlohmann::json j = jsonfield::parse(json, where, jsonfield::kMaxDepth);
    out.seq = jsonfield::integer(j, "seq", where);
    out.store = jsonfield::string(j, "store", where);
    out.kind = jsonfield::string(j, "kind", where);
    out.fingerprint = jsonfield::string(j, "fingerprint", where);
    out.op = jsonfield::string(j, "op", where);
    out.variant = jsonfield::string(j, "variant", where);
  } catch (const Error&) {
    return false;
  }
  return out.kind == "put" || out.kind == "remove";
}

CommitLogContents parse(const std::string& bytes) {
  CommitLogContents c;
  c.exists = true;
  size_t eol = bytes.find('\n');
  if (bytes.empty()) {
    c.readable = true;  // created, header not yet written
    return c;
  }
  if (eol == std::string::npos || bytes.compare(0, eol, kCommitLogHeader) != 0) {
    c.problem = "the first line is not '" + std::string(kCommitLogHeader) + "' (another version, or damaged)";
    return c;
  }
  c.readable = true;
  size_t start = eol + 1;
  while (start < bytes.size()) {
    size_t end = bytes.find('\n', start);
    // A last line without its newline was torn by a kill (or is being written): skipped.
    if (end == std::string::npos) {
      ++c.damagedLines;
      break;
    }
    CommitRecord r;
    if (parseLine(bytes.substr(start, end - start), r)) {
      c.records.push_back(std::move(r));
    } else {
      ++c.damagedLines;
    }
    start = end + 1;
  }
  return c;
}

}  // namespace

std::string encodeCommitRecord(const CommitRecord& r) {
  nlohmann::json j = {{"store", r.store}, {"seq", r.seq},         {"kind", r.kind},
                      {"fingerprint", r.fingerprint}, {"op", r.op}, {"variant", r.variant}};
  // Non-UTF-8 bytes in a key are replaced, not thrown on: the line still names the entry.
  std::string json = j.dump(-1, ' ', /*ensure_ascii=*/true, nlohmann::json::error_handler_t::replace);
  return lineDigest(json) + " " + json + "\n";
}

void appendCommitRecords(const std::string& path, const std::vector<CommitRecord>& records) {
  LockedLog log(path);
  std::string bytes;
  if (log.size() == 0) {
    bytes = std::string(kCommitLogHeader) + "\n";
  } else {
    // End a line torn by a writer killed mid-append, so it damages only itself.
    char last = '\n';
    if (::pread(log.fd(), &last, 1, log.size() - 1) == 1 && last != '\n') bytes = "\n";
  }
  for (const CommitRecord& r : records) bytes += encodeCommitRecord(r);
  log.append(bytes);  // one write(): readers see whole lines or a torn last one
}

CommitLogContents readCommitLog(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    CommitLogContents c;
    c.exists = errno != ENOENT;
    if (c.exists) c.problem = std::string("cannot open it: ") + std::strerror(errno);
    return c;
  }
  std::string bytes;
  char buf[65536];
  while (true) {
    ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      CommitLogContents c;
      c.exists = true;
      c.problem = std::string("cannot read it: ") + std::strerror(errno);
      ::close(fd);
      return c;
    }
    if (n == 0) break;
    bytes.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return parse(bytes);
}

size_t compactCommitLog(const std::string& path, const std::function<bool(const CommitRecord&)>& keep) {
  LockedLog log(path);
  CommitLogContents c = parse(log.readAll());
  if (!c.readable) {
    HOTKERNEL_THROW("not compacting cache commit log ", path, ": ", c.problem);
  }
  std::string bytes = std::string(kCommitLogHeader) + "\n";
  size_t dropped = c.damagedLines;
  for (const CommitRecord& r : c.records) {
    if (keep(r)) {
      bytes += encodeCommitRecord(r);
    } else {
      ++dropped;
    }
  }
  const std::string tmp = path + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) {
    HOTKERNEL_THROW("cannot create ", tmp, ": ", std::strerror(errno));
  }
  bool ok = ::write(fd, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size()) && ::fsync(fd) == 0;
  int err = errno;
  ::close(fd);
  if (!ok || ::rename(tmp.c_str(), path.c_str()) != 0) {
    if (ok) err = errno;
    ::unlink(tmp.c_str());
    HOTKERNEL_THROW("cannot rewrite cache commit log ", path, ": ", std::strerror(err));
  }
  return dropped;
}

}  // namespace hotkernel::cache::detail
