// RemoteTier against a redis-server of the test's own: the round trip of an
// entry, the checks a lookup makes (digests, the HMAC under a key, the key it
// was asked for), and a Redis that dies or hangs mid-run (Note [A Redis that
// is down is an absent tier]).

#include <gtest/gtest.h>

#include <chrono>

#include "RedisServer.h"
#include "hotkernel/cache/Bundle.h"
#include "hotkernel/cache/RemoteTier.h"
#include "hotkernel/runtime/Hash.h"

namespace hotkernel::cache {
namespace {

using namespace std::chrono_literals;
using test::RedisServer;

const std::string kOp = "aten::_softmax";
const std::string kVariant = "dtype=bf16;rows=4096;cols=32000";

RemoteTierOptions optionsFor(const std::string& url, std::chrono::milliseconds timeout = 200ms,
                             std::chrono::milliseconds backoff = 5000ms) {
  RemoteTierOptions o;
  o.url = parseRemoteUrl(url);
  o.timeout = timeout;
  o.backoff = backoff;
  o.hotkernelVersion = "0.1.0";
  return o;
}

EntryTrust keyTrust(char fill) { return EntryTrust::withKey(EntryKey::fromBytes(std::string(32, fill))); }

TEST(RemoteTierTest, GivenPublishedEntryWhenLookedUpFromAnotherClientThenEveryFieldComesBack) {
  HOTKERNEL_SKIP_WITHOUT_REDIS();
  RedisServer redis;
  RemoteTier writer(optionsFor(redis.unixUrl()), EntryTrust::none());
  RemoteTier reader(optionsFor(redis.unixUrl()), EntryTrust::none());
  const Entry e = test::kernelEntry(kOp, kVariant);

  EXPECT_EQ(reader.lookup(e.fingerprint, kOp, kVariant).status, RemoteStatus::Absent);
  ASSERT_TRUE(writer.publish(e));
  const RemoteLookup r = reader.lookup(e.fingerprint, kOp, kVariant);

  ASSERT_EQ(r.status, RemoteStatus::Found) << r.detail;
  EXPECT_EQ(r.entry->cubin, e.cubin);
  EXPECT_EQ(r.entry->cubinSha256, sha256Hex(e.cubin));
  EXPECT_EQ(r.entry->params, e.params);
  EXPECT_EQ(r.entry->family, e.family);
  EXPECT_EQ(r.entry->kernelName, e.kernelName);
  EXPECT_EQ(r.entry->metrics, e.metrics);
  EXPECT_EQ(r.entry->fingerprintJson, e.fingerprintJson);
  EXPECT_GT(r.entry->createdUnix, 0);
  EXPECT_TRUE(reader.reachable());
  // The stored bytes are a bundle of that one entry (Note [Remote tier layout, v1]).
  const std::string stored = redis.command({"GET", RemoteTier::redisKey("entry", e.fingerprint, kOp, kVariant)});
  EXPECT_EQ(decodeBundle(stored, EntryTrust::none()).entries.size(), 1u);
}

TEST(RemoteTierTest, GivenTcpUrlAndDatabaseWhenPublishedThenOnlyThatDatabaseHoldsIt) {
  HOTKERNEL_SKIP_WITHOUT_REDIS();
  const int port = test::freeLoopbackPort();
  ASSERT_GT(port, 0);
  RedisServer redis(port);
  RemoteTier db2(optionsFor("redis://127.0.0.1:" + std::to_string(port) + "/2"), EntryTrust::none());
  RemoteTier db0(optionsFor("redis://127.0.0.1:" + std::to_string(port)), EntryTrust::none());
  const Entry e = test::keepAtenEntry(kOp, kVariant);

  ASSERT_TRUE(db2.publish(e));

  EXPECT_EQ(db2.lookup(e.fingerprint, kOp, kVariant).status, RemoteStatus::Found);
  EXPECT_EQ(db0.lookup(e.fingerprint, kOp, kVariant).status, RemoteStatus::Absent);
}

TEST(RemoteTierTest, GivenKeyWhenEntryIsUnsignedOrSignedWithAnotherKeyThenLookupRefusesIt) {
  HOTKERNEL_SKIP_WITHOUT_REDIS();
  RedisServer redis;
  const Entry e = test::kernelEntry(kOp, kVariant);
  RemoteTier signedReader(optionsFor(redis.unixUrl()), keyTrust('k'));

  RemoteTier unsignedWriter(optionsFor(redis.unixUrl()), EntryTrust::none());
  ASSERT_TRUE(unsignedWriter.publish(e));
  RemoteLookup r = signedReader.lookup(e.fingerprint, kOp, kVariant);
  EXPECT_EQ(r.status, RemoteStatus::Refused);
  EXPECT_NE(r.detail.find("unsigned"), std::string::npos) << r.detail;

  RemoteTier otherKeyWriter(optionsFor(redis.unixUrl()), keyTrust('x'));
  ASSERT_TRUE(otherKeyWriter.publish(e));
  r = signedReader.lookup(e.fingerprint, kOp, kVariant);
  EXPECT_EQ(r.status, RemoteStatus::Refused);
  EXPECT_NE(r.detail.find("bad signature"), std::string::npos) << r.detail;
  EXPECT_EQ(signedReader.refusals(), 2u);

  RemoteTier sameKeyWriter(optionsFor(redis.unixUrl()), keyTrust('k'));
  ASSERT_TRUE(sameKeyWriter.publish(e));
  EXPECT_EQ(signedReader.lookup(e.fingerprint, kOp, kVariant).status, RemoteStatus::Found);
}

TEST(RemoteTierTest, GivenValidEntryCopiedUnderAnotherVariantsKeyWhenLookedUpThenRefused) {
  HOTKERNEL_SKIP_WITHOUT_REDIS();
  RedisServer redis;
  RemoteTier tier(optionsFor(redis.unixUrl()), keyTrust('k'));
  const Entry e = test::kernelEntry(kOp, kVariant);
  ASSERT_TRUE(tier.publish(e));
  const std::string otherVariant = "dtype=bf16;rows=8;cols=32000";
  const std::string bytes = redis.command({"GET", RemoteTier::redisKey("entry", e.fingerprint, kOp, kVariant)});
  redis.command({"SET", RemoteTier::redisKey("entry", e.fingerprint, kOp, otherVariant), bytes});

  const RemoteLookup r = tier.lookup(e.fingerprint, kOp, otherVariant);

  EXPECT_EQ(r.status, RemoteStatus::Refused);
  EXPECT_NE(r.detail.find("under another key"), std::string::npos) << r.detail;
}

TEST(RemoteTierTest, GivenStoredBytesWithOneFlippedByteWhenLookedUpThenRefusedAsDamaged) {
  HOTKERNEL_SKIP_WITHOUT_REDIS();
  RedisServer redis;
  RemoteTier tier(optionsFor(redis.unixUrl()), EntryTrust::none());
  const Entry e = test::kernelEntry(kOp, kVariant);
  ASSERT_TRUE(tier.publish(e));
  const std::string key = RemoteTier::redisKey("entry", e.fingerprint, kOp, kVariant);
  std::string bytes = redis.command({"GET", key});
  bytes[bytes.size() / 2] ^= 0x10;  // inside the body: the bundle's SHA-256 no longer matches
  redis.command({"SET", key, bytes});

  const RemoteLookup r = tier.lookup(e.fingerprint, kOp, kVariant);

  EXPECT_EQ(r.status, RemoteStatus::Refused);
  EXPECT_NE(r.detail.find("damaged"), std::string::npos) << r.detail;
}

TEST(RemoteTierTest, GivenRedisKilledMidRunWhenLookedUpThenUnavailableWithinTimeoutAndOneLogLine) {
  HOTKERNEL_SKIP_WITHOUT_REDIS();
  RedisServer redis;
  RemoteTier tier(optionsFor(redis.unixUrl(), 150ms, 60000ms), EntryTrust::none());
  const Entry e = test::kernelEntry(kOp, kVariant);
  ASSERT_TRUE(tier.publish(e));

  redis.kill();
  ::testing::internal::CaptureStderr();
  std::vector<RemoteStatus> statuses;
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 20; ++i) statuses.push_back(tier.lookup(e.fingerprint, kOp, kVariant).status);
  const auto elapsed = std::chrono::steady_clock::now() - start;
  EXPECT_FALSE(tier.publish(e));
  EXPECT_FALSE(tier.generation(e.fingerprint).has_value());
  const std::string log = ::testing::internal::GetCapturedStderr();

  for (RemoteStatus s : statuses) EXPECT_EQ(s, RemoteStatus::Unavailable);
  // The first call fails within the timeout; the back-off answers the others without the network.
  EXPECT_LT(elapsed, 1000ms);
  EXPECT_FALSE(tier.reachable());
  size_t lines = 0;
  for (size_t p = log.find("unavailable during"); p != std::string::npos; p = log.find("unavailable during", p + 1)) {
    ++lines;
  }
  EXPECT_EQ(lines, 1u) << log;
  EXPECT_NE(log.find(redis.socketPath()), std::string::npos) << log;
}

TEST(RemoteTierTest, GivenRedisThatHangsWhenLookedUpThenCallReturnsWithinAboutTheTimeout) {
  HOTKERNEL_SKIP_WITHOUT_REDIS();
  RedisServer redis;
  RemoteTier tier(optionsFor(redis.unixUrl(), 100ms, 60000ms), EntryTrust::none());
  const Entry e = test::kernelEntry(kOp, kVariant);
  ASSERT_TRUE(tier.publish(e));

  redis.pause();  // connected, but nothing answers: a partition or a stuck server
  const auto start = std::chrono::steady_clock::now();
  const RemoteLookup r = tier.lookup(e.fingerprint, kOp, kVariant);
  const auto elapsed = std::chrono::steady_clock::now() - start;
  redis.resume();

  EXPECT_EQ(r.status, RemoteStatus::Unavailable);
  EXPECT_LT(elapsed, 600ms);
  EXPECT_GE(elapsed, 90ms);
}

TEST(RemoteTierTest, GivenRedisBackAfterBackoffWhenUsedAgainThenItReconnects) {
  HOTKERNEL_SKIP_WITHOUT_REDIS();
  RedisServer redis;
  RemoteTier tier(optionsFor(redis.unixUrl(), 150ms, 200ms), EntryTrust::none());
  const Entry e = test::kernelEntry(kOp, kVariant);
  ASSERT_TRUE(tier.publish(e));
  redis.kill();
  EXPECT_EQ(tier.lookup(e.fingerprint, kOp, kVariant).status, RemoteStatus::Unavailable);

  redis.start();  // empty: no persistence
  EXPECT_EQ(tier.lookup(e.fingerprint, kOp, kVariant).status, RemoteStatus::Unavailable);  // still in back-off
  std::this_thread::sleep_for(250ms);
  ASSERT_TRUE(tier.publish(e));
  const RemoteStatus after = tier.lookup(e.fingerprint, kOp, kVariant).status;

  EXPECT_EQ(after, RemoteStatus::Found);
  EXPECT_TRUE(tier.reachable());
  EXPECT_TRUE(tier.probe().empty());
}

TEST(RemoteTierTest, GivenNothingListeningWhenProbedThenTheReasonNamesTheConnectFailure) {
  HOTKERNEL_SKIP_WITHOUT_REDIS();
  test::TempDir dir;
  RemoteTier tier(optionsFor("unix://" + dir.sub("absent.sock")), EntryTrust::none());

  const std::string why = tier.probe();

  EXPECT_NE(why.find("cannot connect"), std::string::npos) << why;
  EXPECT_EQ(tier.lookup("fp", kOp, kVariant).status, RemoteStatus::Unavailable);
}

}  // namespace
}  // namespace hotkernel::cache
