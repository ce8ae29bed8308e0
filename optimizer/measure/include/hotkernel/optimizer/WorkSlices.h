#pragma once
// Row slices that bound one uninterruptible unit of the background
// optimizer's GPU work.
//
// Note [Bounded units of background GPU work]
// The background optimizer yields the GPU at its yield points (Note [Optimize
// only on idle GPU time]); it cannot take back work it has enqueued, so the
// yield latency is the GPU time of the longest unit between two yield points.
// A harness check on a large variant was one such unit: candidate, ATen
// reference and a dozen full-tensor float32 passes of the comparison, 5-10 ms
// on [4096, 32000] on an H200 (yield latency p95 7-11 ms). Now every step of
// a check whose cost grows with the tensor (building an input, comparing an
// output, computing a row-local bound) runs in row slices, each followed by a
// synchronisation and preceded by a yield point, and each touching at most
// kSliceTrafficBytes of GPU memory (reads + writes of all its passes, about
// 0.7 ms at 3 TB/s). What stays one unit: one kernel launch of the candidate
// (its NaN-filled buffers and input copy before it, and the checks of them
// after it, are units of their own) or of the ATen reference on the whole
// variant (a kernel cannot be split), and one pair of the benchmark (flush,
// A, flush, B). So the longest unit is about the slower of the two kernels:
// a slow candidate of the search (ten times ATen's time) is the worst case.
//
// The slicing arithmetic is here, without torch, so that it is tested on the CPU.

#include <cstdint>
#include <vector>

namespace hotkernel {

// GPU memory traffic of one slice: reads and writes of all its passes.
constexpr int64_t kSliceTrafficBytes = int64_t{2} << 30;

// Bytes of traffic per element of the harness's steps (estimates, rounded up):
// comparing a 16-bit or float32 output against its reference (two float32
// conversions, NaN and infinity masks and their comparison, nan_to_num,
// difference, abs, max: ~76 bytes), an elementwise bound computed for the
// slice (~40) and checked (~75);
constexpr int64_t kCompareTrafficPerElement = 192;
// building an input (float32 draw or conversion, an arithmetic pass or two,
// the conversion to the input's dtype).
constexpr int64_t kBuildTrafficPerElement = 32;

struct RowSlice {
  int64_t begin = 0;
  int64_t rows = 0;
};

// Rows per slice so that one slice of a [rows, cols] tensor costs at most
// `maxTrafficBytes` at `trafficPerElement` bytes per element; at least one
// row (a row is the smallest slice), at most `rows`. Non-positive sizes: 0.
int64_t rowsPerSlice(int64_t rows, int64_t cols, int64_t trafficPerElement,
                     int64_t maxTrafficBytes = kSliceTrafficBytes);

// [0, rows) cut into consecutive slices of rowsPerSlice rows (the last may be
// shorter), in order, covering every row once. Empty for rows <= 0.
std::vector<RowSlice> rowSlices(int64_t rows, int64_t cols, int64_t trafficPerElement,
                                int64_t maxTrafficBytes = kSliceTrafficBytes);

}  // namespace hotkernel
