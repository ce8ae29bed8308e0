#include "hotkernel/optimizer/Subprocess.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <type_traits>

#include "hotkernel/runtime/Check.h"

extern char** environ;

namespace hotkernel {
namespace {

using Clock = std::chrono::steady_clock;

constexpr size_t kChunkBytes = 64 << 10;

std::string errnoText(int e) {
  char buf[256];
  // GNU strerror_r returns the message (maybe not in buf); XSI returns an int.
  auto r = ::strerror_r(e, buf, sizeof(buf));
  if constexpr (std::is_same_v<decltype(r), char*>) {
    return r;
  } else {
    return r == 0 ? std::string(buf) : "errno " + std::to_string(e);
  }
}

const char* signalName(int sig) {
  switch (sig) {
    case SIGHUP:
      return "SIGHUP";
    case SIGINT:
      return "SIGINT";
    case SIGQUIT:
      return "SIGQUIT";
    case SIGILL:
      return "SIGILL";
    case SIGTRAP:
      return "SIGTRAP";
    case SIGABRT:
      return "SIGABRT";
    case SIGBUS:
      return "SIGBUS";
    case SIGFPE:
      return "SIGFPE";
    case SIGKILL:
      return "SIGKILL";
    case SIGUSR1:
      return "SIGUSR1";
    case SIGSEGV:
      return "SIGSEGV";
    case SIGUSR2:
      return "SIGUSR2";
    case SIGPIPE:
      return "SIGPIPE";
    case SIGALRM:
      return "SIGALRM";
    case SIGTERM:
      return "SIGTERM";
    case SIGXCPU:
      return "SIGXCPU";
    case SIGXFSZ:
      return "SIGXFSZ";
    case SIGSYS:
      return "SIGSYS";
    default:
      return "unknown signal";
  }
}

// Owns one file descriptor.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() { reset(); }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  bool open() const { return fd_ >= 0; }
  void reset(int fd = -1) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }

 private:
  int fd_ = -1;
};

// A pipe whose two ends are O_CLOEXEC and >= 3, so that the dup2 file actions
// onto 0, 1 and 2 can never clobber one another.
bool makePipe(Fd& readEnd, Fd& writeEnd, std::string& error) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    error = "pipe2: " + errnoText(errno);
    return false;
  }
  for (int& fd : fds) {
    if (fd < 3) {
      const int moved = ::fcntl(fd, F_DUPFD_CLOEXEC, 3);
      ::close(fd);
      fd = moved;
    }
  }
  readEnd.reset(fds[0]);
  writeEnd.reset(fds[1]);
  if (!readEnd.open() || !writeEnd.open()) {
    error = "fcntl(F_DUPFD_CLOEXEC): " + errnoText(errno);
    return false;
  }
  return true;
}

void setNonBlocking(int fd) {
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0) ::fcntl(fd, F_SETFL, flags | O_NONBLOCK);
}

// Note [Writing to a pipe without SIGPIPE]
// write() to a pipe whose reader has gone raises SIGPIPE in the writing
// thread, and its default action would end the serving process. While a
// SigpipeBlocker lives, SIGPIPE is blocked in this thread; a SIGPIPE our
// writes raised (thread-directed, so only ours) is consumed before the mask is
// restored, unless one was already pending before, which is left alone.
class SigpipeBlocker {
 public:
  SigpipeBlocker() {
    sigemptyset(&set_);
    sigaddset(&set_, SIGPIPE);
    sigset_t pending;
    sigemptyset(&pending);
    ::sigpending(&pending);
    wasPending_ = sigismember(&pending, SIGPIPE) == 1;
    ::pthread_sigmask(SIG_BLOCK, &set_, &old_);
  }
  ~SigpipeBlocker() {
    if (raised_ && !wasPending_) {
      const struct timespec zero = {0, 0};
      while (::sigtimedwait(&set_, nullptr, &zero) < 0 && errno == EINTR) {
      }
    }
    ::pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  SigpipeBlocker(const SigpipeBlocker&) = delete;
  SigpipeBlocker& operator=(const SigpipeBlocker&) = delete;
  void noteRaised() { raised_ = true; }

 private:
  sigset_t set_;
  sigset_t old_;
  bool wasPending_ = false;
  bool raised_ = false;
};

// Reaps the child on every path out of runSubprocess (Note [No zombies, no stragglers]).
class ChildReaper {
 public:
  explicit ChildReaper(pid_t pid) : pid_(pid) {}
  ~ChildReaper() {
    if (!reaped_) {
      ::kill(-pid_, SIGKILL);
      int status = 0;
      while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
      }
    }
  }
  ChildReaper(const ChildReaper&) = delete;
  ChildReaper& operator=(const ChildReaper&) = delete;

  // Kills what is left of the group, then waits for the child. Returns false
  // when the status was taken by someone else (ECHILD).
  bool reap(int& status) {
    ::kill(-pid_, SIGKILL);  // the unreaped child keeps pid and pgid reserved: no reuse race
    pid_t r;
    while ((r = ::waitpid(pid_, &status, 0)) < 0 && errno == EINTR) {
    }
    reaped_ = true;
    return r == pid_;
  }

 private:
  pid_t pid_;
  bool reaped_ = false;
};

// Whether the child has exited, without reaping it.
bool hasExited(pid_t pid) {
  siginfo_t info;
  std::memset(&info, 0, sizeof(info));
  if (::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) != 0) {
    return errno == ECHILD;  // reaped by someone else: treat as exited
  }
  return info.si_pid == pid;
}

std::atomic<bool> forcePolling{false};

int openPidfd(pid_t pid) {
  if (forcePolling.load(std::memory_order_relaxed)) return -1;
#ifdef SYS_pidfd_open
  const long fd = ::syscall(SYS_pidfd_open, pid, 0);
  return fd >= 0 ? static_cast<int>(fd) : -1;
#else
  (void)pid;
  return -1;
#endif
}

// Appends what `fd` has now, up to `cap` bytes in `sink`; returns false at
// EOF or error (the fd is then closed). Sets `overflow` when more arrived
// than fits; the excess is dropped.
bool readAvailable(Fd& fd, std::string& sink, size_t cap, bool& overflow, std::vector<char>& buf) {
  while (true) {
    const ssize_t n = ::read(fd.get(), buf.data(), buf.size());
    if (n > 0) {
      const size_t room = cap - std::min(cap, sink.size());
      const size_t take = std::min(room, static_cast<size_t>(n));
      sink.append(buf.data(), take);
      if (take < static_cast<size_t>(n)) overflow = true;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
    fd.reset();  // EOF or a read error
    return false;
  }
}

void checkNoNul(const std::string& s, const char* what) {
  HOTKERNEL_CHECK(s.find('\0') == std::string::npos, "runSubprocess: ", what, " holds a NUL byte");
}

}  // namespace

bool SubprocessResult::succeeded() const {
  return started && exited && exitCode == 0 && !timedOut && !stdoutLimitExceeded;
}

std::string SubprocessResult::describe() const {
  if (!started) return "could not be started: " + spawnError;
  char buf[64];
  if (timedOut) {
    std::snprintf(buf, sizeof(buf), "%.1f", wallSeconds);
    return std::string("timed out after ") + buf + " s (killed)";
  }
  if (stdoutLimitExceeded) return "stdout exceeded " + std::to_string(out.size()) + " bytes (killed)";
  if (statusUnknown) return "exit status unknown (the child was reaped elsewhere)";
  if (signal > 0) return "killed by signal " + std::to_string(signal) + " (" + signalName(signal) + ")";
  return "exited with status " + std::to_string(exitCode);
}

SubprocessResult runSubprocess(const SubprocessOptions& options) {
  HOTKERNEL_CHECK(!options.argv.empty() && !options.argv[0].empty(), "runSubprocess: argv[0] must name a program");
  HOTKERNEL_CHECK(options.timeoutSeconds > 0 && std::isfinite(options.timeoutSeconds),
                  "runSubprocess: timeoutSeconds must be > 0, got ", options.timeoutSeconds);
  for (const std::string& a : options.argv) checkNoNul(a, "an argument");
  for (const auto& [name, value] : options.env) {
    HOTKERNEL_CHECK(!name.empty() && name.find('=') == std::string::npos,
                    "runSubprocess: bad environment variable name '", name, "'");
    checkNoNul(name, "an environment name");
    checkNoNul(value, "an environment value");
  }
  checkNoNul(options.workingDirectory, "the working directory");

  const Clock::time_point start = Clock::now();
  SubprocessResult result;

  // Everything the child needs is built before spawning (argv, envp).
  std::vector<char*> argv;
  for (const std::string& a : options.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<std::string> envStrings;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string entry(*e);
    const std::string name = entry.substr(0, entry.find('='));
    const bool overridden =
        std::any_of(options.env.begin(), options.env.end(), [&](const auto& kv) { return kv.first == name; });
    if (!overridden) envStrings.push_back(entry);
  }
  for (size_t i = 0; i < options.env.size(); ++i) {
    // Named references, not a structured binding: a lambda may not capture one before C++20 (clang refuses).
    const std::string& name = options.env[i].first;
    const std::string& value = options.env[i].second;
    const bool laterWins = std::any_of(options.env.begin() + static_cast<std::ptrdiff_t>(i) + 1, options.env.end(),
                                       [&](const auto& kv) { return kv.first == name; });
    if (!laterWins) envStrings.push_back(name + "=" + value);
  }
  std::vector<char*> envp;
  for (std::string& s : envStrings) envp.push_back(s.data());
  envp.push_back(nullptr);

  Fd inRead, inWrite, outRead, outWrite, errRead, errWrite;
  std::string error;
  if (!makePipe(inRead, inWrite, error) || !makePipe(outRead, outWrite, error) || !makePipe(errRead, errWrite, error)) {
    result.spawnError = error;
    return result;
  }

  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attr;
  ::posix_spawn_file_actions_init(&actions);
  ::posix_spawnattr_init(&attr);
  ::posix_spawn_file_actions_adddup2(&actions, inRead.get(), STDIN_FILENO);
  ::posix_spawn_file_actions_adddup2(&actions, outWrite.get(), STDOUT_FILENO);
  ::posix_spawn_file_actions_adddup2(&actions, errWrite.get(), STDERR_FILENO);
  if (!options.workingDirectory.empty()) {
    ::posix_spawn_file_actions_addchdir_np(&actions, options.workingDirectory.c_str());
  }
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 34))
  ::posix_spawn_file_actions_addclosefrom_np(&actions, 3);
#endif
  sigset_t noSignals, allSignals;
  sigemptyset(&noSignals);
  sigfillset(&allSignals);
  ::posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  ::posix_spawnattr_setpgroup(&attr, 0);
  ::posix_spawnattr_setsigmask(&attr, &noSignals);
  ::posix_spawnattr_setsigdefault(&attr, &allSignals);

  pid_t pid = -1;
  const int rc = ::posix_spawnp(&pid, argv[0], &actions, &attr, argv.data(), envp.data());
  ::posix_spawn_file_actions_destroy(&actions);
  ::posix_spawnattr_destroy(&attr);
  if (rc != 0) {
    result.spawnError = "posix_spawn(" + options.argv[0] + "): " + errnoText(rc);
    result.wallSeconds = std::chrono::duration<double>(Clock::now() - start).count();
    return result;
  }
  result.started = true;
  result.pid = pid;
  ChildReaper reaper(pid);
  inRead.reset();
  outWrite.reset();
  errWrite.reset();
  setNonBlocking(inWrite.get());
  setNonBlocking(outRead.get());
  setNonBlocking(errRead.get());
  Fd pidfd(openPidfd(pid));

  const Clock::time_point deadline =
      start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(options.timeoutSeconds));
  std::vector<char> buf(kChunkBytes);
  size_t written = 0;
  if (options.stdinData.empty()) inWrite.reset();
  bool exited = false;
  bool stderrOverflow = false;
  SigpipeBlocker sigpipe;

  while (true) {
    if (!pidfd.open() && !exited) exited = hasExited(pid);
    if (exited) {
      // Stragglers go first, then whatever the pipes still hold is read.
      ::kill(-pid, SIGKILL);
      if (outRead.open()) {
        bool overflow = false;
        readAvailable(outRead, result.out, options.maxStdoutBytes, overflow, buf);
        if (overflow) result.stdoutLimitExceeded = true;
      }
      if (errRead.open()) readAvailable(errRead, result.err, options.maxStderrBytes, stderrOverflow, buf);
      break;
    }
    const Clock::time_point now = Clock::now();
    if (now >= deadline) {
      result.timedOut = true;
      break;
    }
    struct pollfd fds[4];
    int n = 0;
    int inIdx = -1, outIdx = -1, errIdx = -1, pidIdx = -1;
    if (inWrite.open()) fds[inIdx = n++] = {inWrite.get(), POLLOUT, 0};
    if (outRead.open()) fds[outIdx = n++] = {outRead.get(), POLLIN, 0};
    if (errRead.open()) fds[errIdx = n++] = {errRead.get(), POLLIN, 0};
    if (pidfd.open()) fds[pidIdx = n++] = {pidfd.get(), POLLIN, 0};
    const auto remainingMs = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now).count() + 1;
    const int waitMs = static_cast<int>(std::min<long long>(pidfd.open() ? remainingMs : 10, remainingMs));
    const int ready = ::poll(fds, static_cast<nfds_t>(n), waitMs);
    if (ready < 0) {
      if (errno == EINTR) continue;
      HOTKERNEL_INTERNAL_ASSERT(false, "poll failed: ", errnoText(errno));
    }
    if (inIdx >= 0 && fds[inIdx].revents != 0) {
      if (fds[inIdx].revents & (POLLERR | POLLHUP)) {
        inWrite.reset();  // the child closed its stdin: the rest is not wanted
      } else {
        const size_t len = std::min(kChunkBytes, options.stdinData.size() - written);
        const ssize_t w = ::write(inWrite.get(), options.stdinData.data() + written, len);
        if (w > 0) {
          written += static_cast<size_t>(w);
          if (written == options.stdinData.size()) inWrite.reset();
        } else if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
          if (errno == EPIPE) sigpipe.noteRaised();
          inWrite.reset();
        }
      }
    }
    if (outIdx >= 0 && fds[outIdx].revents != 0) {
      bool overflow = false;
      readAvailable(outRead, result.out, options.maxStdoutBytes, overflow, buf);
      if (overflow) {
        result.stdoutLimitExceeded = true;
        break;
      }
    }
    if (errIdx >= 0 && fds[errIdx].revents != 0) {
      readAvailable(errRead, result.err, options.maxStderrBytes, stderrOverflow, buf);
    }
    if (pidIdx >= 0 && fds[pidIdx].revents != 0) exited = true;
  }
  result.stderrTruncated = stderrOverflow;

  int status = 0;
  if (!reaper.reap(status)) {
    result.statusUnknown = !result.timedOut && !result.stdoutLimitExceeded;
  } else if (WIFEXITED(status)) {
    result.exited = true;
    result.exitCode = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    result.signal = WTERMSIG(status);
  }
  result.wallSeconds = std::chrono::duration<double>(Clock::now() - start).count();
  return result;
}

void detail::forceSubprocessPollingForTesting(bool force) { forcePolling.store(force); }

std::vector<std::string> splitCommandLine(const std::string& commandLine) {
  std::vector<std::string> words;
  std::string word;
  bool inWord = false;  // a word is open (possibly empty, after "")
  const size_t n = commandLine.size();
  for (size_t i = 0; i < n; ++i) {
    const char c = commandLine[i];
    if (c == ' ' || c == '\t' || c == '\n') {
      if (inWord) words.push_back(word);
      word.clear();
      inWord = false;
    } else if (c == '\'') {
      const size_t close = commandLine.find('\'', i + 1);
      HOTKERNEL_CHECK(close != std::string::npos, "unterminated ' in command line: ", commandLine);
      word.append(commandLine, i + 1, close - i - 1);
      inWord = true;
      i = close;
    } else if (c == '"') {
      size_t j = i + 1;
      for (; j < n && commandLine[j] != '"'; ++j) {
        if (commandLine[j] == '\\' && j + 1 < n && std::strchr("\"\\$`", commandLine[j + 1]) != nullptr) {
          word += commandLine[++j];
        } else {
          word += commandLine[j];
        }
      }
      HOTKERNEL_CHECK(j < n, "unterminated \" in command line: ", commandLine);
      inWord = true;
      i = j;
    } else if (c == '\\') {
      HOTKERNEL_CHECK(i + 1 < n, "trailing backslash in command line: ", commandLine);
      ++i;
      if (commandLine[i] != '\n') {
        word += commandLine[i];
        inWord = true;
      }
    } else {
      word += c;
      inWord = true;
    }
  }
  if (inWord) words.push_back(word);
  return words;
}

}  // namespace hotkernel
