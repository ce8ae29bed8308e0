// Leases of the shared tier (Note [Leases: one tuner per variant]): one
// holder at a time, renewal, release, a holder that dies; the LeaseKeeper's
// renewals and the bound on a lease's lifetime (Note [A lease's lifetime is
// bounded]).

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "RedisServer.h"
#include "hotkernel/cache/LeaseKeeper.h"
#include "hotkernel/cache/RemoteTier.h"

namespace hotkernel::cache {
namespace {

using namespace std::chrono_literals;
using test::RedisServer;

const std::string kFp = "0123456789abcdef";
const std::string kOp = "aten::_softmax";
const std::string kVariant = "dtype=fp16;rows=64;cols=1024";

RemoteTierOptions optionsFor(const RedisServer& redis) {
  RemoteTierOptions o;
  o.url = parseRemoteUrl(redis.unixUrl());
  o.timeout = 200ms;
  o.hotkernelVersion = "0.1.0";
  return o;
}

TEST(RemoteLeaseTest, GivenTwoClientsWhenBothAskForOneVariantThenOnlyOneHoldsIt) {
  HOTKERNEL_SKIP_WITHOUT_REDIS();
  RedisServer redis;
  RemoteTier a(optionsFor(redis), EntryTrust::none());
  RemoteTier b(optionsFor(redis), EntryTrust::none());

  const LeaseAttempt first = a.acquireLease(kFp, kOp, kVariant, 5000ms);
  const LeaseAttempt second = b.acquireLease(kFp, kOp, kVariant, 5000ms);
  const LeaseAttempt otherVariant = b.acquireLease(kFp, kOp, "dtype=fp16;rows=65;cols=1024", 5000ms);

  EXPECT_EQ(first.kind, LeaseAttempt::Kind::Acquired);
  EXPECT_EQ(first.lease.token.size(), 32u);
  EXPECT_EQ(second.kind, LeaseAttempt::Kind::Held);
  EXPECT_GT(second.remainingMs, 4000);
  EXPECT_LE(second.remainingMs, 5000);
  EXPECT_EQ(otherVariant.kind, LeaseAttempt::Kind::Acquired);
}

TEST(RemoteLeaseTest, GivenReleasedLeaseWhenAskedAgainThenAnotherClientGetsIt) {
  HOTKERNEL_SKIP_WITHOUT_REDIS();
  RedisServer redis;
  RemoteTier a(optionsFor(redis), EntryTrust::none());
  RemoteTier b(optionsFor(redis), EntryTrust::none());
  const LeaseAttempt held = a.acquireLease(kFp, kOp, kVariant, 60000ms);
  ASSERT_EQ(held.kind, LeaseAttempt::Kind::Acquired);

  a.releaseLease(held.lease);

  EXPECT_EQ(b.leaseRemainingMs(kFp, kOp, kVariant), 0);
  EXPECT_EQ(b.acquireLease(kFp, kOp, kVariant, 60000ms).kind, LeaseAttempt::Kind::Acquired);
  EXPECT_GT(*a.leaseRemainingMs(kFp, kOp, kVariant), 59000);
}

TEST(RemoteLeaseTest, GivenHolderRenewingWhenTtlPassesThenLeaseStaysHeld) {
  HOTKERNEL_SKIP_WITHOUT_REDIS();
  RedisServer redis;
  RemoteTier a(optionsFor(redis), EntryTrust::none());
  RemoteTier b(optionsFor(redis), EntryTrust::none());
  const LeaseAttempt held = a.acquireLease(kFp, kOp, kVariant, 300ms);
  ASSERT_EQ(held.kind, LeaseAttempt::Kind::Acquired);

  for (int i = 0; i < 6; ++i) {  // 600 ms in all, twice the TTL
    std::this_thread::sleep_for(100ms);
    ASSERT_TRUE(a.renewLease(held.lease, 300ms));
  }

  EXPECT_EQ(b.acquireLease(kFp, kOp, kVariant, 300ms).kind, LeaseAttempt::Kind::Held);
}

TEST(RemoteLeaseTest, GivenExpiredLeaseTakenByAnotherWhenOldHolderRenewsOrReleasesThenNewHolderKeepsIt) {
  HOTKERNEL_SKIP_WITHOUT_REDIS();
  RedisServer redis;
  RemoteTier a(optionsFor(redis), EntryTrust::none());
  RemoteTier b(optionsFor(redis), EntryTrust::none());
  RemoteTier c(optionsFor(redis), EntryTrust::none());
  const LeaseAttempt old = a.acquireLease(kFp, kOp, kVariant, 150ms);
  ASSERT_EQ(old.kind, LeaseAttempt::Kind::Acquired);
  std::this_thread::sleep_for(300ms);
  const LeaseAttempt taken = b.acquireLease(kFp, kOp, kVariant, 60000ms);
  ASSERT_EQ(taken.kind, LeaseAttempt::Kind::Acquired);

  EXPECT_FALSE(a.renewLease(old.lease, 60000ms));  // compare-and-renew: not its token any more
  a.releaseLease(old.lease);                       // compare-and-delete: leaves b's lease alone

  EXPECT_EQ(c.acquireLease(kFp, kOp, kVariant, 60000ms).kind, LeaseAttempt::Kind::Held);
  EXPECT_TRUE(b.renewLease(taken.lease, 60000ms));
}

TEST(RemoteLeaseTest, GivenHolderProcessKilledWhenTtlPassesThenAnotherProcessTakesOver) {
  HOTKERNEL_SKIP_WITHOUT_REDIS();
  RedisServer redis;
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t holder = ::fork();
  ASSERT_GE(holder, 0);
  if (holder == 0) {
    // The holder: takes the lease, renews it as a tuner would, and is killed mid-way.
    RemoteTier mine(optionsFor(redis), EntryTrust::none());
    const LeaseAttempt got = mine.acquireLease(kFp, kOp, kVariant, 400ms);
    const char ok = got.kind == LeaseAttempt::Kind::Acquired ? 'y' : 'n';
    (void)::write(ready[1], &ok, 1);
    while (true) {
      std::this_thread::sleep_for(100ms);
      mine.renewLease(got.lease, 400ms);
    }
  }
  char ok = 0;
  ASSERT_EQ(::read(ready[0], &ok, 1), 1);
  ASSERT_EQ(ok, 'y');
  RemoteTier other(optionsFor(redis), EntryTrust::none());
  std::this_thread::sleep_for(600ms);  // past the TTL, but the holder renews
  EXPECT_EQ(other.acquireLease(kFp, kOp, kVariant, 400ms).kind, LeaseAttempt::Kind::Held);

  ::kill(holder, SIGKILL);
  ::waitpid(holder, nullptr, 0);
  const auto killed = std::chrono::steady_clock::now();
  LeaseAttempt attempt;
  while (std::chrono::steady_clock::now() - killed < 3s) {
    attempt = other.acquireLease(kFp, kOp, kVariant, 400ms);
    if (attempt.kind == LeaseAttempt::Kind::Acquired) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(std::max<int64_t>(attempt.remainingMs, 10)));
  }
  const auto waited = std::chrono::steady_clock::now() - killed;

  EXPECT_EQ(attempt.kind, LeaseAttempt::Kind::Acquired);
  EXPECT_LE(waited, 400ms + 200ms);  // at most one TTL after the last renewal, plus scheduling
  ::close(ready[0]);
  ::close(ready[1]);
}

TEST(RemoteLeaseTest, GivenRedisDownWhenAskedForLeaseThenUnavailableNotHeld) {
  HOTKERNEL_SKIP_WITHOUT_REDIS();
  RedisServer redis;
  RemoteTier a(optionsFor(redis), EntryTrust::none());
  redis.kill();

  const LeaseAttempt attempt = a.acquireLease(kFp, kOp, kVariant, 1000ms);

  EXPECT_EQ(attempt.kind, LeaseAttempt::Kind::Unavailable);
}

// Renews `keeper` every tick until `until` passes.
void renewFor(LeaseKeeper& keeper, std::chrono::milliseconds until) {
  const auto end = std::chrono::steady_clock::now() + until;
  while (std::chrono::steady_clock::now() < end) {
    keeper.renewDue();
    std::this_thread::sleep_for(std::min<std::chrono::milliseconds>(keeper.tick(), 50ms));
  }
}

size_t occurrences(const std::string& text, const std::string& part) {
  size_t n = 0;
  for (size_t p = text.find(part); p != std::string::npos; p = text.find(part, p + 1)) ++n;
  return n;
}

TEST(RemoteLeaseTest, GivenKeeperRenewingWithinMaxLifetimeWhenTtlPassesThenLeaseStaysOursAndFinishReleasesIt) {
  HOTKERNEL_SKIP_WITHOUT_REDIS();
  RedisServer redis;
  RemoteTier a(optionsFor(redis), EntryTrust::none());
  RemoteTier b(optionsFor(redis), EntryTrust::none());
  LeaseKeeper keeper(a, 300ms, 60000ms);
  const LeaseAttempt held = a.acquireLease(kFp, kOp, kVariant, 300ms);
  ASSERT_EQ(held.kind, LeaseAttempt::Kind::Acquired);
  keeper.keep(held.lease);

  renewFor(keeper, 900ms);  // three TTLs

  EXPECT_TRUE(keeper.ours(held.lease));
  EXPECT_EQ(b.acquireLease(kFp, kOp, kVariant, 300ms).kind, LeaseAttempt::Kind::Held);
  EXPECT_TRUE(keeper.finish(held.lease));
  EXPECT_EQ(keeper.kept(), 0u);
  EXPECT_EQ(keeper.givenUp(), 0u);
  EXPECT_EQ(b.acquireLease(kFp, kOp, kVariant, 300ms).kind, LeaseAttempt::Kind::Acquired);
}

TEST(RemoteLeaseTest, GivenHolderRenewingPastMaxLifetimeWhenRenewedThenLeaseIsGivenUpOnceAndAnotherTakesItAtOnce) {
  HOTKERNEL_SKIP_WITHOUT_REDIS();
  RedisServer redis;
  RemoteTier a(optionsFor(redis), EntryTrust::none());
  RemoteTier b(optionsFor(redis), EntryTrust::none());
  // A long TTL: without the bound, nobody else could take the variant for a minute after the last renewal.
  LeaseKeeper keeper(a, 60000ms, 1000ms);
  const LeaseAttempt held = a.acquireLease(kFp, kOp, kVariant, 60000ms);
  ASSERT_EQ(held.kind, LeaseAttempt::Kind::Acquired);
  keeper.keep(held.lease);
  renewFor(keeper, 500ms);
  ASSERT_EQ(b.acquireLease(kFp, kOp, kVariant, 60000ms).kind, LeaseAttempt::Kind::Held);

  ::testing::internal::CaptureStderr();
  const auto start = std::chrono::steady_clock::now();
  size_t gaveUp = 0;
  while (gaveUp == 0 && std::chrono::steady_clock::now() - start < 3s) {
    gaveUp += keeper.renewDue();
    std::this_thread::sleep_for(20ms);
  }
  for (int i = 0; i < 5; ++i) gaveUp += keeper.renewDue();  // a stuck tuner keeps calling: nothing more
  const std::string log = ::testing::internal::GetCapturedStderr();
  const LeaseAttempt taken = b.acquireLease(kFp, kOp, kVariant, 60000ms);

  EXPECT_EQ(gaveUp, 1u);
  EXPECT_EQ(keeper.givenUp(), 1u);
  EXPECT_FALSE(keeper.ours(held.lease));
  EXPECT_EQ(taken.kind, LeaseAttempt::Kind::Acquired);  // released, not left to expire
  EXPECT_EQ(occurrences(log, "HOTKERNEL_REMOTE_LEASE_MAX_MS"), 1u) << log;
  // The stuck holder finishing late: not ours (it must not publish), and the new holder's lease stays.
  EXPECT_FALSE(keeper.finish(held.lease));
  EXPECT_GT(*a.leaseRemainingMs(kFp, kOp, kVariant), 59000);
  EXPECT_FALSE(a.renewLease(held.lease, 60000ms));
}

TEST(RemoteLeaseTest, GivenRedisRestartedEmptyWhenKeeperRenewsThenLeaseIsLostAndTheNewHoldersLeaseIsLeftAlone) {
  HOTKERNEL_SKIP_WITHOUT_REDIS();
  RedisServer redis;
  RemoteTierOptions fast = optionsFor(redis);
  fast.backoff = 100ms;
  RemoteTier a(fast, EntryTrust::none());
  RemoteTier b(fast, EntryTrust::none());
  LeaseKeeper keeper(a, 60000ms, 600000ms);
  const LeaseAttempt held = a.acquireLease(kFp, kOp, kVariant, 60000ms);
  ASSERT_EQ(held.kind, LeaseAttempt::Kind::Acquired);
  keeper.keep(held.lease);

  redis.kill();
  redis.start();  // empty: the lease is gone
  const LeaseAttempt taken = b.acquireLease(kFp, kOp, kVariant, 60000ms);
  ASSERT_EQ(taken.kind, LeaseAttempt::Kind::Acquired);
  const auto start = std::chrono::steady_clock::now();
  while (keeper.lost() == 0 && std::chrono::steady_clock::now() - start < 3s) {
    keeper.renewDue();
    std::this_thread::sleep_for(50ms);
  }

  EXPECT_EQ(keeper.lost(), 1u);
  EXPECT_FALSE(keeper.ours(held.lease));
  EXPECT_FALSE(keeper.finish(held.lease));
  EXPECT_TRUE(b.renewLease(taken.lease, 60000ms));  // b still holds it
}

}  // namespace
}  // namespace hotkernel::cache
