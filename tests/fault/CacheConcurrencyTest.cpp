// Many writer processes and reader processes on one cache at once: no put
// lost, no reader ever sees a torn entry, no false loss reported; the commit
// log's appends and compaction under contention.

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <set>
#include <thread>

#include "CommitLog.h"
#include "FaultTestUtil.h"

namespace hotkernel::cache::fault {
namespace {

// Small cubins: the contention, not the bytes, is under test (the crash test writes large ones).
Entry smallEntryFor(const std::string& variant, int i) {
  return kernelEntry(kOp, variant, testFingerprint(), 200 + (i % 7) * 300);
}

// A reader process: loads entries until `doneFile` exists; every entry it
// gets must equal what its writer put. Exit 0, or 1 on a torn/foreign entry.
pid_t startReader(const std::string& dir, const std::string& doneFile, int seed) {
  pid_t pid = ::fork();
  if (pid != 0) return pid;
  int rc = 0;
  try {
    auto store = CacheStore::open(dir);
    unsigned x = static_cast<unsigned>(seed) * 2654435761u + 1;
    size_t seen = 0;
    while (::access(doneFile.c_str(), F_OK) != 0 || seen == 0) {
      x = x * 1664525u + 1013904223u;
      if (x % 4 == 0) {
        for (const Entry& e : store->listForFingerprint(testFingerprint().key())) {
          int i = std::stoi(e.variant.substr(e.variant.find(";i=") + 3));
          if (!sameEntry(e, smallEntryFor(e.variant, i))) rc = 1;
          ++seen;
        }
      } else {
        int w = (x >> 8) % 16, i = (x >> 16) % 200;
        std::string v = "w=" + std::to_string(w) + ";i=" + std::to_string(i);
        if (auto e = store->get(testFingerprint().key(), kOp, v)) {
          if (!sameEntry(*e, smallEntryFor(v, i))) rc = 1;
          ++seen;
        }
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "reader: %s\n", e.what());
    rc = 2;
  }
  ::_exit(rc);
}

TEST(CacheConcurrencyTest, GivenSixteenWritersOfTwoHundredPutsAndReaders_WhenAllFinish_ThenNoEntryLostNoTornReadNoFalseLoss) {
  TempDir tmp;
  const std::string dir = tmp.sub("cache");
  const std::string done = tmp.sub("done");
  CacheStore::open(dir);
  std::vector<pid_t> readers;
  for (int r = 0; r < 3; ++r) readers.push_back(startReader(dir, done, r));
  std::vector<pid_t> writers;
  for (int w = 0; w < 16; ++w) {
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      int rc = 0;
      try {
        auto store = CacheStore::open(dir);
        for (int i = 0; i < 200; ++i) {
          store->put(smallEntryFor("w=" + std::to_string(w) + ";i=" + std::to_string(i), i));
        }
      } catch (const std::exception& e) {
        std::fprintf(stderr, "writer %d: %s\n", w, e.what());
        rc = 1;
      }
      ::_exit(rc);
    }
    writers.push_back(pid);
  }
  for (pid_t pid : writers) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "writer status " << status;
  }
  writeFile(done, "");
  for (pid_t pid : readers) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status)) << "reader died, status " << status;
    EXPECT_EQ(WEXITSTATUS(status), 0) << "1: a reader saw a torn or foreign entry; 2: a read failed";
  }
  auto store = CacheStore::open(dir);
  std::vector<Entry> all = store->listForFingerprint(testFingerprint().key());
  EXPECT_EQ(all.size(), 16u * 200u);
  std::set<std::string> variants;
  for (const Entry& e : all) {
    variants.insert(e.variant);
    int i = std::stoi(e.variant.substr(e.variant.find(";i=") + 3));
    EXPECT_TRUE(sameEntry(e, smallEntryFor(e.variant, i))) << e.variant;
  }
  EXPECT_EQ(variants.size(), 16u * 200u);
  auto reports = store->verifyAll();
  EXPECT_EQ(countStatus(reports, VerifyStatus::Ok), reports.size());
  EXPECT_EQ(countStatus(reports, VerifyStatus::Lost), 0u);
  EXPECT_EQ(RawDb(dir).queryInt("SELECT value FROM meta WHERE key = 'commit_seq'"), 16 * 200);
}

TEST(CacheConcurrencyTest, GivenWritersReplacingTheSameKeys_WhenReadersLoadThem_ThenEveryReadIsOneWholeVersion) {
  TempDir tmp;
  const std::string dir = tmp.sub("cache");
  CacheStore::open(dir);
  // Version v of key k: the cubin and the metrics both carry v, so a mix of two versions is visible.
  auto version = [](int k, int v) {
    Entry e = kernelEntry(kOp, "k=" + std::to_string(k), testFingerprint(), 1000 + 9000 * (v % 3));
    e.cubin[0] = static_cast<char>(v);
    e.metrics = "{\"version\":" + std::to_string(v) + "}";
    return e;
  };
  std::vector<pid_t> pids;
  for (int w = 0; w < 4; ++w) {
    pids.push_back(::fork());
    if (pids.back() == 0) {
      int rc = 0;
      try {
        auto store = CacheStore::open(dir);
        for (int n = 0; n < 60; ++n) store->put(version(n % 5, w * 60 + n % 100));
      } catch (const std::exception&) {
        rc = 1;
      }
      ::_exit(rc);
    }
  }
  for (int r = 0; r < 2; ++r) {
    pids.push_back(::fork());
    if (pids.back() == 0) {
      int rc = 0;
      try {
        auto store = CacheStore::open(dir);
        for (int n = 0; n < 300; ++n) {
          if (auto e = store->get(testFingerprint().key(), kOp, "k=" + std::to_string(n % 5))) {
            int v = std::stoi(e->metrics.substr(11));
            if (!sameEntry(*e, version(n % 5, v))) rc = 1;
          }
        }
      } catch (const std::exception&) {
        rc = 2;
      }
      ::_exit(rc);
    }
  }
  for (pid_t pid : pids) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
  }
  auto reports = CacheStore::open(dir)->verifyAll();
  EXPECT_EQ(reports.size(), 5u);
  EXPECT_EQ(countStatus(reports, VerifyStatus::Ok), 5u);
}

TEST(CacheConcurrencyTest, GivenAppendersWhileTheCommitLogIsCompacted_WhenAllDone_ThenEveryRecordIsThereOnce) {
  TempDir tmp;
  const std::string path = tmp.sub("kernels.commits");
  std::atomic<bool> stop{false};
  std::atomic<int> compactions{0};
  std::thread compactor([&] {
    while (!stop) {
      detail::compactCommitLog(path, [](const detail::CommitRecord&) { return true; });
      compactions++;
    }
  });
  std::vector<std::thread> appenders;
  for (int t = 0; t < 4; ++t) {
    appenders.emplace_back([&, t] {
      for (int i = 0; i < 250; ++i) {
        detail::appendCommitRecords(path, {{"store", t * 1000 + i, "put", "fp", kOp, "v"}});
        if (i % 50 == 49) {
          // Let a compaction in between batches (bounded wait), so that appends and compactions interleave.
          const int seen = compactions.load();
          const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
          while (compactions.load() == seen && std::chrono::steady_clock::now() < until) std::this_thread::yield();
        }
      }
    });
  }
  for (auto& a : appenders) a.join();
  stop = true;
  compactor.join();
  EXPECT_GT(compactions.load(), 1);
  detail::CommitLogContents log = detail::readCommitLog(path);
  ASSERT_TRUE(log.readable) << log.problem;
  EXPECT_EQ(log.damagedLines, 0u);
  std::set<int64_t> seqs;
  for (const auto& r : log.records) EXPECT_TRUE(seqs.insert(r.seq).second) << "duplicate " << r.seq;
  EXPECT_EQ(seqs.size(), 1000u);
}

}  // namespace
}  // namespace hotkernel::cache::fault
