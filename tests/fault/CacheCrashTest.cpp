// A writer process killed with SIGKILL at random moments of its puts: the
// store reopens, every put the writer saw return is there and verifies, and
// nothing half-written loads.

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <random>
#include <set>
#include <thread>

#include "FaultTestUtil.h"

namespace hotkernel::cache::fault {
namespace {

// Forks a writer that opens `dir` and puts entryFor("k=<round>;i=<i>", i) for
// i = 0, 1, ... writing i to a pipe after each put returned; kills it `delay`
// after it reported `puts` puts. Returns the indices it reported.
std::vector<int> killWriterAfter(const std::string& dir, int round, int puts, std::chrono::microseconds delay) {
  int fds[2];
  EXPECT_EQ(::pipe(fds), 0);
  pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    try {
      auto store = CacheStore::open(dir);
      for (int i = 0; i < 100000; ++i) {
        store->put(entryFor("k=" + std::to_string(round) + ";i=" + std::to_string(i), i));
        if (::write(fds[1], &i, sizeof i) != sizeof i) ::_exit(3);
      }
    } catch (const std::exception& e) {
      std::fprintf(stderr, "writer: %s\n", e.what());
      ::_exit(2);
    }
    ::_exit(0);
  }
  ::close(fds[1]);
  std::vector<int> reported;
  int i;
  while (static_cast<int>(reported.size()) < puts && ::read(fds[0], &i, sizeof i) == sizeof i) reported.push_back(i);
  std::this_thread::sleep_for(delay);
  ::kill(pid, SIGKILL);
  int status = 0;
  EXPECT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "writer ended on its own, status " << status;
  while (::read(fds[0], &i, sizeof i) == sizeof i) reported.push_back(i);
  ::close(fds[0]);
  return reported;
}

// Every row of the store is exactly the entry its writer meant to put.
void expectEveryRowIntact(CacheStore& store) {
  for (const Entry& meta : store.listMetadata()) {
    int i = std::stoi(meta.variant.substr(meta.variant.find(";i=") + 3));
    std::optional<Entry> got = store.get(meta.fingerprint, meta.op, meta.variant);
    ASSERT_TRUE(got.has_value()) << "row " << meta.variant << " present but does not verify";
    EXPECT_TRUE(sameEntry(*got, entryFor(meta.variant, i))) << meta.variant;
  }
}

TEST(CacheCrashTest, GivenWriterKilledAtRandomMomentsFiftyTimes_WhenStoreReopenedAfterEach_ThenEveryReportedPutLoadsAndNoTornEntry) {
  TempDir tmp;
  const std::string dir = tmp.sub("cache");
  std::random_device seedSource;
  const unsigned seed = seedSource();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  // One round in five kills 0-15 ms after the fork (in open(): creation, schema,
  // WAL switch, commit log, or the first puts); the others after 1-3 puts
  // returned, 0-4 ms into the following ones (a put of these sizes takes about that).
  std::uniform_int_distribution<int> earlyUs(0, 15000), lateUs(0, 4000), puts(1, 3);
  std::map<std::string, int> reported;  // variant -> index
  size_t killedWithPutsReported = 0;
  for (int round = 0; round < 50; ++round) {
    const bool early = round % 5 == 0;
    std::vector<int> got = killWriterAfter(dir, round, early ? 0 : puts(rng),
                                           std::chrono::microseconds(early ? earlyUs(rng) : lateUs(rng)));
    killedWithPutsReported += got.empty() ? 0 : 1;
    for (int i : got) reported["k=" + std::to_string(round) + ";i=" + std::to_string(i)] = i;

    std::unique_ptr<CacheStore> store;
    ASSERT_EQ(errorOf([&] { store = CacheStore::open(dir); }), "") << "round " << round;
    for (const auto& [variant, i] : reported) {
      std::optional<Entry> e = store->get(testFingerprint().key(), kOp, variant);
      ASSERT_TRUE(e.has_value()) << "round " << round << ": reported put " << variant << " is missing";
      EXPECT_TRUE(sameEntry(*e, entryFor(variant, i))) << variant;
    }
    if (round % 10 == 9) {
      expectEveryRowIntact(*store);
      auto reports = store->verifyAll();
      EXPECT_EQ(countStatus(reports, VerifyStatus::Ok), reports.size()) << "round " << round;
    }
  }
  EXPECT_GE(killedWithPutsReported, 40u) << "four rounds in five kill after some puts";
  auto store = CacheStore::open(dir);
  EXPECT_EQ(RawDb(dir).queryText("PRAGMA integrity_check"), "ok");
  EXPECT_GE(store->listMetadata().size(), reported.size());
}

TEST(CacheCrashTest, GivenWriterKilledMidPut_WhenCliStyleReadOnlyOpenFindsItsWal_ThenReportedPutsVisibleAndVerifyClean) {
  TempDir tmp;
  const std::string dir = tmp.sub("cache");
  CacheStore::open(dir);
  std::set<std::string> reported;
  for (int round = 0; round < 8; ++round) {
    for (int i : killWriterAfter(dir, round, 1, std::chrono::milliseconds(round % 3))) {
      reported.insert("k=" + std::to_string(round) + ";i=" + std::to_string(i));
    }
    // The killed writer's -wal and -shm are still there; a read-only open must read through them.
    auto ro = CacheStore::openReadOnly(dir);
    ASSERT_NE(ro, nullptr);
    std::set<std::string> listed;
    for (const Entry& e : ro->listForFingerprint(testFingerprint().key())) listed.insert(e.variant);
    for (const std::string& v : reported) EXPECT_EQ(listed.count(v), 1u) << v;
    auto reports = ro->verifyAll();
    EXPECT_EQ(countStatus(reports, VerifyStatus::Ok), reports.size());
  }
  EXPECT_FALSE(reported.empty());
}

TEST(CacheCrashTest, GivenCommitLogLineTornByKill_WhenLaterCommitsAreLostWithTheWal_ThenTheyAreStillReportedLost) {
  TempDir tmp;
  const std::string live = tmp.sub("live");
  CacheStore::open(live);
  // A writer killed mid-append leaves half a line without its newline.
  std::string log = readFile(live + "/kernels.commits");
  writeFile(live + "/kernels.commits", log + "0123456789abcdef {\"store\":\"x\",\"se");
  std::vector<Entry> walOnly = {entryFor("late=1", 1), entryFor("late=2", 2)};
  test::putWithCommitsOnlyInWal(live, {entryFor("early", 0)}, walOnly, tmp.sub("crash"));
  ::unlink((tmp.sub("crash") + "/kernels.sqlite-wal").c_str());

  auto store = CacheStore::openReadOnly(tmp.sub("crash"));
  ASSERT_NE(store, nullptr);
  auto lost = lostVariants(store->verifyAll());
  EXPECT_EQ(lost.size(), 2u);
  EXPECT_EQ(lost.count("late=1"), 1u);
  EXPECT_EQ(lost.count("late=2"), 1u);
  EXPECT_TRUE(store->get(testFingerprint().key(), kOp, "early").has_value());
}

}  // namespace
}  // namespace hotkernel::cache::fault
