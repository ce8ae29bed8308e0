// Note [Cached kernels checked before first use] end to end: a first process
// plants two signed entries in a Redis of its own (a correct softmax kernel
// and a tampered one: log_softmax's cubin under softmax's family and
// parameters, signed with the fleet's key), then a second process
// (remote_entry_gpu_probe: its own engine and cache, the same Redis and key)
// looks both up: the correct one is checked, served and copied into its
// cache; the tampered one is refused, the variant tuned there and its
// decision replaces the tampered entry in Redis.
//
// Own binary (labels gpu and redis): its engine's cache directory stays out
// of the other GPU tests.
#include <gtest/gtest.h>

#include <dirent.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <chrono>
#include <iostream>
#include <thread>

#include <ATen/cuda/CUDAContext.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <string>
#include <vector>

#include "RedisServer.h"
#include "RuntimeGpuTestSupport.h"
#include "SeedKernel.h"
#include "hotkernel/Config.h"
#include "hotkernel/cache/CacheStore.h"
#include "hotkernel/cache/EntryKey.h"
#include "hotkernel/cache/RemoteTier.h"
#include "hotkernel/interpose/Engine.h"
#include "hotkernel/kernels/SoftmaxFamily.h"
#include "hotkernel/kernels/VariantOptions.h"
#include "hotkernel/runtime/Hash.h"

extern char** environ;

namespace hotkernel {
namespace {

using kernels::DType;
using kernels::SoftmaxOp;

const std::string kOp = "aten::_softmax";

const std::string& cacheDir() { return gputest::runtimeCacheDir("hk-remote-entry"); }

TunerOptions seedOptions() {
  TunerOptions o;
  o.memoryCapBytes = int64_t{2} << 30;
  o.yieldPoint = [] { return true; };
  return o;
}

// A kernel entry of `variant` under this device's fingerprint (taken from `like`, an entry of this process).
cache::Entry kernelEntry(const cache::Entry& like, const VariantKey& key, const gputest::SeedKernel& k) {
  cache::Entry e;
  e.fingerprint = like.fingerprint;
  e.fingerprintJson = like.fingerprintJson;
  e.op = kOp;
  e.variant = kernels::variantString(key);
  e.decision = cache::kDecisionKernel;
  e.family = kernels::softmaxDescriptor(SoftmaxOp::Softmax).name;
  e.params = k.params;
  e.kernelName = k.kernelName;
  e.cubin = k.cubin;
  e.metrics = "{}";
  e.createdUnix = static_cast<int64_t>(std::time(nullptr));
  return e;
}

std::string firstLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// What each of `pid`'s threads is waiting in (its name and kernel wait channel), for a probe that hangs.
std::string threadsOf(pid_t pid) {
  const std::string taskDir = "/proc/" + std::to_string(pid) + "/task";
  std::string out;
  if (DIR* d = ::opendir(taskDir.c_str())) {
    while (dirent* e = ::readdir(d)) {
      if (e->d_name[0] == '.') continue;
      const std::string t = taskDir + "/" + e->d_name;
      out += "  thread " + std::string(e->d_name) + " " + firstLine(t + "/comm") + ": waits in " +
             firstLine(t + "/wchan") + ", syscall " + firstLine(t + "/syscall") + "\n";
    }
    ::closedir(d);
  }
  return out;
}

constexpr int kProbeTimedOut = -2;

// Runs the probe with `env` added to this process's environment; its exit status, or kProbeTimedOut
// (the probe killed, its threads' waits printed) when it runs past `deadline`.
int runProbe(const std::vector<std::string>& args, const std::vector<std::string>& env,
             std::chrono::seconds deadline) {
  std::vector<std::string> all;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string kv = *e;
    bool replaced = false;
    for (const std::string& o : env) replaced = replaced || kv.compare(0, o.find('=') + 1, o, 0, o.find('=') + 1) == 0;
    if (!replaced) all.push_back(kv);
  }
  all.insert(all.end(), env.begin(), env.end());
  std::vector<char*> argv, envp;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (const std::string& e : all) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  pid_t pid = 0;
  if (::posix_spawn(&pid, argv[0], nullptr, nullptr, argv.data(), envp.data()) != 0) return -1;
  int status = 0;
  const auto end = std::chrono::steady_clock::now() + deadline;
  for (;;) {
    const pid_t done = ::waitpid(pid, &status, WNOHANG);
    if (done == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (done != 0) {
      std::cerr << "waitpid on the probe failed: " << std::strerror(errno) << "\n";
      return -1;
    }
    if (std::chrono::steady_clock::now() > end) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  std::cerr << "remote_entry_gpu_probe ran past " << deadline.count() << " s; its threads:\n" << threadsOf(pid);
  ::kill(pid, SIGKILL);
  ::waitpid(pid, &status, 0);
  return kProbeTimedOut;
}

TEST(RemoteEntryGpuTest, GivenACorrectAndATamperedSignedEntryInRedisWhenASecondProcessUsesThemThenOnlyTheCorrectIsServed) {
  const std::string ownDir = cacheDir();  // this process's cache, set before anything reads config()
  REQUIRE_CUDA_AND_NVRTC();
  HOTKERNEL_SKIP_WITHOUT_REDIS();
  cache::test::RedisServer redis;
  cache::test::TempDir dir;
  const std::string keyFile = dir.sub("fleet.key");
  {
    std::ofstream k(keyFile, std::ios::binary);
    k << "0123456789abcdef0123456789abcdef-the-fleet-key";
  }
  ASSERT_EQ(::chmod(keyFile.c_str(), 0600), 0);
  const std::string probeDir = dir.sub("probe-cache");
  ASSERT_EQ(::mkdir(probeDir.c_str(), 0700), 0);

  // This device's fingerprint, as its engine records it: a keep-ATen decision of a small variant (decided
  // by the ranking's roofline or the tuner, whichever; only its fingerprint fields are used).
  const VariantKey small{static_cast<int32_t>(DType::Float32), 0, 64, 256};
  std::cerr << "deciding a small variant for this device's fingerprint\n";
  Engine::instance().optimizeVariant(kOp, small, [] { return true; }, gputest::budgetOf(kOp, small, 3.0));
  const std::string fp = Engine::instance().status()["fingerprints"].value("0", std::string());
  const std::optional<cache::Entry> like = cache::CacheStore::open(ownDir)->get(fp, kOp, kernels::variantString(small));
  ASSERT_TRUE(like.has_value()) << "no decision for the small variant in " << ownDir;

  // The entries, signed with the fleet's key: the correct kernel, and log_softmax's under softmax's name.
  const VariantKey good{static_cast<int32_t>(DType::Float32), 0, 512, 1024};
  const VariantKey tampered{static_cast<int32_t>(DType::Float32), 0, 512, 2048};
  const gputest::SeedKernel goodKernel =
      gputest::seedKernel(kernels::softmaxDescriptor(SoftmaxOp::Softmax), good, seedOptions());
  const gputest::SeedKernel wrongKernel =
      gputest::seedKernel(kernels::softmaxDescriptor(SoftmaxOp::LogSoftmax), tampered, seedOptions());
  ASSERT_FALSE(goodKernel.cubin.empty());
  ASSERT_FALSE(wrongKernel.cubin.empty());
  cache::RemoteTierOptions options;
  options.url = cache::parseRemoteUrl(redis.unixUrl());
  options.hotkernelVersion = HOTKERNEL_VERSION;
  cache::RemoteTier tier(options, cache::EntryTrust::fromKeyFile(keyFile, probeDir));
  ASSERT_TRUE(tier.publish(kernelEntry(*like, good, goodKernel)));
  ASSERT_TRUE(tier.publish(kernelEntry(*like, tampered, wrongKernel)));

  std::cerr << "entries planted in Redis; running the probe\n";
  const int rc = runProbe({HOTKERNEL_REMOTE_ENTRY_PROBE, sha256Hex(goodKernel.cubin), sha256Hex(wrongKernel.cubin)},
                          {"HOTKERNEL_CACHE_DIR=" + probeDir, "HOTKERNEL_REMOTE_CACHE=" + redis.unixUrl(),
                           "HOTKERNEL_CACHE_KEY_FILE=" + keyFile, "HOTKERNEL_LOG_LEVEL=info"},
                          std::chrono::seconds(180));
  ASSERT_NE(rc, kProbeTimedOut) << "the probe hung (its threads' waits are above)";
  EXPECT_EQ(rc, 0) << "the probe's expectations are on its stderr above";
}

}  // namespace
}  // namespace hotkernel
