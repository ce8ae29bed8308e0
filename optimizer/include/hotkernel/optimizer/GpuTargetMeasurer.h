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
// 128 MiB: the copy is DRAM-bound from a few times the L2 size on, and a few
// hundred MB in all is within the optimizer's memory cap), timed 15 times
// with the L2 flushed before each, median: bandwidth = 2 x bytes / time (each
// byte is read once and written once, as in the families' bytes models). On
// an H200 it reads ~4.2 TB/s; it takes ~10 ms once per device and process,
// so it is not persisted. A cap too small for two buffers of 2 x L2 plus the
// flush buffer is an Error (the ranking then keeps the arrival order).
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

  // Bytes of each copy buffer (Note [Copy bandwidth peak]): min(128 MiB,
  // (cap - flush) / 2), where flush = 2 x l2Bytes; 0 when that is below 2 x l2Bytes.
  static int64_t copyBufferBytes(int64_t l2Bytes, int64_t memoryCapBytes);

 private:
  int64_t capFor(int device) const;
  GpuMeasurerOptions options_;
};

}  // namespace hotkernel
