#pragma once
// The background optimizer thread: a de-duplicating queue of variants and one
// worker that runs a job for each.
//
// Note [Background failures are contained]
// A job that throws is logged once and counted; the worker keeps going and
// the variant keeps running the ATen kernel. The thread is started on the
// first enqueue, so processes that never see a hot CUDA variant never start
// it. stop() is called at exit; it waits a bounded time for the job in flight
// and then leaves the (detached) thread to be ended with the process.

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_set>

#include "hotkernel/runtime/PlanTable.h"

namespace hotkernel {

struct OptimizerJob {
  std::string op;
  VariantKey key;
};

class OptimizerWorker {
 public:
  using JobFn = std::function<void(const OptimizerJob&)>;
  explicit OptimizerWorker(JobFn fn);
  ~OptimizerWorker();

  // Queues a job unless the same (op, key) was queued before. Never blocks on the job.
  // Returns true if it was queued now.
  bool enqueue(const OptimizerJob& job);
  // True once no job is queued or running; false if `timeoutSeconds` passed first.
  bool waitIdle(double timeoutSeconds);
  // Stops taking jobs; waits up to `timeoutSeconds` for the one in flight.
  void stop(double timeoutSeconds);

  size_t jobsDone() const;
  size_t jobsFailed() const;

 private:
  struct Shared;
  static void run(std::shared_ptr<Shared> shared);
  std::shared_ptr<Shared> shared_;
};

}  // namespace hotkernel
