#include "hotkernel/optimizer/WorkSlices.h"

#include <algorithm>

namespace hotkernel {

int64_t rowsPerSlice(int64_t rows, int64_t cols, int64_t trafficPerElement, int64_t maxTrafficBytes) {
  if (rows <= 0 || cols <= 0) return 0;
  const int64_t perElement = std::max<int64_t>(trafficPerElement, 1);
  const int64_t budget = std::max<int64_t>(maxTrafficBytes, 1);
  // cols * perElement may overflow for absurd sizes: compare by division.
  if (cols > budget / perElement) return 1;
  const int64_t rowBytes = cols * perElement;
  return std::clamp<int64_t>(budget / rowBytes, 1, rows);
}

std::vector<RowSlice> rowSlices(int64_t rows, int64_t cols, int64_t trafficPerElement, int64_t maxTrafficBytes) {
  std::vector<RowSlice> slices;
  const int64_t step = rowsPerSlice(rows, cols, trafficPerElement, maxTrafficBytes);
  if (step <= 0) return slices;
  slices.reserve(static_cast<size_t>((rows + step - 1) / step));
  for (int64_t b = 0; b < rows; b += step) slices.push_back(RowSlice{b, std::min(step, rows - b)});
  return slices;
}

}  // namespace hotkernel
