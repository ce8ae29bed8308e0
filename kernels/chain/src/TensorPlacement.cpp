// Where a recorded tensor lies against a chain's view (TensorPlacement.h).

#include "TensorPlacement.h"

#include <sstream>
#include <string>

#include "TensorIteratorLayout.h"
#include "hotkernel/runtime/Check.h"

namespace hotkernel::chain::detail {

std::string join(const std::vector<int64_t>& v) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < v.size(); ++i) os << (i ? ", " : "") << v[i];
  os << "]";
  return os.str();
}

int64_t numel(const std::vector<int64_t>& sizes) {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  return n;
}

namespace {

// A Full value's row strides over the view's leading dims: aligned from
// the right, 0 where it broadcasts (size 1 against a larger dim, or no dim).
// A last dim at a stride other than 1 is the input of a transposed copy (Note [Transposed layouts]), which only
// a layout reads (`transposable`).
std::vector<int64_t> fullStrides(const TensorMeta& m, int64_t id, const std::vector<int64_t>& full,
                                 bool contiguous, bool transposable = false) {
  const std::vector<int64_t>& s = m.sizes;
  const size_t nd = full.size();
  HOTKERNEL_REQUIRE(s.back() == 1 || m.strides.back() == 1 || (transposable && m.strides.back() > 1), "value %", id,
                    " has last-dim stride ", m.strides.back(), ": a chain reads rows with stride 1");
  std::vector<int64_t> strides(nd - 1, 0);
  const size_t offset = nd - s.size();
  for (size_t d = 0; d + 1 < nd; ++d) {
    if (d < offset) continue;
    const int64_t size = s[d - offset];
    HOTKERNEL_REQUIRE(size == full[d] || size == 1, "value %", id, " has sizes ", join(s),
                      " that do not broadcast to the chain's ", join(full));
    HOTKERNEL_REQUIRE(m.strides[d - offset] >= 0, "value %", id, " has a negative stride");
    strides[d] = size == 1 ? 0 : m.strides[d - offset];
  }
  if (contiguous) {
    int64_t next = s.back();
    for (size_t d = nd - 1; d-- > 0;) {
      strides[d] = full[d] == 1 ? 0 : next;
      next *= full[d];
    }
  }
  return strides;
}

}  // namespace

Placement placeTensor(const TensorMeta& m, int64_t id, const std::vector<int64_t>& full, bool widthFixed,
                      bool layouts) {
  const std::vector<int64_t>& s = m.sizes;
  HOTKERNEL_REQUIRE(s.size() == m.strides.size(), "value %", id, " has ", s.size(), " sizes and ",
                    m.strides.size(), " strides");
  const bool contiguous = isContiguous(s, m.strides);
  const std::string notContiguous = "value %" + std::to_string(id) + " is not contiguous (sizes " + join(s) +
                                    ", strides " + join(m.strides) + ")";
  const size_t nd = full.size();
  const std::vector<int64_t> leading(full.begin(), full.end() - 1);
  const bool sameLeading = s.size() == nd && std::vector<int64_t>(s.begin(), s.end() - 1) == leading;
  // Row before Full: a [.., 1] value is a keepdim row unless the chain's cols are 1.
  if (sameLeading && s.back() == 1 && full.back() != 1) {
    HOTKERNEL_REQUIRE(contiguous, notContiguous);
    return {ShapeClass::Row, 0, {}};
  }
  if (sameLeading && (s.back() == full.back() || widthFixed) && contiguous) {
    return {ShapeClass::Full, widthFixed ? s.back() : 0, fullStrides(m, id, full, true)};
  }
  if (s == leading && nd >= 2) {
    HOTKERNEL_REQUIRE(contiguous, notContiguous);
    return {ShapeClass::RowFlat, 0, {}};
  }
  if (!s.empty() && s.size() <= nd && numel(s) == s.back() && (s.back() == full.back() || widthFixed)) {
    HOTKERNEL_REQUIRE(contiguous, notContiguous);
    return {ShapeClass::Column, widthFixed ? s.back() : 0, {}};
  }
  if (s.size() <= nd && !s.empty() && (s.back() == full.back() || widthFixed)) {
    HOTKERNEL_REQUIRE(layouts || !sameLeading, notContiguous);
    HOTKERNEL_REQUIRE(layouts, "value %", id, " has sizes ", join(s), " against the chain's ", join(full),
                      ": a broadcast over a middle dim needs a layout (not a chain broadcast)");
    const int64_t colStride = s.back() == 1 ? 1 : m.strides.back();
    return {ShapeClass::Full, widthFixed ? s.back() : 0, fullStrides(m, id, full, false, true), colStride};
  }
  HOTKERNEL_THROW("value %", id, " has sizes ", join(s), " against the chain's ", join(full),
                  ": not full, a [cols] column, a keepdim row or a reduction's [rows]: not a chain broadcast");
}

}  // namespace hotkernel::chain::detail
