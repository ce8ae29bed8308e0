#include "hotkernel/optimizer/OptimizerWorker.h"

#include <chrono>
#include <thread>

#include "hotkernel/kernels/VariantOptions.h"
#include "hotkernel/runtime/Check.h"
#include "hotkernel/runtime/Logging.h"

namespace hotkernel {

// State shared with the thread; kept alive by the thread even if the worker
// object is destroyed first.
struct OptimizerWorker::Shared {
  JobFn fn;
  RankFn rank;  // set before the thread starts, then constant
  std::mutex mu;
  std::condition_variable cv;
  // All below guarded by mu.
  std::deque<OptimizerJob> queue;
  std::unordered_set<std::string> seen;  // op + key, ever queued and not released
  bool running = false;                  // a job (or a ranking) is in flight
  bool started = false;                  // thread started
  bool stopping = false;
  bool changed = false;                  // the queue changed since the last ranking
  size_t done = 0;
  size_t failed = 0;
  size_t dropped = 0;
  size_t rankings = 0;
};

std::string jobId(const OptimizerJob& j) {
  if (!j.chain.empty()) return j.op + "|" + std::to_string(j.key.device) + "|" + j.chain;
  return j.op + "|" + std::to_string(j.key.device) + "|" + kernels::variantString(j.key);
}

namespace {

// Note [Ranked queue]: `order` applied to the `ranked` jobs at the head of
// `queue`; jobs enqueued while the ranker ran (after them) keep their place.
// A released job leaves the queue and `seen`: a later enqueue takes it again.
// Precondition: the shared mutex held.
size_t applyOrder(std::deque<OptimizerJob>& queue, std::unordered_set<std::string>& seen, size_t ranked,
                  JobOrder order) {
  std::unordered_set<std::string> inQueue;
  for (size_t i = 0; i < ranked; ++i) inQueue.insert(jobId(queue[i]));
  std::deque<OptimizerJob> next;
  std::unordered_set<std::string> placed;
  size_t dropped = 0;
  for (OptimizerJob& j : order.queue) {
    const std::string id = jobId(j);
    if (inQueue.count(id) && placed.insert(id).second) next.push_back(std::move(j));
  }
  for (const OptimizerJob& j : order.dropped) {
    const std::string id = jobId(j);
    if (inQueue.count(id) && placed.insert(id).second) ++dropped;
  }
  std::unordered_set<std::string> released;
  for (const OptimizerJob& j : order.released) {
    const std::string id = jobId(j);
    if (inQueue.count(id) && placed.insert(id).second) {
      ++dropped;
      released.insert(id);
    }
  }
  for (size_t i = 0; i < queue.size(); ++i) {
    if (!placed.count(jobId(queue[i]))) next.push_back(std::move(queue[i]));  // not ordered, or arrived meanwhile
  }
  queue.swap(next);
  for (const std::string& id : released) seen.erase(id);
  return dropped;
}

}  // namespace

JobOrder orderServingQueue(const std::vector<OptimizerJob>& queued,
                           const std::function<JobOrder(const std::vector<OptimizerJob>&)>& rank,
                           const std::function<bool(const OptimizerJob&)>& taken) {
  std::vector<OptimizerJob> chains, variants, released;
  for (const OptimizerJob& job : queued) {
    if (!job.chain.empty()) {
      chains.push_back(job);
    } else if (taken(job)) {
      released.push_back(job);
    } else {
      variants.push_back(job);
    }
  }
  JobOrder order = variants.empty() ? JobOrder{} : rank(variants);
  order.queue.insert(order.queue.begin(), chains.begin(), chains.end());
  order.released.insert(order.released.end(), released.begin(), released.end());
  return order;
}

OptimizerWorker::OptimizerWorker(JobFn fn) : shared_(std::make_shared<Shared>()) { shared_->fn = std::move(fn); }

void OptimizerWorker::setRanker(RankFn rank) {
  std::lock_guard<std::mutex> guard(shared_->mu);
  HOTKERNEL_CHECK(!shared_->started, "setRanker must be called before the first enqueue");
  shared_->rank = std::move(rank);
}

OptimizerWorker::~OptimizerWorker() { stop(0.0); }

bool OptimizerWorker::enqueue(const OptimizerJob& job) {
  std::lock_guard<std::mutex> guard(shared_->mu);
  if (shared_->stopping) return false;
  if (!shared_->seen.insert(jobId(job)).second) return false;
  shared_->queue.push_back(job);
  shared_->changed = true;
  if (!shared_->started) {
    shared_->started = true;
    std::thread(&OptimizerWorker::run, shared_).detach();
  }
  shared_->cv.notify_all();
  return true;
}

void OptimizerWorker::run(std::shared_ptr<Shared> s) {
  std::unique_lock<std::mutex> lock(s->mu);
  while (true) {
    s->cv.wait(lock, [&] { return s->stopping || !s->queue.empty(); });
    if (s->stopping) break;
    if (s->rank && s->changed) {
      // Note [Ranked queue]: rank outside the lock; new arrivals wait behind the ranked jobs.
      s->changed = false;
      s->running = true;
      const std::vector<OptimizerJob> queued(s->queue.begin(), s->queue.end());
      lock.unlock();
      std::optional<JobOrder> order;
      try {
        order = s->rank(queued);
      } catch (const std::exception& e) {
        HOTKERNEL_LOG_ONCE(Warn, "optimizer-ranking") << "ranking the optimizer's queue failed; "
                                                      << "running it in arrival order: " << e.what();
      } catch (...) {
        HOTKERNEL_LOG_ONCE(Warn, "optimizer-ranking") << "ranking the optimizer's queue failed (unknown error); "
                                                      << "running it in arrival order";
      }
      lock.lock();
      s->running = false;
      ++s->rankings;
      if (s->stopping) break;
      if (order) s->dropped += applyOrder(s->queue, s->seen, queued.size(), std::move(*order));
      s->cv.notify_all();
      if (s->queue.empty()) continue;
    }
    OptimizerJob job = s->queue.front();
    s->queue.pop_front();
    s->running = true;
    lock.unlock();
    bool ok = true;
    try {
      s->fn(job);
    } catch (const std::exception& e) {
      ok = false;
      HOTKERNEL_LOG(Warn) << "optimizing " << job.op << " failed; keeping the ATen kernel: " << e.what();
    } catch (...) {
      ok = false;
      HOTKERNEL_LOG(Warn) << "optimizing " << job.op << " failed with an unknown error; keeping the ATen kernel";
    }
    lock.lock();
    s->running = false;
    s->changed = true;  // re-rank what is left: budgets are re-split, call counts have grown
    ++s->done;
    if (!ok) ++s->failed;
    s->cv.notify_all();
  }
  s->running = false;
  s->cv.notify_all();
}

bool OptimizerWorker::waitIdle(double timeoutSeconds) {
  std::unique_lock<std::mutex> lock(shared_->mu);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeoutSeconds);
  return shared_->cv.wait_until(lock, deadline, [&] { return shared_->queue.empty() && !shared_->running; });
}

void OptimizerWorker::stop(double timeoutSeconds) {
  std::unique_lock<std::mutex> lock(shared_->mu);
  shared_->stopping = true;
  shared_->queue.clear();
  shared_->cv.notify_all();
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeoutSeconds);
  shared_->cv.wait_until(lock, deadline, [&] { return !shared_->running; });
}

bool OptimizerWorker::jobRunning() const {
  std::lock_guard<std::mutex> guard(shared_->mu);
  return shared_->running;
}

size_t OptimizerWorker::jobsQueued() const {
  std::lock_guard<std::mutex> guard(shared_->mu);
  return shared_->queue.size();
}

size_t OptimizerWorker::jobsDone() const {
  std::lock_guard<std::mutex> guard(shared_->mu);
  return shared_->done;
}

size_t OptimizerWorker::jobsFailed() const {
  std::lock_guard<std::mutex> guard(shared_->mu);
  return shared_->failed;
}

size_t OptimizerWorker::jobsDropped() const {
  std::lock_guard<std::mutex> guard(shared_->mu);
  return shared_->dropped;
}

size_t OptimizerWorker::rankings() const {
  std::lock_guard<std::mutex> guard(shared_->mu);
  return shared_->rankings;
}

}  // namespace hotkernel
