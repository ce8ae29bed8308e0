// parseRemoteUrl (Note [Remote cache URL]): the accepted forms, each refusal
// with its reason, and a seeded fuzz run: no input crashes, and every
// accepted URL survives toString and parse unchanged.

#include <gtest/gtest.h>

#include <random>
#include <string>

#include "hotkernel/cache/RemoteUrl.h"
#include "hotkernel/runtime/Check.h"

namespace hotkernel::cache {
namespace {

std::string refusal(const std::string& text) {
  try {
    parseRemoteUrl(text);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(RemoteUrlTest, GivenTcpUrlsWhenParsedThenHostPortAndDatabaseAreRead) {
  RemoteUrl u = parseRemoteUrl("redis://cache.internal:6380/3");
  EXPECT_EQ(u.transport, RemoteUrl::Transport::Tcp);
  EXPECT_EQ(u.host, "cache.internal");
  EXPECT_EQ(u.port, 6380);
  EXPECT_EQ(u.database, 3);

  u = parseRemoteUrl("redis://10.0.0.7");
  EXPECT_EQ(u.host, "10.0.0.7");
  EXPECT_EQ(u.port, RemoteUrl::kDefaultPort);
  EXPECT_EQ(u.database, 0);

  u = parseRemoteUrl("redis://[::1]:7000/");
  EXPECT_EQ(u.host, "::1");
  EXPECT_EQ(u.port, 7000);
  EXPECT_EQ(u.toString(), "redis://[::1]:7000/0");
}

TEST(RemoteUrlTest, GivenUnixUrlsWhenParsedThenSocketPathAndDatabaseAreRead) {
  RemoteUrl u = parseRemoteUrl("unix:///run/redis/redis.sock?db=5");
  EXPECT_EQ(u.transport, RemoteUrl::Transport::Unix);
  EXPECT_EQ(u.socketPath, "/run/redis/redis.sock");
  EXPECT_EQ(u.database, 5);
  EXPECT_EQ(parseRemoteUrl("unix:///tmp/r.sock").database, 0);
  EXPECT_EQ(u.toString(), "unix:///run/redis/redis.sock?db=5");
}

TEST(RemoteUrlTest, GivenMalformedUrlsWhenParsedThenEachIsRefusedWithItsReason) {
  const std::pair<const char*, const char*> cases[] = {
      {"", "empty"},
      {"http://host", "is not redis://"},
      {"rediss://host", "TLS"},
      {"redis://", "host is empty"},
      {"redis://:6379", "host is empty"},
      {"redis://user:secret@host", "credentials"},
      {"redis://host:0", "below 1"},
      {"redis://host:65536", "above 65535"},
      {"redis://host:99999999999999999999999", "above 65535"},
      {"redis://host:-1", "not a decimal number"},
      {"redis://host:80x", "not a decimal number"},
      {"redis://host/1/2", "not a decimal number"},
      {"redis://host/-1", "not a decimal number"},
      {"redis://host/2147483648", "above 2147483647"},
      {"redis://host?db=1", "takes no query"},
      {"redis://host#x", "fragment"},
      {"redis://ho%73t", "percent-escapes"},
      {"redis://host name", "space"},
      {"redis://.host", "not a host name"},
      {"redis://a..b", "not a host name"},
      {"redis://[::1", "closing ']'"},
      {"redis://[]:1", "host is empty"},
      {"redis://[zz::1]", "not an IPv6 address"},
      {"redis://host:", "port is empty"},
      {"unix://relative.sock", "must be absolute"},
      {"unix:///", "names a directory"},
      {"unix:///run/redis/", "names a directory"},
      {"unix:///r.sock?database=1", "only query is ?db=N"},
      {"unix:///r.sock?db=", "database number is empty"},
      {"unix:///r.sock?db=x", "not a decimal number"},
  };
  for (const auto& [text, reason] : cases) {
    const std::string why = refusal(text);
    EXPECT_NE(why.find(reason), std::string::npos) << "'" << text << "' gave: " << why;
  }
}

TEST(RemoteUrlTest, GivenRandomMutationsWhenParsedThenNoneCrashesAndAcceptedOnesRoundTrip) {
  const std::string seeds[] = {"redis://cache-1.example:6379/2", "unix:///run/redis.sock?db=9",
                               "redis://[fe80::1]:1/0", "redis://127.0.0.1"};
  const std::string alphabet = "redis:/unix[]?=@%#.-0123456789abcfxyz: \t\x01\x7f\xff";
  std::mt19937_64 rng(20260522);
  size_t accepted = 0;
  for (int iter = 0; iter < 20000; ++iter) {
    std::string s = seeds[rng() % 4];
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      const size_t pos = s.empty() ? 0 : rng() % (s.size() + 1);
      const char c = alphabet[rng() % alphabet.size()];
      switch (rng() % 3) {
        case 0: s.insert(s.begin() + static_cast<std::ptrdiff_t>(pos), c); break;
        case 1: if (pos < s.size()) s.erase(pos, 1); break;
        default: if (pos < s.size()) s[pos] = c; break;
      }
    }
    std::optional<RemoteUrl> u;
    try {
      u = parseRemoteUrl(s);
    } catch (const Error&) {
      continue;  // refused: fine, as long as it is an Error
    }
    ++accepted;
    const RemoteUrl again = parseRemoteUrl(u->toString());
    EXPECT_EQ(again.toString(), u->toString()) << s;
    EXPECT_EQ(again.host, u->host) << s;
    EXPECT_EQ(again.port, u->port) << s;
    EXPECT_EQ(again.socketPath, u->socketPath) << s;
    EXPECT_EQ(again.database, u->database) << s;
    if (u->transport == RemoteUrl::Transport::Tcp) {
      EXPECT_GE(u->port, 1);
      EXPECT_LE(u->port, 65535);
    }
  }
  EXPECT_GT(accepted, 100u);  // the mutations keep some URLs valid, so the round trip is exercised
}

}  // namespace
}  // namespace hotkernel::cache
