#pragma once
// The small arithmetic every family's parameter space and guards use
// (internal to kernels/src).

#include <algorithm>
#include <cstdint>
#include <vector>

#include "hotkernel/kernels/DType.h"

namespace hotkernel::kernels::detail {

inline bool isPowerOfTwo(int64_t x) { return x > 0 && (x & (x - 1)) == 0; }

inline bool contains(const int* begin, const int* end, int x) { return std::find(begin, end, x) != end; }

// The widest vector (in elements) one 16-byte access holds.
inline int maxVec(DType dtype) { return static_cast<int>(16 / elementSize(dtype)); }

inline int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The widest vector (in elements) that divides cols and fits 16 bytes.
inline int widestVec(DType dtype, int64_t cols) {
  int vec = maxVec(dtype);
  while (vec > 1 && cols % vec != 0) vec /= 2;
  return vec;
}

inline bool knownDType(DType dtype) {
  for (DType d : kAllDTypes) {
    if (d == dtype) return true;
  }
  return false;
}

// torch's is_contiguous: sizes of 1 place no constraint on their stride.
inline bool contiguous(const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides) {
  if (sizes.size() != strides.size()) return false;
  int64_t expected = 1;
  for (size_t i = sizes.size(); i-- > 0;) {
    if (sizes[i] == 1) continue;
    if (strides[i] != expected) return false;
    expected *= sizes[i];
  }
  return true;
}

}  // namespace hotkernel::kernels::detail
