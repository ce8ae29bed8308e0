#pragma once
// One synchronous hiredis connection with a deadline on every operation.
//
// Note [Every Redis call has a deadline]
// The shared tier is optional: a Redis that is down, slow or cut off must cost
// a caller at most the configured timeout, never a hang. The connect uses
// redisConnectWithTimeout / redisConnectUnixWithTimeout, and every command
// after it runs under SO_RCVTIMEO / SO_SNDTIMEO (redisSetTimeout), so each
// round trip ends within the timeout or fails. A connection that failed once
// (an I/O error or a timeout leaves hiredis's reader mid-reply) is never used
// again: broken() turns true and the owner drops it.

#include <hiredis.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "hotkernel/cache/RemoteUrl.h"

namespace hotkernel::cache::detail {

struct ReplyDeleter {
  void operator()(redisReply* r) const noexcept {
    if (r != nullptr) freeReplyObject(r);
  }
};
using RedisReply = std::unique_ptr<redisReply, ReplyDeleter>;

class RedisConnection {
 public:
  // Connects, sets the command timeout and SELECTs url.database. Throws
  // hotkernel::Error with one line (what failed, hiredis's reason).
  static std::unique_ptr<RedisConnection> connect(const RemoteUrl& url, std::chrono::milliseconds timeout);
  ~RedisConnection();
  RedisConnection(const RedisConnection&) = delete;
  RedisConnection& operator=(const RedisConnection&) = delete;

  // One command (binary-safe arguments). Throws Error on an I/O error or a
  // timeout (the connection is then broken()) and on an error reply (the
  // connection stays usable).
  RedisReply command(const std::vector<std::string>& args);
  // Several commands in one round trip; the replies in order. Throws as
  // command() does (an error reply of any of them throws, after every reply was read).
  std::vector<RedisReply> pipeline(const std::vector<std::vector<std::string>>& commands);

  bool broken() const { return broken_; }

 private:
  explicit RedisConnection(redisContext* context) : context_(context) {}
  [[noreturn]] void fail(const char* what);
  redisContext* context_;  // owned
  bool broken_ = false;
};

// The bytes of a string or status reply; throws Error for another type.
std::string replyString(const redisReply& reply);

}  // namespace hotkernel::cache::detail
