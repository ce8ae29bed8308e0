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

namespace hotkernel::cache::detail {
namespace {

constexpr size_t kLineDigestChars = 16;

std::string lineDigest(const std::string& json) { return sha256Hex(json).substr(0, kLineDigestChars); }

// An open, flock()ed descriptor of the log as it is named now.
class LockedLog {
 public:
  explicit LockedLog(const std::string& path) : path_(path) {
    // The path may be replaced by a compaction between open and flock: lock,
    // then check that the name still points to the locked inode.
    for (int attempt = 0; attempt < 100; ++attempt) {
      fd_ = ::open(path.c_str(), O_RDWR | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
      if (fd_ < 0) {
        HOTKERNEL_THROW("cannot open cache commit log ", path, ": ", std::strerror(errno));
      }
      while (::flock(fd_, LOCK_EX) != 0) {
        if (errno != EINTR) {
          int err = errno;
          ::close(fd_);
          HOTKERNEL_THROW("cannot lock cache commit log ", path, ": ", std::strerror(err));
        }
      }
      struct stat byFd, byName;
      if (::fstat(fd_, &byFd) == 0 && ::lstat(path.c_str(), &byName) == 0 && byFd.st_ino == byName.st_ino &&
          byFd.st_dev == byName.st_dev) {
        size_ = byFd.st_size;
        return;
      }
      ::close(fd_);  // releases the lock
      fd_ = -1;
    }
    HOTKERNEL_THROW("cache commit log ", path, " keeps being replaced; giving up");
  }
  ~LockedLog() {
    if (fd_ >= 0) ::close(fd_);  // releases the lock
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
  int fd_ = -1;
  off_t size_ = 0;
};

bool parseLine(const std::string& line, CommitRecord& out) {
  if (line.size() < kLineDigestChars + 2 || line[kLineDigestChars] != ' ') return false;
  std::string json = line.substr(kLineDigestChars + 1);
  if (line.compare(0, kLineDigestChars, lineDigest(json)) != 0) return false;
  nlohmann::json j = nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return false;
  auto text = [&j](const char* key, std::string& field) {
    auto it = j.find(key);
    if (it == j.end() || !it->is_string()) return false;
    field = it->get<std::string>();
    return true;
  };
  auto seq = j.find("seq");
  if (seq == j.end() || !seq->is_number_integer()) return false;
  out.seq = seq->get<int64_t>();
  return text("store", out.store) && text("kind", out.kind) && (out.kind == "put" || out.kind == "remove") &&
         text("fingerprint", out.fingerprint) && text("op", out.op) && text("variant", out.variant);
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
