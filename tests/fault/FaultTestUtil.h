#pragma once
// Helpers of the fault suite: child processes (crash, privilege drop, file
// size limits), expected entries recomputed from their keys, and checks that
// every entry a store returns is exactly what was written.

#include <gtest/gtest.h>
#include <grp.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "CacheTestUtil.h"
#include "hotkernel/cache/CacheStore.h"
#include "hotkernel/runtime/Check.h"

namespace hotkernel::cache::fault {

using test::kernelEntry;
using test::RawDb;
using test::readFile;
using test::TempDir;
using test::testFingerprint;
using test::writeFile;

inline const std::string kOp = "aten::_softmax";

// Cubin sizes vary with the index so puts span one page or many overflow pages.
inline size_t cubinBytesFor(int i) {
  static const size_t kSizes[] = {300, 5000, 70000, 1200, 260000, 16000};
  return kSizes[i % 6];
}

// The entry a writer puts as its i-th: recomputable by the checker.
inline Entry entryFor(const std::string& variant, int i) {
  return kernelEntry(kOp, variant, testFingerprint(), cubinBytesFor(i));
}

// Runs `body` in a forked child and returns its exit code, or 128 + signal.
inline int runInChild(const std::function<int()>& body) {
  pid_t pid = ::fork();
  if (pid == 0) {
    int rc = 99;
    try {
      rc = body();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "child: uncaught %s\n", e.what());
      rc = 98;
    }
    ::_exit(rc);
  }
  EXPECT_GT(pid, 0);
  int status = 0;
  EXPECT_EQ(::waitpid(pid, &status, 0), pid);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// The message of the hotkernel::Error `f` throws; "" when it does not throw.
inline std::string errorOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

inline bool sameEntry(const Entry& a, const Entry& b) {
  return a.fingerprint == b.fingerprint && a.op == b.op && a.variant == b.variant && a.decision == b.decision &&
         a.family == b.family && a.params == b.params && a.kernelName == b.kernelName && a.cubin == b.cubin &&
         a.metrics == b.metrics;
}

inline size_t countStatus(const std::vector<VerifyReport>& reports, VerifyStatus status) {
  size_t n = 0;
  for (const VerifyReport& r : reports) n += r.status == status ? 1 : 0;
  return n;
}

// The keys (variants) that verify reports as lost.
inline std::map<std::string, std::string> lostVariants(const std::vector<VerifyReport>& reports) {
  std::map<std::string, std::string> out;
  for (const VerifyReport& r : reports) {
    if (r.status == VerifyStatus::Lost && !r.variant.empty()) out[r.variant] = r.detail;
  }
  return out;
}

// Drops root to nobody (65534) in a child; false when that fails.
inline bool becomeNobody() { return ::setgroups(0, nullptr) == 0 && ::setgid(65534) == 0 && ::setuid(65534) == 0; }

}  // namespace hotkernel::cache::fault
