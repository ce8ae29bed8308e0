#include "BundleFile.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "hotkernel/runtime/Check.h"

namespace hotkernel::cli {
namespace {

std::string kindOf(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device";
  return "not a regular file";
}

struct Fd {
  int fd;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

std::string readBundleFile(const std::string& path, std::string* bytes) {
  const std::string cannot = "cannot read " + path;
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return cannot + " (" + std::strerror(errno) + ")";
  if (!S_ISREG(st.st_mode)) return cannot + ": it is " + kindOf(st.st_mode) + ", not a bundle file";
  Fd f{::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY)};
  if (f.fd < 0) return cannot + " (" + std::strerror(errno) + ")";
  if (::fstat(f.fd, &st) != 0) return cannot + " (" + std::strerror(errno) + ")";
  if (!S_ISREG(st.st_mode)) return cannot + ": it is " + kindOf(st.st_mode) + ", not a bundle file";
  const std::string tooLarge = cannot + ": it is larger than " + std::to_string(kMaxBundleBytes >> 30) + " GiB";
  if (static_cast<unsigned long long>(st.st_size) > kMaxBundleBytes) return tooLarge;
  std::string out;
  out.reserve(static_cast<size_t>(st.st_size));
  char buf[1 << 16];
  while (true) {
    const ssize_t n = ::read(f.fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return cannot + " (" + std::strerror(errno) + ")";
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
    if (out.size() > kMaxBundleBytes) return tooLarge;
  }
  *bytes = std::move(out);
  return "";
}

void writeBundleFile(const std::string& path, const std::string& bytes) {
  const std::string tmp = path + ".tmp-" + std::to_string(::getpid());
  Fd f{::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644)};
  HOTKERNEL_REQUIRE(f.fd >= 0, "cannot write ", path, ": creating ", tmp, " failed (", std::strerror(errno), ")");
  size_t done = 0;
  std::string problem;
  while (done < bytes.size() && problem.empty()) {
    const ssize_t n = ::write(f.fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      problem = std::string("writing failed (") + std::strerror(n < 0 ? errno : EIO) + ")";
    } else {
      done += static_cast<size_t>(n);
    }
  }
  if (problem.empty() && ::fsync(f.fd) != 0) problem = std::string("fsync failed (") + std::strerror(errno) + ")";
  if (problem.empty() && ::rename(tmp.c_str(), path.c_str()) != 0) {
    problem = std::string("renaming ") + tmp + " over it failed (" + std::strerror(errno) + ")";
  }
  if (!problem.empty()) {
    ::unlink(tmp.c_str());
    HOTKERNEL_THROW("cannot write ", path, ": ", problem);
  }
}

}  // namespace hotkernel::cli
