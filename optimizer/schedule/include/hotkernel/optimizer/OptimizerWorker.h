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
//
// Note [Ranked queue]
// With a ranker (setRanker), the queue is not first-in first-out: before it
// picks the next job, the worker hands the queued jobs to the ranker whenever
// the queue changed since the last ranking (a job arrived or one finished),
// and runs them in the order it returns: largest expected saving first
// (Note [Amdahl ranking] in Ranking.h), each job carrying its ranked target
// (budget share and roofline, Note [Stopping a target's search]). The ranker
// runs on the worker thread, outside the lock, so it may measure on the GPU;
// jobs that arrive meanwhile stay queued and trigger another ranking. Jobs it
// drops (decided, near their roofline) are not run; it has recorded why. A
// queued job it neither orders nor drops keeps its place after the ordered
// ones. A ranker that throws is logged once and the queue stays in arrival
// order. Without a ranker the queue is FIFO.

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_set>
#include <vector>

#include "hotkernel/optimizer/Ranking.h"
#include "hotkernel/runtime/PlanTable.h"

namespace hotkernel {

struct OptimizerJob {
  std::string op;
  VariantKey key;
  // Set by the ranker (Note [Ranked queue]): budget share, roofline, expected
  // saving. Unset: not ranked (no ranker, or it could not measure the target).
  std::optional<RankedTarget> target;
  // A fused chain's job (op "hotkernel::chain"): the key of the chain's
  // pattern (Note [Chain patterns]); `key` then names only its device.
  // Empty for an op's variant.
  std::string chain;
};

// "op|device|variant string" (variantString in PlanFactory.h), "op|device|pattern key" for a
// chain: one job per (op, key) or chain.
std::string jobId(const OptimizerJob& job);

// What one ranking of the queue decided (Note [Ranked queue]).
struct JobOrder {
  std::vector<OptimizerJob> queue;    // to run, in this order
  std::vector<OptimizerJob> dropped;  // not to run (the ranker recorded why)
  // Not to run now, and forgotten: enqueue() takes them again (a variant whose calls fused chains took,
  // queued again if its calls run again: Note [Variants fused chains took] in interpose/engine/EngineRanking.cpp).
  std::vector<OptimizerJob> released;
};

// The serving process's order of a queue (Engine's ranker): chain jobs first, in arrival order (they have no
// ATen target to rank); then `rank`'s order of the op variants, except those `taken` says fused chains took,
// which are released (Note [Variants fused chains took] in interpose/engine/EngineRanking.cpp). `rank` is not
// called when no variant is left.
JobOrder orderServingQueue(const std::vector<OptimizerJob>& queued,
                           const std::function<JobOrder(const std::vector<OptimizerJob>&)>& rank,
                           const std::function<bool(const OptimizerJob&)>& taken);

class OptimizerWorker {
 public:
  using JobFn = std::function<void(const OptimizerJob&)>;
  // Orders the queued jobs (given in queue order); runs on the worker thread.
  using RankFn = std::function<JobOrder(const std::vector<OptimizerJob>& queued)>;
  explicit OptimizerWorker(JobFn fn);
  ~OptimizerWorker();

  // Sets the ranker (Note [Ranked queue]); call before the first enqueue.
  void setRanker(RankFn rank);

  // Queues a job unless the same (op, key) was queued before. Never blocks on the job.
  // Returns true if it was queued now.
  bool enqueue(const OptimizerJob& job);
  // True once no job is queued or running; false if `timeoutSeconds` passed first.
  bool waitIdle(double timeoutSeconds);
  // Stops taking jobs; waits up to `timeoutSeconds` for the one in flight.
  void stop(double timeoutSeconds);

  // Whether a job (or a ranking) is in flight now.
  bool jobRunning() const;
  // Jobs waiting in the queue now.
  size_t jobsQueued() const;
  size_t jobsDone() const;
  size_t jobsFailed() const;
  size_t jobsDropped() const;  // dropped by the ranker (released ones included)
  size_t rankings() const;     // times the ranker ran

 private:
  struct Shared;
  static void run(std::shared_ptr<Shared> shared);
  std::shared_ptr<Shared> shared_;
};

}  // namespace hotkernel
