#pragma once
// Where the shared tier lives: HOTKERNEL_REMOTE_CACHE's value, parsed.
//
// Note [Remote cache URL]
// Two forms, nothing else:
//
//   redis://HOST[:PORT][/DB]      TCP; HOST a name (letters, digits, '-', '.'), an IPv4 address or
//                                 an IPv6 address in brackets ([::1]); PORT 1..65535, default 6379;
//                                 DB a decimal number 0..kMaxDatabase, default 0
//   unix:///ABSOLUTE/PATH[?db=DB] a Unix domain socket; DB as above
//
// Refused, each with one line that names the value and the rule it breaks:
// another scheme (rediss:// included: the hiredis of the build has no TLS),
// credentials (user:password@: a password in an environment variable is
// visible to every process of the user and in /proc), percent-escapes, a
// query other than unix's db=, a fragment, a path after the database number,
// control characters or spaces, an empty host, a port or database number
// that is not decimal or out of range, a relative socket path. A value is
// either used exactly as written or refused: nothing is guessed.

#include <cstdint>
#include <string>

namespace hotkernel::cache {

struct RemoteUrl {
  static constexpr int kDefaultPort = 6379;
  static constexpr int64_t kMaxDatabase = 2147483647;  // what SELECT takes; the server may allow fewer

  enum class Transport { Tcp, Unix };
  Transport transport = Transport::Tcp;
  std::string host;        // Tcp: the name or address, an IPv6 address without its brackets
  int port = kDefaultPort;  // Tcp
  std::string socketPath;  // Unix: absolute
  int64_t database = 0;

  // The canonical form: redis://host:port/db or unix:///path?db=N.
  std::string toString() const;
};

// Parses a value of HOTKERNEL_REMOTE_CACHE (Note [Remote cache URL]). Throws
// hotkernel::Error with one line naming the value and the broken rule.
RemoteUrl parseRemoteUrl(const std::string& text);

}  // namespace hotkernel::cache
