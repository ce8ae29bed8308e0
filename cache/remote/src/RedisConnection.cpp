#include "RedisConnection.h"

#include <pthread.h>
#include <signal.h>
#include <sys/time.h>

#include <cerrno>

#include "hotkernel/runtime/Check.h"

namespace hotkernel::cache::detail {
namespace {

timeval toTimeval(std::chrono::milliseconds ms) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(ms.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((ms.count() % 1000) * 1000);
  return tv;
}

// Arguments as hiredis's argv/argvlen arrays (binary-safe).
struct Argv {
  explicit Argv(const std::vector<std::string>& args) {
    for (const std::string& a : args) {
      data.push_back(a.data());
      sizes.push_back(a.size());
    }
  }
  std::vector<const char*> data;
  std::vector<size_t> sizes;
};

std::string errorReplyText(const redisReply& r) { return std::string(r.str, r.len); }

// Note [No SIGPIPE into the host]
// hiredis writes with write(2): to a peer that went away (a killed Redis) the
// kernel answers EPIPE and raises SIGPIPE on the writing thread, whose default
// action ends the host process. hotkernel installs no signal handler (the
// host's dispositions stay in force), so while a connection is used SIGPIPE is
// blocked on the calling thread only, a SIGPIPE this thread caused is taken
// off the pending set (sigtimedwait with a zero timeout), and the mask is
// restored: the write fails with EPIPE, which is a failed call like any other.
class SigpipeBlock {
 public:
  SigpipeBlock() {
    sigemptyset(&pipe_);
    sigaddset(&pipe_, SIGPIPE);
    sigset_t pending;
    sigemptyset(&pending);
    pthread_sigmask(SIG_BLOCK, &pipe_, &old_);
    sigpending(&pending);
    wasPending_ = sigismember(&pending, SIGPIPE) == 1;
  }
  ~SigpipeBlock() {
    sigset_t pending;
    sigemptyset(&pending);
    sigpending(&pending);
    if (!wasPending_ && sigismember(&pending, SIGPIPE) == 1) {
      const timespec zero{0, 0};
      while (sigtimedwait(&pipe_, nullptr, &zero) == -1 && errno == EINTR) {
      }
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  SigpipeBlock(const SigpipeBlock&) = delete;
  SigpipeBlock& operator=(const SigpipeBlock&) = delete;

 private:
  sigset_t pipe_;
  sigset_t old_;
  bool wasPending_ = false;
};

}  // namespace

std::unique_ptr<RedisConnection> RedisConnection::connect(const RemoteUrl& url, std::chrono::milliseconds timeout) {
  const timeval tv = toTimeval(timeout);
  redisContext* c = url.transport == RemoteUrl::Transport::Unix
                        ? redisConnectUnixWithTimeout(url.socketPath.c_str(), tv)
                        : redisConnectWithTimeout(url.host.c_str(), url.port, tv);
  HOTKERNEL_REQUIRE(c != nullptr, "cannot allocate a Redis connection");
  if (c->err != 0) {
    const std::string why = c->errstr;
    redisFree(c);
    HOTKERNEL_THROW("cannot connect to ", url.toString(), ": ", why);
  }
  std::unique_ptr<RedisConnection> conn(new RedisConnection(c));
  if (redisSetTimeout(c, tv) != REDIS_OK) conn->fail("setting the command timeout");
  if (url.database != 0) conn->command({"SELECT", std::to_string(url.database)});
  return conn;
}

RedisConnection::~RedisConnection() { redisFree(context_); }

void RedisConnection::fail(const char* what) {
  broken_ = true;
  HOTKERNEL_THROW("Redis ", what, " failed: ",
                  context_->err != 0 ? std::string(context_->errstr) : std::string("no reply"));
}

RedisReply RedisConnection::command(const std::vector<std::string>& args) {
  HOTKERNEL_REQUIRE(!broken_, "the Redis connection is broken");
  SigpipeBlock noSigpipe;  // Note [No SIGPIPE into the host]
  Argv argv(args);
  RedisReply reply(static_cast<redisReply*>(
      redisCommandArgv(context_, static_cast<int>(args.size()), argv.data.data(), argv.sizes.data())));
  if (!reply) fail(args.empty() ? "command" : args[0].c_str());
  HOTKERNEL_REQUIRE(reply->type != REDIS_REPLY_ERROR, "Redis ", args.empty() ? "" : args[0], " replied: ",
                    errorReplyText(*reply));
  return reply;
}

std::vector<RedisReply> RedisConnection::pipeline(const std::vector<std::vector<std::string>>& commands) {
  HOTKERNEL_REQUIRE(!broken_, "the Redis connection is broken");
  SigpipeBlock noSigpipe;  // Note [No SIGPIPE into the host]
  for (const std::vector<std::string>& args : commands) {
    Argv argv(args);
    if (redisAppendCommandArgv(context_, static_cast<int>(args.size()), argv.data.data(), argv.sizes.data()) !=
        REDIS_OK) {
      fail("queueing a command");
    }
  }
  std::vector<RedisReply> replies;
  std::string firstError;
  for (size_t i = 0; i < commands.size(); ++i) {
    void* raw = nullptr;
    if (redisGetReply(context_, &raw) != REDIS_OK || raw == nullptr) fail("reading a pipelined reply");
    RedisReply reply(static_cast<redisReply*>(raw));
    if (reply->type == REDIS_REPLY_ERROR && firstError.empty()) {
      firstError = commands[i].empty() ? errorReplyText(*reply) : commands[i][0] + ": " + errorReplyText(*reply);
    }
    replies.push_back(std::move(reply));
  }
  HOTKERNEL_REQUIRE(firstError.empty(), "Redis replied: ", firstError);
  return replies;
}

std::string replyString(const redisReply& reply) {
  HOTKERNEL_REQUIRE(reply.type == REDIS_REPLY_STRING || reply.type == REDIS_REPLY_STATUS,
                    "unexpected Redis reply type ", reply.type, " where a string was expected");
  return std::string(reply.str, reply.len);
}

}  // namespace hotkernel::cache::detail
