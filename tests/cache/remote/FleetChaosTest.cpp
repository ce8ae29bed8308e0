// The fleet under chaos (issue 22): 32 worker processes (FleetWorker.cpp: the
// engine's shared-tier path with a fake tuner and a fake check) share one
// redis-server while the test SIGKILLs lease holders mid-tune, drops every
// connection (CLIENT KILL), restarts Redis empty on the same socket, and
// plants unsigned, wrongly signed and damaged entries. Then: each variant is
// tuned once per lease lifetime, no worker loads a planted entry, no entry is
// lost (all in Redis and in every surviving worker's own cache), and every
// surviving worker serves every variant. Labels `redis` and `fleet`; CPU only.

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "FleetEntries.h"
#include "RedisServer.h"
#include "hotkernel/cache/Bundle.h"
#include "hotkernel/cache/CacheStore.h"
#include "hotkernel/cache/EntryKey.h"
#include "hotkernel/cache/RemoteTier.h"
#include "hotkernel/runtime/Hash.h"

namespace hotkernel::cache {
namespace {

using namespace std::chrono_literals;
using fleet::steadyMs;
using test::RedisServer;

constexpr int kWorkers = 32;
constexpr int kVariants = 12;
constexpr int64_t kTuneMs = 400;
constexpr int64_t kLeaseMs = 1000;
constexpr int64_t kMaxLeaseMs = 30000;
constexpr int64_t kPollMs = 100;
constexpr int kKillsWanted = 3;

struct Event {
  std::string kind;
  int variant = -1;
  std::string token;
  int64_t ms = 0;
  int pid = 0;
};

std::vector<Event> readEvents(const std::string& path) {
  std::vector<Event> out;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string version;
    Event e;
    if (fields >> version >> e.kind >> e.variant >> e.token >> e.ms >> e.pid && version == "v1") out.push_back(e);
  }
  return out;
}

struct WorkerProcess {
  pid_t pid = -1;
  std::string cacheDir, events;
  bool killed = false;
  int64_t killedMs = 0;
};

// A planted entry: `evil` under the variant's key, with an index field and a generation bump (pollers notice).
void plant(RedisServer& redis, int variant, const std::string& bytes, bool withIndex) {
  const std::string fp = fleet::fleetFingerprint().key();
  const std::string field = std::string(fleet::kOp) + "|" + fleet::variantOf(variant);
  if (!withIndex) {
    redis.command({"SET", RemoteTier::redisKey("entry", fp, fleet::kOp, fleet::variantOf(variant)), bytes, "NX"});
    return;
  }
  redis.command({"SET", RemoteTier::redisKey("entry", fp, fleet::kOp, fleet::variantOf(variant)), bytes});
  redis.command({"HSET", RemoteTier::redisKey("index", fp), field, std::string(64, '0')});
  redis.command({"INCR", RemoteTier::redisKey("generation", fp)});
}

std::string bundleOf(const Entry& entry, const EntryKey* key) {
  Entry e = entry;
  e.cubinSha256 = sha256Hex(e.cubin);
  BundleHeader header;
  header.hotkernelVersion = "0.1.0";
  header.createdUnix = e.createdUnix;
  return encodeBundle(header, {e}, key);
}

TEST(FleetChaosTest, GivenThirtyTwoWorkersUnderChaosWhenTheyShareOneRedisThenEachVariantIsTunedOncePerLeaseAndAllServeIt) {
  HOTKERNEL_SKIP_WITHOUT_REDIS();
  RedisServer redis;
  test::TempDir dir;
  const std::string keyFile = dir.sub("fleet.key");
  {
    std::ofstream k(keyFile, std::ios::binary);
    k << "0123456789abcdef0123456789abcdef-the-fleet-key";
  }
  ASSERT_EQ(::chmod(keyFile.c_str(), 0600), 0);
  const EntryKey fleetKey = EntryKey::fromFile(keyFile, dir.sub("w0"));
  const EntryKey otherKey = EntryKey::fromBytes("another key of at least thirty-two bytes, not the fleet's");
  const std::string stopFile = dir.sub("stop");

  // Given: planted entries before anyone tuned (each with an index field, so pollers read them too).
  plant(redis, 0, bundleOf(fleet::goodEntry(0, "evil"), nullptr), true);        // unsigned
  plant(redis, 1, bundleOf(fleet::goodEntry(1, "evil"), &otherKey), true);      // signed with another key
  std::string damaged = bundleOf(fleet::goodEntry(2, "evil"), &fleetKey);
  damaged[damaged.size() / 2] ^= 0x5a;
  plant(redis, 2, damaged, true);                                               // damaged after signing

  // When: 32 workers start, and the chaos runs.
  std::vector<WorkerProcess> workers(kWorkers);
  for (int w = 0; w < kWorkers; ++w) {
    WorkerProcess& p = workers[w];
    p.cacheDir = dir.sub("w" + std::to_string(w));
    p.events = dir.sub("events-" + std::to_string(w) + ".log");
    ::mkdir(p.cacheDir.c_str(), 0700);
    const std::vector<std::string> args = {HOTKERNEL_FLEET_WORKER, redis.unixUrl(), p.cacheDir, keyFile, p.events,
                                           stopFile, std::to_string(kVariants), std::to_string(kTuneMs),
                                           std::to_string(kLeaseMs), std::to_string(kMaxLeaseMs),
                                           std::to_string(kPollMs), std::to_string(w + 1)};
    p.pid = ::fork();
    ASSERT_GE(p.pid, 0);
    if (p.pid == 0) {
      std::vector<char*> argv;
      for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
  }
  const int64_t begin = steadyMs();
  int64_t clientKillMs = 0, downMs = 0, upMs = 0, lastKillMs = 0;
  int kills = 0;
  while (steadyMs() - begin < 4000) {
    const int64_t now = steadyMs();
    // SIGKILL a lease holder mid-tune (a start with a token and no end), one every 300 ms.
    if (kills < kKillsWanted && now - lastKillMs > 300) {
      for (WorkerProcess& p : workers) {
        if (p.killed) continue;
        std::map<std::string, Event> open;
        for (const Event& e : readEvents(p.events)) {
          if (e.kind == "start" && e.token != "-") open[e.token] = e;
          if (e.kind == "publish" || e.kind == "kept") open.erase(e.token);
        }
        if (open.empty() || now - open.begin()->second.ms < 100) continue;
        ::kill(p.pid, SIGKILL);
        ::waitpid(p.pid, nullptr, 0);
        p.killed = true;
        p.killedMs = steadyMs();
        lastKillMs = p.killedMs;
        ++kills;
        break;
      }
    }
    if (clientKillMs == 0 && now - begin > 1200) {
      redis.command({"CLIENT", "KILL", "TYPE", "normal"});
      clientKillMs = steadyMs();
    }
    if (downMs == 0 && now - begin > 1800) {
      downMs = steadyMs();
      redis.kill();
      redis.start();  // empty, the same socket
      upMs = steadyMs();
      plant(redis, 3, bundleOf(fleet::goodEntry(3, "evil"), nullptr), false);  // only if nobody filled it again yet
    }
    std::this_thread::sleep_for(20ms);
  }
  // Every surviving worker serves every variant (bounded wait), then all stop.
  bool allServed = false;
  while (!allServed && steadyMs() - begin < 45000) {
    allServed = true;
    for (const WorkerProcess& p : workers) {
      if (p.killed) continue;
      const std::vector<Event> events = readEvents(p.events);
      allServed = allServed && std::any_of(events.begin(), events.end(),
                                           [](const Event& e) { return e.kind == "served-all"; });
    }
    if (!allServed) std::this_thread::sleep_for(100ms);
  }
  { std::ofstream(stopFile) << "stop\n"; }
  std::map<int, int> exitStatus;
  for (WorkerProcess& p : workers) {
    if (p.killed) continue;
    int status = 0;
    const int64_t waitStart = steadyMs();
    pid_t done = 0;
    while ((done = ::waitpid(p.pid, &status, WNOHANG)) == 0 && steadyMs() - waitStart < 10000) {
      std::this_thread::sleep_for(20ms);
    }
    if (done == 0) {
      ::kill(p.pid, SIGKILL);
      ::waitpid(p.pid, &status, 0);
    }
    exitStatus[p.pid] = done == p.pid && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    if (WIFSIGNALED(status)) {
      ADD_FAILURE() << "worker " << p.pid << (done == 0 ? " did not stop within 10 s" : " was killed by signal ")
                    << (done == 0 ? 0 : WTERMSIG(status)) << "; its events: " << p.events;
    }
  }

  // Then: the chaos happened.
  ASSERT_TRUE(allServed) << "not every surviving worker served every variant within 45 s";
  EXPECT_GE(kills, 1) << "no lease holder was killed mid-tune";
  EXPECT_GT(downMs, 0);

  std::map<int, std::vector<Event>> startsByVariant;  // leased tunings
  std::map<std::string, Event> endByToken;
  std::map<int, const WorkerProcess*> workerByPid;
  std::set<std::string> tokens;
  uint64_t refusals = 0;
  const int64_t end = steadyMs();
  for (const WorkerProcess& p : workers) {
    for (const Event& e : readEvents(p.events)) {
      workerByPid[e.pid] = &p;
      if (e.kind == "start" && e.token != "-") {
        EXPECT_TRUE(tokens.insert(e.token).second) << "lease token " << e.token << " started two tunings";
        startsByVariant[e.variant].push_back(e);
      } else if (e.kind == "start") {
        // A tuning without a lease only while Redis could not be asked (its restart, then the back-off).
        EXPECT_TRUE(e.ms >= downMs && e.ms <= upMs + 3000) << "variant " << e.variant << " tuned without a lease at "
                                                           << e.ms - begin << " ms, Redis down " << downMs - begin
                                                           << ".." << upMs - begin << " ms";
      } else if (e.kind == "publish" || e.kind == "kept") {
        endByToken[e.token] = e;
      } else if (e.kind == "load") {
        // No planted entry is ever loaded: what a worker serves from the tier is the correct entry.
        EXPECT_EQ(e.token, sha256Hex(fleet::goodEntry(e.variant).cubin)) << "variant " << e.variant;
      } else if (e.kind == "refused") {
        ADD_FAILURE() << "the check before first use saw a wrong entry for variant " << e.variant
                      << ": the tier let it through";
      } else if (e.kind == "exit") {
        refusals += std::stoull(e.token);
      }
    }
  }
  EXPECT_GT(refusals, 0u) << "no worker met a planted entry";

  // Each variant tuned once per lease lifetime: a later tuning starts only after the earlier one's lease ended
  // (it finished and released it, its holder was killed and the lease expired, or Redis restarted empty).
  int retakenAfterKill = 0;
  for (auto& [variant, starts] : startsByVariant) {
    std::sort(starts.begin(), starts.end(), [](const Event& a, const Event& b) { return a.ms < b.ms; });
    for (size_t i = 1; i < starts.size(); ++i) {
      const Event& a = starts[i - 1];
      const Event& b = starts[i];
      const auto ended = endByToken.find(a.token);
      const bool finished = ended != endByToken.end() && ended->second.ms <= b.ms;
      const WorkerProcess* holder = workerByPid[a.pid];
      const bool expiredAfterKill = holder != nullptr && holder->killed && b.ms >= holder->killedMs + kLeaseMs / 2;
      const bool restarted = downMs > a.ms && downMs <= b.ms;
      if (expiredAfterKill && !finished && !restarted) ++retakenAfterKill;
      EXPECT_TRUE(finished || expiredAfterKill || restarted)
          << "variant " << variant << " tuned under lease " << b.token << " at " << b.ms - begin
          << " ms while lease " << a.token << " (from " << a.ms - begin << " ms) lived";
    }
  }
  for (int v = 0; v < kVariants; ++v) EXPECT_FALSE(startsByVariant[v].empty()) << "variant " << v << " never tuned";
  EXPECT_GE(retakenAfterKill, 1) << "no killed holder's variant was taken over";

  // No entry lost: every variant is published in Redis (the correct entry, signed) ...
  RemoteTierOptions options;
  options.url = parseRemoteUrl(redis.unixUrl());
  options.timeout = 500ms;
  options.hotkernelVersion = "0.1.0";
  RemoteTier reader(options, EntryTrust::withKey(fleetKey));
  const std::string fp = fleet::fleetFingerprint().key();
  for (int v = 0; v < kVariants; ++v) {
    const RemoteLookup r = reader.lookup(fp, fleet::kOp, fleet::variantOf(v));
    EXPECT_EQ(r.status, RemoteStatus::Found) << "variant " << v << ": " << r.detail;
    if (r.entry) EXPECT_EQ(r.entry->cubin, fleet::goodEntry(v).cubin) << "variant " << v;
  }
  // ... and in every surviving worker's own cache, which it left with status 0.
  for (const WorkerProcess& p : workers) {
    if (p.killed) continue;
    EXPECT_EQ(exitStatus[p.pid], 0) << "worker " << p.pid;
    auto store = CacheStore::open(p.cacheDir, EntryTrust::withKey(fleetKey));
    for (int v = 0; v < kVariants; ++v) {
      const std::optional<Entry> e = store->get(fp, fleet::kOp, fleet::variantOf(v));
      EXPECT_TRUE(e.has_value()) << p.cacheDir << " lacks variant " << v;
      if (e) EXPECT_EQ(e->cubin, fleet::goodEntry(v).cubin) << p.cacheDir << " variant " << v;
    }
  }
  EXPECT_LT(end - begin, 60000);
  size_t leased = 0;
  for (const auto& [variant, starts] : startsByVariant) leased += starts.size();
  std::cout << "fleet: " << kills << " holders killed, " << leased << " leased tunings of " << kVariants
            << " variants, " << retakenAfterKill << " taken over after a kill, " << refusals
            << " planted entries refused, " << (end - begin) << " ms\n";
}

}  // namespace
}  // namespace hotkernel::cache
