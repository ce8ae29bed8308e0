#pragma once
// A redis-server of the test's own: started on a Unix socket in a temporary
// directory (and, when asked, on a free loopback port), no persistence,
// killed with the fixture. Tests skip when redis-server is not installed
// (tools/setup.sh installs it).

#include <gtest/gtest.h>
#include <hiredis.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>

#include "../CacheTestUtil.h"

namespace hotkernel::cache::test {

inline std::string redisServerBinary() {
  for (const char* p : {"/usr/bin/redis-server", "/usr/local/bin/redis-server"}) {
    if (::access(p, X_OK) == 0) return p;
  }
  return "";
}

// A loopback TCP port nothing listens on now.
inline int freeLoopbackPort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  int port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  ::close(fd);
  return port;
}

class RedisServer {
 public:
  // tcpPort 0: the Unix socket only.
  explicit RedisServer(int tcpPort = 0) : tcpPort_(tcpPort) { start(); }
  ~RedisServer() { kill(); }
  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;

  const std::string& socketPath() const { return socket_; }
  std::string unixUrl(int db = 0) const { return "unix://" + socket_ + "?db=" + std::to_string(db); }
  int tcpPort() const { return tcpPort_; }
  bool running() const { return pid_ > 0; }

  // SIGKILL and reap: the server vanishes mid-run.
  void kill() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
  // SIGSTOP / SIGCONT: a server that accepts nothing and answers nothing (a partition, a hang).
  void pause() { ::kill(pid_, SIGSTOP); }
  void resume() { ::kill(pid_, SIGCONT); }
  // Starts it again on the same socket and port (empty: no persistence).
  void start() {
    const std::string bin = redisServerBinary();
    if (bin.empty()) return;
    socket_ = dir_.path() + "/redis.sock";
    pid_ = ::fork();
    if (pid_ == 0) {
      const std::string port = std::to_string(tcpPort_);
      ::execl(bin.c_str(), bin.c_str(), "--port", port.c_str(), "--bind", "127.0.0.1", "--unixsocket",
              socket_.c_str(), "--unixsocketperm", "700", "--save", "", "--appendonly", "no", "--dir",
              dir_.path().c_str(), "--loglevel", "warning", "--logfile", (dir_.path() + "/redis.log").c_str(),
              static_cast<char*>(nullptr));
      ::_exit(127);
    }
    for (int i = 0; i < 500; ++i) {  // up to 5 s
      if (redisContext* c = redisConnectUnix(socket_.c_str())) {
        const bool ok = c->err == 0;
        redisFree(c);
        if (ok) return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ADD_FAILURE() << "redis-server did not start on " << socket_;
  }

  // A raw command on a fresh connection (tests tamper behind the tier's back).
  std::string command(const std::vector<std::string>& args) const {
    redisContext* c = redisConnectUnix(socket_.c_str());
    std::vector<const char*> argv;
    std::vector<size_t> lens;
    for (const auto& a : args) {
      argv.push_back(a.data());
      lens.push_back(a.size());
    }
    auto* r = static_cast<redisReply*>(redisCommandArgv(c, static_cast<int>(args.size()), argv.data(), lens.data()));
    std::string out;
    if (r != nullptr) {
      if (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS || r->type == REDIS_REPLY_ERROR) {
        out.assign(r->str, r->len);
      } else if (r->type == REDIS_REPLY_INTEGER) {
        out = std::to_string(r->integer);
      } else if (r->type == REDIS_REPLY_NIL) {
        out = "(nil)";
      }
      freeReplyObject(r);
    }
    redisFree(c);
    return out;
  }

 private:
  TempDir dir_;
  int tcpPort_ = 0;
  std::string socket_;
  pid_t pid_ = -1;
};

#define HOTKERNEL_SKIP_WITHOUT_REDIS()                                                                     \
  do {                                                                                                     \
    if (::hotkernel::cache::test::redisServerBinary().empty())                                             \
      GTEST_SKIP() << "redis-server is not installed (tools/setup.sh installs Debian's redis-server)";    \
  } while (0)

}  // namespace hotkernel::cache::test
