#include "hotkernel/cache/RemoteUrl.h"

#include <cctype>

#include "hotkernel/runtime/Check.h"

namespace hotkernel::cache {
namespace {

constexpr const char* kTcpScheme = "redis://";
constexpr const char* kUnixScheme = "unix://";

bool startsWith(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

// A decimal number in [minimum, maximum], digits only (no sign, no spaces); `what` names it in the error.
int64_t decimalIn(const std::string& url, const std::string& digits, int64_t minimum, int64_t maximum,
                  const char* what) {
  HOTKERNEL_REQUIRE(!digits.empty(), "HOTKERNEL_REMOTE_CACHE='", url, "': the ", what, " is empty");
  int64_t n = 0;
  for (char c : digits) {
    HOTKERNEL_REQUIRE(c >= '0' && c <= '9', "HOTKERNEL_REMOTE_CACHE='", url, "': the ", what, " '", digits,
                      "' is not a decimal number");
    HOTKERNEL_REQUIRE(n <= (maximum - (c - '0')) / 10, "HOTKERNEL_REMOTE_CACHE='", url, "': the ", what, " ",
                      digits, " is above ", maximum);
    n = n * 10 + (c - '0');
  }
  HOTKERNEL_REQUIRE(n >= minimum, "HOTKERNEL_REMOTE_CACHE='", url, "': the ", what, " ", digits, " is below ",
                    minimum);
  return n;
}

bool hostNameCharacter(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.'; }
bool ipv6Character(char c) { return std::isxdigit(static_cast<unsigned char>(c)) || c == ':' || c == '.'; }

void parseTcp(const std::string& url, const std::string& rest, RemoteUrl& out) {
  // rest: HOST[:PORT][/DB]
  size_t hostEnd = 0;
  if (!rest.empty() && rest[0] == '[') {
    const size_t close = rest.find(']');
    HOTKERNEL_REQUIRE(close != std::string::npos, "HOTKERNEL_REMOTE_CACHE='", url,
                      "': an IPv6 address needs its closing ']'");
    out.host = rest.substr(1, close - 1);
    HOTKERNEL_REQUIRE(!out.host.empty(), "HOTKERNEL_REMOTE_CACHE='", url, "': the host is empty");
    for (char c : out.host) {
      HOTKERNEL_REQUIRE(ipv6Character(c), "HOTKERNEL_REMOTE_CACHE='", url, "': '", out.host,
                        "' is not an IPv6 address");
    }
    hostEnd = close + 1;
  } else {
    while (hostEnd < rest.size() && hostNameCharacter(rest[hostEnd])) ++hostEnd;
    out.host = rest.substr(0, hostEnd);
    HOTKERNEL_REQUIRE(!out.host.empty(), "HOTKERNEL_REMOTE_CACHE='", url,
                      "': the host is empty (redis://HOST[:PORT][/DB])");
    HOTKERNEL_REQUIRE(out.host.front() != '.' && out.host.front() != '-' && out.host.find("..") == std::string::npos,
                      "HOTKERNEL_REMOTE_CACHE='", url, "': '", out.host, "' is not a host name");
  }
  size_t at = hostEnd;
  if (at < rest.size() && rest[at] == ':') {
    const size_t end = rest.find('/', at + 1);
    const std::string port = rest.substr(at + 1, end == std::string::npos ? std::string::npos : end - at - 1);
    out.port = static_cast<int>(decimalIn(url, port, 1, 65535, "port"));
    at = end == std::string::npos ? rest.size() : end;
  }
  if (at < rest.size() && rest[at] == '/') {
    const std::string db = rest.substr(at + 1);
    if (!db.empty()) out.database = decimalIn(url, db, 0, RemoteUrl::kMaxDatabase, "database number");
    at = rest.size();
  }
  HOTKERNEL_REQUIRE(at == rest.size(), "HOTKERNEL_REMOTE_CACHE='", url, "': unexpected '", rest.substr(at),
                    "' after the host (redis://HOST[:PORT][/DB])");
}

void parseUnix(const std::string& url, const std::string& rest, RemoteUrl& out) {
  // rest: /PATH[?db=DB]
  const size_t query = rest.find('?');
  out.socketPath = rest.substr(0, query);
  HOTKERNEL_REQUIRE(!out.socketPath.empty() && out.socketPath[0] == '/', "HOTKERNEL_REMOTE_CACHE='", url,
                    "': the socket path must be absolute (unix:///path/to/redis.sock)");
  HOTKERNEL_REQUIRE(out.socketPath.size() > 1 && out.socketPath.back() != '/', "HOTKERNEL_REMOTE_CACHE='", url,
                    "': the socket path names a directory");
  if (query == std::string::npos) return;
  const std::string q = rest.substr(query + 1);
  HOTKERNEL_REQUIRE(startsWith(q, "db="), "HOTKERNEL_REMOTE_CACHE='", url, "': the only query is ?db=N, not '?",
                    q, "'");
  out.database = decimalIn(url, q.substr(3), 0, RemoteUrl::kMaxDatabase, "database number");
}

}  // namespace

std::string RemoteUrl::toString() const {
  if (transport == Transport::Unix) return std::string(kUnixScheme) + socketPath + "?db=" + std::to_string(database);
  const bool ipv6 = host.find(':') != std::string::npos;
  return std::string(kTcpScheme) + (ipv6 ? "[" + host + "]" : host) + ":" + std::to_string(port) + "/" +
         std::to_string(database);
}

RemoteUrl parseRemoteUrl(const std::string& text) {
  HOTKERNEL_REQUIRE(!text.empty(), "HOTKERNEL_REMOTE_CACHE is empty");
  for (char c : text) {
    const unsigned char u = static_cast<unsigned char>(c);
    HOTKERNEL_REQUIRE(u > 0x20 && u < 0x7f, "HOTKERNEL_REMOTE_CACHE holds a space, a control or a non-ASCII "
                      "character; write redis://HOST[:PORT][/DB] or unix:///PATH[?db=DB]");
  }
  HOTKERNEL_REQUIRE(text.find('%') == std::string::npos, "HOTKERNEL_REMOTE_CACHE='", text,
                    "': percent-escapes are not accepted");
  HOTKERNEL_REQUIRE(text.find('#') == std::string::npos, "HOTKERNEL_REMOTE_CACHE='", text,
                    "': a fragment ('#') is not accepted");
  RemoteUrl out;
  if (startsWith(text, kTcpScheme)) {
    const std::string rest = text.substr(std::string(kTcpScheme).size());
    HOTKERNEL_REQUIRE(rest.find('@') == std::string::npos, "HOTKERNEL_REMOTE_CACHE='", text,
                      "': credentials in the URL are not accepted (they would be readable in the process's "
                      "environment); restrict the Redis to the fleet's network or socket instead");
    HOTKERNEL_REQUIRE(rest.find('?') == std::string::npos, "HOTKERNEL_REMOTE_CACHE='", text,
                      "': redis:// takes no query (redis://HOST[:PORT][/DB])");
    out.transport = RemoteUrl::Transport::Tcp;
    parseTcp(text, rest, out);
    return out;
  }
  if (startsWith(text, kUnixScheme)) {
    out.transport = RemoteUrl::Transport::Unix;
    parseUnix(text, text.substr(std::string(kUnixScheme).size()), out);
    return out;
  }
  HOTKERNEL_REQUIRE(!startsWith(text, "rediss://"), "HOTKERNEL_REMOTE_CACHE='", text,
                    "': TLS (rediss://) is not supported by this build's hiredis; use redis:// on a trusted "
                    "network or unix:///path");
  HOTKERNEL_THROW("HOTKERNEL_REMOTE_CACHE='", text,
                  "' is not redis://HOST[:PORT][/DB] or unix:///PATH[?db=DB]");
}

}  // namespace hotkernel::cache
