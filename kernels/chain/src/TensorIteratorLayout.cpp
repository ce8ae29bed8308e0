// Result layouts as ATen allocates them (TensorIteratorLayout.h).

#include "TensorIteratorLayout.h"

#include <algorithm>
#include <numeric>

namespace hotkernel::chain::detail {
namespace {

bool isChannelsLast(const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides) {
  if (sizes.size() != 4) return false;
  int64_t expected = 1;
  for (size_t d : {size_t{1}, size_t{3}, size_t{2}, size_t{0}}) {
    if (sizes[d] == 1) continue;
    if (strides[d] != expected) return false;
    expected *= sizes[d];
  }
  return true;
}

std::vector<int64_t> channelsLastStrides(const std::vector<int64_t>& sizes) {
  std::vector<int64_t> s(4);
  s[1] = 1;
  s[3] = sizes[1];
  s[2] = s[3] * sizes[3];
  s[0] = s[2] * sizes[2];
  return s;
}

}  // namespace

bool isContiguous(const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides) {
  int64_t expected = 1;
  for (size_t d = sizes.size(); d-- > 0;) {
    if (sizes[d] == 1) continue;
    if (strides[d] != expected) return false;
    expected *= sizes[d];
  }
  return true;
}

bool isNonOverlappingAndDense(const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides) {
  const size_t n = sizes.size();
  if (n == 1) return sizes[0] < 2 || strides[0] == 1;
  std::vector<size_t> perm(n);
  std::iota(perm.begin(), perm.end(), size_t{0});
  std::sort(perm.begin(), perm.end(), [&](size_t a, size_t b) {
    if (sizes[a] < 2) return false;
    if (sizes[b] < 2) return true;
    return strides[a] < strides[b];
  });
  int64_t require = 1;
  for (size_t i = 0; i < n; ++i) {
    const int64_t size = sizes[perm[i]];
    if (size < 2) return true;
    if (strides[perm[i]] != require) return false;
    require *= size;
  }
  return true;
}

std::vector<int64_t> contiguousStrides(const std::vector<int64_t>& sizes) {
  std::vector<int64_t> s(sizes.size());
  int64_t next = 1;
  for (size_t d = sizes.size(); d-- > 0;) {
    s[d] = next;
    next *= std::max<int64_t>(sizes[d], 1);
  }
  return s;
}

std::optional<TensorMeta> tensorIteratorResult(const std::vector<const TensorMeta*>& operands) {
  // compute_shape: the broadcast shape; a 0-dim operand makes the shapes unequal.
  std::vector<int64_t> shape;
  bool first = true, same = true, scalars = false, tensors = false;
  for (const TensorMeta* m : operands) {
    const std::vector<int64_t> s = m == nullptr ? std::vector<int64_t>{} : m->sizes;
    (s.empty() ? scalars : tensors) = true;
    if (scalars && tensors) same = false;
    if (first) {
      shape = s;
      first = false;
      continue;
    }
    if (s == shape) continue;
    same = false;
    std::vector<int64_t> out(std::max(shape.size(), s.size()));
    for (size_t i = 0; i < out.size(); ++i) {
      const int64_t a = i < out.size() - shape.size() ? 1 : shape[i - (out.size() - shape.size())];
      const int64_t b = i < out.size() - s.size() ? 1 : s[i - (out.size() - s.size())];
      if (a != b && a != 1 && b != 1) return std::nullopt;
      out[i] = a == 1 ? b : a;
    }
    shape = out;
  }
  TensorMeta result;
  result.sizes = shape;
  const size_t ndim = shape.size();
  // fast_set_up
  if (same) {
    bool contiguous = true, channelsLast = true, dense = true;
    for (const TensorMeta* m : operands) {
      contiguous = contiguous && isContiguous(m->sizes, m->strides);
      channelsLast = channelsLast && isChannelsLast(m->sizes, m->strides);
      dense = dense && isNonOverlappingAndDense(m->sizes, m->strides);
    }
    if (contiguous) {
      result.strides = contiguousStrides(shape);
      return result;
    }
    if (channelsLast) {
      result.strides = channelsLastStrides(shape);
      return result;
    }
    if (dense) {
      bool equal = true;
      for (const TensorMeta* m : operands) equal = equal && m->strides == operands.back()->strides;
      if (equal) {
        result.strides = operands.back()->strides;
        return result;
      }
    }
  }
  // compute_strides: element strides over `shape` (the comparisons are per
  // operand, so bytes and elements order alike), 0 where broadcast.
  std::vector<std::vector<int64_t>> strides;
  for (const TensorMeta* m : operands) {
    std::vector<int64_t> s(ndim, 0);
    if (m != nullptr) {
      const size_t offset = ndim - m->sizes.size();
      for (size_t i = 0; i < m->sizes.size(); ++i) {
        s[offset + i] = m->sizes[i] == 1 && shape[offset + i] != 1 ? 0 : m->strides[i];
      }
    }
    strides.push_back(std::move(s));
  }
  // reorder_dimensions: perm[0] the fastest dim.
  std::vector<size_t> perm(ndim);
  for (size_t i = 0; i < ndim; ++i) perm[i] = ndim - 1 - i;
  auto shouldSwap = [&](size_t dim0, size_t dim1) {
    for (const std::vector<int64_t>& s : strides) {
      const int64_t s0 = s[dim0], s1 = s[dim1];
      if (s0 == 0 || s1 == 0) continue;
      if (s0 < s1) return -1;
      if (s0 > s1) return 1;
      if (shape[dim0] > shape[dim1]) return 1;
    }
    return 0;
  };
  if (ndim > 1) {
    for (size_t i = 1; i < ndim; ++i) {
      size_t dim1 = i;
      for (size_t dim0 = i; dim0-- > 0;) {
        const int c = shouldSwap(perm[dim0], perm[dim1]);
        if (c > 0) {
          std::swap(perm[dim0], perm[dim1]);
          dim1 = dim0;
        } else if (c < 0) {
          break;
        }
      }
    }
  }
  // allocate_or_resize_outputs: dense strides in perm order.
  result.strides.assign(ndim, 0);
  int64_t next = 1;
  for (size_t i = 0; i < ndim; ++i) {
    result.strides[perm[i]] = next;
    next *= shape[perm[i]];
  }
  bool inverted = true;
  for (size_t i = 0; i < ndim; ++i) inverted = inverted && perm[i] == ndim - 1 - i;
  if (inverted) result.strides = contiguousStrides(shape);
  return result;
}

std::vector<int64_t> emptyLikeStrides(const TensorMeta& self) {
  if (isNonOverlappingAndDense(self.sizes, self.strides)) return self.strides;
  // Dense strides in self's own order of dims (empty_like's inferred dense strides sort the dims as
  // TensorIterator does for one operand).
  const std::optional<TensorMeta> dense = tensorIteratorResult({&self});
  return dense ? dense->strides : contiguousStrides(self.sizes);
}

}  // namespace hotkernel::chain::detail
