// engine::RemoteCache::beforeTuning with a kernel refused in this process
// (Note [Held entries] in interpose/engine/HeldEntries.h): the lookup passes
// over it, the lease is taken, and the tuned entry that replaces it in the
// tier is found by the next lookup. torch-free: RemoteCache.cpp compiled in,
// as in the fleet worker. And stop(): the poller has left the tier when it
// returns, so the object can go.

#include "RemoteCache.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "FleetEntries.h"
#include "RedisServer.h"

namespace hotkernel::cache {
namespace {

using namespace std::chrono_literals;
using fleet::goodEntry;
using fleet::keyOf;
using test::RedisServer;

RemoteTierOptions optionsFor(const RedisServer& redis) {
  RemoteTierOptions o;
  o.url = parseRemoteUrl(redis.unixUrl());
  o.timeout = 200ms;
  o.hotkernelVersion = "0.1.0";
  return o;
}

std::unique_ptr<engine::RemoteCache> remoteCacheFor(const RedisServer& redis) {
  return std::make_unique<engine::RemoteCache>(optionsFor(redis), EntryTrust::none(), 5000ms, 60000ms, 100ms);
}

TEST(RemoteCacheTest, GivenAnEntryRefusedHereWhenTheTierStillHoldsItThenItIsPassedOverAndTheLeaseTaken) {
  HOTKERNEL_SKIP_WITHOUT_REDIS();
  RedisServer redis;
  auto remote = remoteCacheFor(redis);
  const std::string fp = fleet::fleetFingerprint().key();
  const Entry tampered = goodEntry(0, "tampered");
  ASSERT_TRUE(remote->tier().publish(tampered));
  const OptimizerJob job{fleet::kOp, keyOf(0)};

  // Without a refusal the entry is found (and admitted by the engine after its check).
  const engine::RemoteCache::Step plain = remote->beforeTuning(fp, job);
  ASSERT_TRUE(plain.entry.has_value());
  EXPECT_EQ(plain.entry->cubin, tampered.cubin);
  EXPECT_FALSE(plain.lease.has_value());

  // Refused here: passed over, and this process takes the lease to tune the variant.
  auto refused = [&](const Entry& e) { return e.cubin == tampered.cubin; };
  engine::RemoteCache::Step step = remote->beforeTuning(fp, job, refused);
  EXPECT_FALSE(step.entry.has_value());
  EXPECT_FALSE(step.leasedElsewhere);
  ASSERT_TRUE(step.lease.has_value());

  // The tuned entry replaces the refused one for the fleet; the next lookup finds it.
  const Entry tuned = goodEntry(0, "tuned");
  remote->finishTuning(step.lease, &tuned);
  const engine::RemoteCache::Step after = remote->beforeTuning(fp, job, refused);
  ASSERT_TRUE(after.entry.has_value());
  EXPECT_EQ(after.entry->cubin, tuned.cubin);
}

TEST(RemoteCacheTest, GivenAnEntryRefusedHereWhenAnotherProcessHoldsTheLeaseThenTheVariantIsDeferred) {
  HOTKERNEL_SKIP_WITHOUT_REDIS();
  RedisServer redis;
  auto remote = remoteCacheFor(redis);
  RemoteTier other(optionsFor(redis), EntryTrust::none());
  const std::string fp = fleet::fleetFingerprint().key();
  const Entry tampered = goodEntry(1, "tampered");
  ASSERT_TRUE(remote->tier().publish(tampered));
  ASSERT_EQ(other.acquireLease(fp, fleet::kOp, tampered.variant, 5000ms).kind, LeaseAttempt::Kind::Acquired);

  const engine::RemoteCache::Step step = remote->beforeTuning(
      fp, OptimizerJob{fleet::kOp, keyOf(1)}, [&](const Entry& e) { return e.cubin == tampered.cubin; });
  EXPECT_FALSE(step.entry.has_value());
  EXPECT_TRUE(step.leasedElsewhere);
  EXPECT_TRUE(remote->hasDeferred());
}

TEST(RemoteCacheTest, GivenThePollerWaitingOnAStoppedRedisWhenStoppedThenStopReturnsOnlyAfterThePollerLeftTheTier) {
  HOTKERNEL_SKIP_WITHOUT_REDIS();
  RedisServer redis;
  RemoteTierOptions options = optionsFor(redis);
  options.timeout = 5000ms;  // the poller's command waits for Redis, not for its timeout
  auto remote = std::make_unique<engine::RemoteCache>(options, EntryTrust::none(), 5000ms, 60000ms, 20ms);
  std::atomic<int> calls{0};
  remote->watch(
      fleet::fleetFingerprint().key(), [&](const std::string&, const RemoteIndexItem&) { ++calls; },
      [&](const std::string&) {
        ++calls;
        return std::vector<Entry>{};
      });
  std::this_thread::sleep_for(100ms);  // the poller has polled (and renews nothing)

  // Given: Redis stopped, so the poller's next command waits for it.
  redis.pause();
  std::this_thread::sleep_for(200ms);
  std::atomic<int64_t> resumedMs{0};
  std::thread resumer([&] {
    std::this_thread::sleep_for(300ms);
    resumedMs = fleet::steadyMs();
    redis.resume();
  });

  // When: stopped while the poller is inside its command.
  remote->stop();
  const int64_t returnedMs = fleet::steadyMs();
  resumer.join();

  // Then: stop() waited for the poller to leave the tier (Redis answered it), and the object can go at once.
  EXPECT_GE(returnedMs, resumedMs.load()) << "stop() returned while the poller was still in a Redis command";
  const int before = calls.load();
  remote.reset();
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(calls.load(), before) << "a callback ran after stop()";
}

}  // namespace
}  // namespace hotkernel::cache
