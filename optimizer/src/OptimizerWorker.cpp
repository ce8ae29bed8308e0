#include "hotkernel/optimizer/OptimizerWorker.h"

#include <chrono>
#include <thread>

#include "hotkernel/runtime/Logging.h"

namespace hotkernel {

// State shared with the thread; kept alive by the thread even if the worker
// object is destroyed first.
struct OptimizerWorker::Shared {
  JobFn fn;
  std::mutex mu;
  std::condition_variable cv;
  // All below guarded by mu.
  std::deque<OptimizerJob> queue;
  std::unordered_set<std::string> seen;  // op + key, ever queued
  bool running = false;                  // a job is in flight
  bool started = false;                  // thread started
  bool stopping = false;
  size_t done = 0;
  size_t failed = 0;
};

namespace {
std::string jobId(const OptimizerJob& j) {
  return j.op + "|" + std::to_string(j.key.dtype) + "|" + std::to_string(j.key.device) + "|" +
         std::to_string(j.key.rows) + "|" + std::to_string(j.key.cols);
}
}  // namespace

OptimizerWorker::OptimizerWorker(JobFn fn) : shared_(std::make_shared<Shared>()) { shared_->fn = std::move(fn); }

OptimizerWorker::~OptimizerWorker() { stop(0.0); }

bool OptimizerWorker::enqueue(const OptimizerJob& job) {
  std::lock_guard<std::mutex> guard(shared_->mu);
  if (shared_->stopping) return false;
  if (!shared_->seen.insert(jobId(job)).second) return false;
  shared_->queue.push_back(job);
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

size_t OptimizerWorker::jobsDone() const {
  std::lock_guard<std::mutex> guard(shared_->mu);
  return shared_->done;
}

size_t OptimizerWorker::jobsFailed() const {
  std::lock_guard<std::mutex> guard(shared_->mu);
  return shared_->failed;
}

}  // namespace hotkernel
