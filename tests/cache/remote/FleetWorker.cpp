// One process of the fleet chaos test (FleetChaosTest.cpp): the engine's
// shared-tier path (engine::RemoteCache: lookup after the own cache, the
// lease before tuning, renewals, polling, deferred variants, the tier filled
// again after a reset) and the own store (CacheStore in its own directory),
// with a fake tuner (sleeps, then produces the one correct entry of the
// variant) and a fake check before first use (the entry's cubin against the
// correct one: the smoke stage and the spot check against ATen stand-in).
// Events go to a log (Note [Fleet event log, v1] in FleetEntries.h).
//
//   hotkernel_fleet_worker URL CACHE_DIR KEY_FILE EVENTS STOP_FILE VARIANTS TUNE_MS LEASE_MS MAX_LEASE_MS POLL_MS SEED

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <deque>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "FleetEntries.h"
#include "RemoteCache.h"
#include "hotkernel/cache/CacheStore.h"
#include "hotkernel/runtime/Hash.h"

namespace hotkernel::cache::fleet {
namespace {

class EventLog {
 public:
  explicit EventLog(const std::string& path) : file_(std::fopen(path.c_str(), "a")) {}
  ~EventLog() {
    if (file_) std::fclose(file_);
  }
  void write(const char* kind, int variant, const std::string& token) {
    std::lock_guard<std::mutex> guard(mu_);
    if (!file_) return;
    std::fprintf(file_, "v1 %s %d %s %lld %d\n", kind, variant, token.empty() ? "-" : token.c_str(),
                 static_cast<long long>(steadyMs()), static_cast<int>(::getpid()));
    std::fflush(file_);
  }

 private:
  std::mutex mu_;
  std::FILE* file_;
};

struct Options {
  std::string url, cacheDir, keyFile, events, stopFile;
  int variants = 0;
  std::chrono::milliseconds tune{0}, lease{0}, maxLease{0}, poll{0};
  unsigned seed = 0;
};

int indexOf(const std::string& variant, int variants) {
  for (int i = 0; i < variants; ++i) {
    if (variantOf(i) == variant) return i;
  }
  return -1;
}

class Worker {
 public:
  explicit Worker(const Options& o)
      : o_(o),
        trust_(EntryTrust::fromKeyFile(o.keyFile, o.cacheDir)),
        store_(CacheStore::open(o.cacheDir, trust_)),
        log_(o.events),
        fp_(fleetFingerprint().key()) {
    RemoteTierOptions options;
    options.url = parseRemoteUrl(o.url);
    options.timeout = std::chrono::milliseconds(200);
    options.backoff = std::chrono::milliseconds(200);
    options.hotkernelVersion = "0.1.0";
    remote_ = std::make_unique<engine::RemoteCache>(options, trust_, o.lease, o.maxLease, o.poll);
  }

  int run() {
    std::vector<int> order(o_.variants);
    for (int i = 0; i < o_.variants; ++i) order[i] = i;
    std::shuffle(order.begin(), order.end(), std::mt19937(o_.seed));
    for (int i : order) queue_.push_back(i);
    // As Engine::watchRemote: published entries become jobs; the own store fills the tier again after a reset.
    remote_->watch(
        fp_,
        [this](const std::string&, const RemoteIndexItem& item) {
          const int i = indexOf(item.variant, o_.variants);
          std::lock_guard<std::mutex> guard(mu_);
          if (i >= 0 && !decided_.count(i)) queue_.push_back(i);
        },
        [this](const std::string& fp) { return store_->listForFingerprint(fp); });
    bool announced = false;
    while (true) {
      std::optional<int> next;
      {
        std::lock_guard<std::mutex> guard(mu_);
        if (!queue_.empty()) {
          next = queue_.front();
          queue_.pop_front();
        }
      }
      if (next) {
        optimizeVariant(*next);
        continue;
      }
      // As Engine::runDeferredRemoteJobs: a deferred variant once its lease is gone.
      if (remote_->hasDeferred()) {
        if (const std::optional<OptimizerJob> job = remote_->nextReadyDeferred(std::chrono::milliseconds(50))) {
          optimizeVariant(indexOf(kernels::variantString(job->key), o_.variants));
        }
      } else {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
      if (!announced && servedAll()) {
        log_.write("served-all", -1, "");
        announced = true;
      }
      if (announced && ::access(o_.stopFile.c_str(), F_OK) == 0) break;
    }
    remote_->stop();
    log_.write("exit", -1, std::to_string(remote_->tier().refusals()));
    return 0;
  }

 private:
  bool servedAll() {
    std::lock_guard<std::mutex> guard(mu_);
    return static_cast<int>(decided_.size()) == o_.variants;
  }

  void decide(int i) {
    std::lock_guard<std::mutex> guard(mu_);
    decided_.insert(i);
  }

  // The fake check before first use: the entry must be the variant's correct one.
  static bool checkBeforeFirstUse(const Entry& e, int i) { return e.cubin == goodEntry(i).cubin; }

  // As Engine::optimizeVariant, the shared tier's part: own store, tier, lease, tune, publish.
  void optimizeVariant(int i) {
    if (i < 0) return;
    {
      std::lock_guard<std::mutex> guard(mu_);
      if (decided_.count(i)) return;
    }
    const std::string variant = variantOf(i);
    if (store_->get(fp_, kOp, variant)) {
      decide(i);
      return;
    }
    OptimizerJob job{kOp, keyOf(i)};
    engine::RemoteCache::Step step = remote_->beforeTuning(fp_, job);
    if (step.entry) {
      if (checkBeforeFirstUse(*step.entry, i)) {
        store_->put(*step.entry);
        decide(i);
        log_.write("load", i, sha256Hex(step.entry->cubin));
        return;
      }
      log_.write("refused", i, sha256Hex(step.entry->cubin));  // then tuned here, as the engine does
    }
    if (step.leasedElsewhere) return;  // deferred: ATen until it is published or the lease is gone
    log_.write("start", i, step.lease ? step.lease->token : "");
    std::this_thread::sleep_for(o_.tune);  // the fake tuner
    const Entry entry = goodEntry(i);
    store_->put(entry);
    decide(i);
    const bool publishable = !step.lease || remote_->leaseIsOurs(*step.lease);
    remote_->finishTuning(step.lease, &entry);
    log_.write(publishable ? "publish" : "kept", i, step.lease ? step.lease->token : "");
  }

  const Options o_;
  EntryTrust trust_;
  std::unique_ptr<CacheStore> store_;
  EventLog log_;
  const std::string fp_;
  std::unique_ptr<engine::RemoteCache> remote_;
  std::mutex mu_;
  // Guarded by mu_.
  std::deque<int> queue_;
  std::set<int> decided_;
};

}  // namespace
}  // namespace hotkernel::cache::fleet

int main(int argc, char** argv) {
  using namespace hotkernel::cache::fleet;
  if (argc != 12) {
    std::fprintf(stderr, "usage: %s URL CACHE_DIR KEY_FILE EVENTS STOP_FILE VARIANTS TUNE_MS LEASE_MS MAX_LEASE_MS "
                 "POLL_MS SEED\n", argv[0]);
    return 2;
  }
  Options o;
  o.url = argv[1];
  o.cacheDir = argv[2];
  o.keyFile = argv[3];
  o.events = argv[4];
  o.stopFile = argv[5];
  o.variants = std::stoi(argv[6]);
  o.tune = std::chrono::milliseconds(std::stoll(argv[7]));
  o.lease = std::chrono::milliseconds(std::stoll(argv[8]));
  o.maxLease = std::chrono::milliseconds(std::stoll(argv[9]));
  o.poll = std::chrono::milliseconds(std::stoll(argv[10]));
  o.seed = static_cast<unsigned>(std::stoul(argv[11]));
  try {
    return Worker(o).run();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fleet worker: %s\n", e.what());
    return 1;
  }
}
