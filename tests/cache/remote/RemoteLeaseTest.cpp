// Leases of the shared tier (Note [Leases: one tuner per variant]): one
// holder at a time, renewal, release, and a holder that dies.

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "RedisServer.h"
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

}  // namespace
}  // namespace hotkernel::cache
