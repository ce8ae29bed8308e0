#include "TerminationHook.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <thread>

#include "hotkernel/runtime/Logging.h"

namespace hotkernel {
namespace {

// The pipe's write end, used by the handler; -1 before install.
std::atomic<int> gWriteFd{-1};
std::atomic<bool> gInstalled{false};

void onSigterm(int) {
  const int saved = errno;
  const char byte = 1;
  const int fd = gWriteFd.load(std::memory_order_relaxed);
  if (fd >= 0) (void)!::write(fd, &byte, 1);  // non-blocking: a second SIGTERM while the first is handled is dropped
  errno = saved;
}

bool isOurHandler() {
  struct sigaction current {};
  if (::sigaction(SIGTERM, nullptr, &current) != 0) return false;
  return (current.sa_flags & SA_SIGINFO) == 0 && current.sa_handler == &onSigterm;
}

void restoreDefault() {
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  (void)::sigaction(SIGTERM, &dfl, nullptr);
}

}  // namespace

bool installTerminationHook(void (*onTerm)()) {
  if (gInstalled.load()) return true;
  struct sigaction current {};
  if (::sigaction(SIGTERM, nullptr, &current) != 0) return false;
  if ((current.sa_flags & SA_SIGINFO) != 0 || current.sa_handler != SIG_DFL) return false;  // the host's
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return false;
  (void)::fcntl(fds[1], F_SETFL, O_NONBLOCK);
  const int readFd = fds[0];
  try {
    std::thread([readFd, onTerm] {
      char byte = 0;
      ssize_t n;
      do {
        n = ::read(readFd, &byte, 1);
      } while (n < 0 && errno == EINTR);
      if (n != 1) return;
      onTerm();
      // Note [The profile on SIGTERM]: end as SIGTERM's default action would have.
      restoreDefault();
      ::kill(::getpid(), SIGTERM);
    }).detach();
  } catch (...) {
    ::close(fds[0]);
    ::close(fds[1]);
    return false;
  }
  gWriteFd.store(fds[1]);
  struct sigaction ours {};
  ours.sa_handler = &onSigterm;
  sigemptyset(&ours.sa_mask);
  ours.sa_flags = SA_RESTART;
  if (::sigaction(SIGTERM, &ours, nullptr) != 0) return false;
  gInstalled.store(true);
  HOTKERNEL_LOG(Debug) << "SIGTERM writes the profile, then ends the process as before";
  return true;
}

void resetTerminationHookInChild() {
  if (gInstalled.load() && isOurHandler()) restoreDefault();
}

}  // namespace hotkernel
