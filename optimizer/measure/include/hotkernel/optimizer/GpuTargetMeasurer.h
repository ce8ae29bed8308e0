#pragma once
// The real TargetMeasurer: measures on the GPU with the benchmark method
// (Benchmark.h). The peaks: copy bandwidth from a timed device-to-device copy
// (Note [Copy bandwidth peak]); FLOP/s stays 0 (Note [Memory-bound families
// have no FLOP term] in TargetCost.h). The current time of a target: its ATen
// kernel (called directly, never through the dispatcher, so never through
// hotkernel's own override) on fresh random inputs, L2 flushed before each run.
//
// Note [Copy bandwidth peak]
// A device-to-device copy of two buffers of copyBufferBytes() each (at most
// 1 GiB, within the optimizer's memory cap), timed 15 times with the L2
// flushed before each, median: bandwidth = 2 x bytes / time (each byte is
// read once and written once, as in the families' bytes models). Large
// buffers, because each timed call carries a fixed cost (launch, events,
// ramp) that a small one does not hide: the measured bandwidth still grows
// from 128 MiB to 1 GiB, and a peak measured too low makes a slow ATen kernel
// look near its roofline, so the near-roofline rule (Ranking.h) keeps ATen
// where a kernel would be faster (docs/design/optimizer.md has the
// measurements). The buffers come from and
// go back to the caching allocator, which frees them for the serving process
// when it runs short. No separate read peak is measured (Note [Reads are
// faster than copies]). It is done once per device and process (the timed 1 GiB copies
// take ~0.5 ms each), so it is not persisted. A cap too small for two
// buffers of 2 x L2 plus the flush buffer is an Error (the ranking then
// keeps the arrival order).
//
// Note [Reads are faster than copies]
// A reduction only reads its bytes, so it might seem to need a read peak
// above the copy's. It does not: ATen's sums over the same large buffers read
// at the copy's bandwidth (docs/design/optimizer.md), so the copy's peak
// prices every family's bytes, reads and writes alike; the few percent reads
// gain on larger inputs are what Note [Done near the roofline] (Ranking.h)
// leaves room for.
//
// Runs on the calling thread with relaxed graph-capture mode and the
// benchmark's own stream; calls the yield point before each timed run.

#include <cstdint>
#include <functional>
#include <string>

#include "hotkernel/optimizer/TargetMeasurer.h"

namespace hotkernel {

struct GpuMeasurerOptions {
  int64_t memoryCapBytes = 0;        // GPU memory the measurements may use; 0: a quarter of the device's
  std::function<bool()> yieldPoint;  // before its first GPU work and each run; false: Error "benchmark interrupted"
  int runs = 15;                     // timed runs per measurement (>= 7)
};

class GpuTargetMeasurer : public TargetMeasurer {
 public:
  explicit GpuTargetMeasurer(GpuMeasurerOptions options = {});

  MachinePeaks measurePeaks(int device) override;
  // aten::_softmax and aten::_log_softmax (dim -1, no half-to-float),
  // aten::_fused_rms_norm and aten::native_layer_norm (over the last dim, with
  // the weight / bias the key's flags name); other ops: Error.
  double measureSecondsPerCall(const std::string& op, const VariantKey& key) override;

  // Bytes of each copy buffer (Note [Copy bandwidth peak]): min(1 GiB,
  // (cap - flush) / 2), where flush = 2 x l2Bytes; 0 when that is below 2 x l2Bytes.
  static int64_t copyBufferBytes(int64_t l2Bytes, int64_t memoryCapBytes);

 private:
  int64_t capFor(int device) const;
  GpuMeasurerOptions options_;
};

}  // namespace hotkernel
