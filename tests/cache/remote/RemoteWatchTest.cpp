// RemoteWatch (Note [Learning of new remote entries: polling]): a poller
// learns of entries other clients publish, of a re-published (changed)
// entry, catches up after an outage, and reads everything again after Redis
// came back empty.

#include <gtest/gtest.h>

#include <chrono>
#include <set>
#include <thread>

#include "RedisServer.h"
#include "hotkernel/cache/RemoteWatch.h"

namespace hotkernel::cache {
namespace {

using namespace std::chrono_literals;
using test::RedisServer;

RemoteTierOptions optionsFor(const RedisServer& redis, std::chrono::milliseconds backoff = 5000ms) {
  RemoteTierOptions o;
  o.url = parseRemoteUrl(redis.unixUrl());
  o.timeout = 200ms;
  o.backoff = backoff;
  o.hotkernelVersion = "0.1.0";
  return o;
}

std::set<std::string> variantsOf(const std::vector<RemoteIndexItem>& items) {
  std::set<std::string> out;
  for (const RemoteIndexItem& i : items) out.insert(i.op + " " + i.variant);
  return out;
}

TEST(RemoteWatchTest, GivenPublishesByAnotherClientWhenPolledThenEachNewEntryIsReportedOnce) {
  HOTKERNEL_SKIP_WITHOUT_REDIS();
  RedisServer redis;
  RemoteTier publisher(optionsFor(redis), EntryTrust::none());
  RemoteTier poller(optionsFor(redis), EntryTrust::none());
  RemoteWatch watch;
  const Entry a = test::kernelEntry("aten::_softmax", "rows=1;cols=8");
  const Entry b = test::keepAtenEntry("aten::_log_softmax", "rows=2;cols=8");
  const std::string fp = a.fingerprint;

  ASSERT_TRUE(watch.changes(poller, fp).has_value());
  EXPECT_TRUE(watch.changes(poller, fp)->empty());
  ASSERT_TRUE(publisher.publish(a));
  EXPECT_EQ(variantsOf(*watch.changes(poller, fp)), std::set<std::string>{"aten::_softmax rows=1;cols=8"});
  EXPECT_TRUE(watch.changes(poller, fp)->empty());
  ASSERT_TRUE(publisher.publish(b));
  EXPECT_EQ(variantsOf(*watch.changes(poller, fp)), std::set<std::string>{"aten::_log_softmax rows=2;cols=8"});

  Entry changed = a;
  changed.params = R"({"block":128,"vec":4})";
  ASSERT_TRUE(publisher.publish(changed));
  const std::vector<RemoteIndexItem> items = *watch.changes(poller, fp);
  ASSERT_EQ(items.size(), 1u);
  EXPECT_EQ(items[0].variant, "rows=1;cols=8");
  EXPECT_EQ(poller.lookup(fp, a.op, a.variant).entry->params, changed.params);
}

TEST(RemoteWatchTest, GivenOutageWhenRedisComesBackEmptyAndIsRefilledThenPollerCatchesUp) {
  HOTKERNEL_SKIP_WITHOUT_REDIS();
  RedisServer redis;
  RemoteTier publisher(optionsFor(redis, 100ms), EntryTrust::none());
  RemoteTier poller(optionsFor(redis, 100ms), EntryTrust::none());
  RemoteWatch watch;
  const Entry a = test::kernelEntry("aten::_softmax", "rows=1;cols=8");
  const Entry b = test::kernelEntry("aten::_softmax", "rows=3;cols=8");
  ASSERT_TRUE(publisher.publish(a));
  ASSERT_TRUE(publisher.publish(b));
  ASSERT_EQ(watch.changes(poller, a.fingerprint)->size(), 2u);

  redis.kill();
  EXPECT_FALSE(watch.changes(poller, a.fingerprint).has_value());
  redis.start();
  std::this_thread::sleep_for(150ms);
  Entry again = a;
  again.metrics = R"({"speedup":1.5})";  // republished with other bytes: a new record digest
  ASSERT_TRUE(publisher.publish(again));

  // The counter went back (1 < 2): everything is read again; `again` is new, b is gone.
  const std::optional<std::vector<RemoteIndexItem>> items = watch.changes(poller, a.fingerprint);
  ASSERT_TRUE(items.has_value());
  EXPECT_EQ(variantsOf(*items), std::set<std::string>{"aten::_softmax rows=1;cols=8"});
  // Note [A tier that came back empty is filled again]: the reset is seen, and b is what the index lacks.
  EXPECT_TRUE(watch.resetSeen(a.fingerprint));
  EXPECT_TRUE(watch.inIndex(a.fingerprint, a.op, a.variant));
  EXPECT_FALSE(watch.inIndex(a.fingerprint, b.op, b.variant));
  EXPECT_TRUE(watch.changes(poller, a.fingerprint)->empty());
  EXPECT_FALSE(watch.resetSeen(a.fingerprint));  // only the call that saw the counter go back
}

}  // namespace
}  // namespace hotkernel::cache
