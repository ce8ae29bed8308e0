#pragma once
// A source of GPU activity records: the kernels the device ran and which
// host-side region (an external correlation id) launched each. Behind this
// interface so that the recorder's attribution (GpuTimeLedger.h) is tested
// with a fake on the CPU; the real source is CUPTI's activity API
// (CuptiActivitySource.h).

#include <cstdint>
#include <string>
#include <vector>

namespace hotkernel {

// One kernel as the device ran it.
struct KernelActivity {
  uint32_t correlationId = 0;  // the launching API call's
  uint64_t startNs = 0;
  uint64_t endNs = 0;
};

// The innermost external id pushed on the launching thread when the API call
// `correlationId` ran (0 ids are never pushed).
struct ExternalCorrelation {
  uint32_t correlationId = 0;
  uint64_t externalId = 0;
};

// What a source delivers at once: the records of one buffer, in its order.
struct ActivityBatch {
  std::vector<ExternalCorrelation> correlations;
  std::vector<KernelActivity> kernels;
  uint64_t apiRecords = 0;      // the launching API calls' own records (each correlation precedes one)
  uint64_t droppedRecords = 0;  // records the source lost (its buffers full or refused)
};

// Receives batches on the source's own thread (CUPTI's buffer thread) or
// inside ActivitySource::flush. Must not throw.
class ActivitySink {
 public:
  virtual ~ActivitySink() = default;
  virtual void onBatch(const ActivityBatch& batch) = 0;
};

enum class ActivityStartState {
  Started,        // records flow to the sink
  Unavailable,    // the library is missing or of another version: nothing is recorded
  HeldElsewhere,  // another tool holds it (torch.profiler, Nsight): backed off, nothing is recorded
  Failed,         // it refused for another reason: nothing is recorded
};

struct ActivityStart {
  ActivityStartState state = ActivityStartState::Failed;
  std::string detail;  // one line for the log and the profile; "" when started
};

// "started", "unavailable", "held-elsewhere", "failed": the profile's spelling.
const char* activityStartStateName(ActivityStartState state);

class ActivitySource {
 public:
  virtual ~ActivitySource() = default;
  // Starts delivering to `sink`, which outlives the source. At most once. Never throws.
  virtual ActivityStart start(ActivitySink* sink) = 0;
  // Around one recorded op on the calling thread: the kernels launched between
  // push and pop correlate to `id` (the innermost pushed). Called on serving
  // threads: takes no lock the delivering thread holds. Never throws.
  virtual void pushExternalId(uint64_t id) = 0;
  virtual void popExternalId() = 0;
  // Delivers every completed record to the sink before returning. Never throws.
  virtual void flush() = 0;
  // After start: "" while this source still receives the records, else why
  // not (another client took the activity buffers over since, or handOver).
  // Never throws.
  virtual std::string takenOver() = 0;
  // Another client of the same API is starting in this process (the PyTorch
  // profiler): hands it the records this source holds, so that its own buffers
  // take every record from now on (Note [A later CUPTI client]). The source
  // delivers nothing more; pops of ids pushed before still pop. Never throws.
  virtual void handOver() = 0;
};

}  // namespace hotkernel
