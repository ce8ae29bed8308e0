// A chain variant's memory layout (ChainLayout.h).

#include "hotkernel/chain/ChainLayout.h"

#include <algorithm>
#include <numeric>
#include <set>

#include "hotkernel/runtime/Check.h"
#include "hotkernel/runtime/JsonFields.h"

namespace hotkernel::chain {
namespace {

namespace jf = hotkernel::jsonfield;

std::string join(const std::vector<int64_t>& v, const char* sep) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? sep : "") + std::to_string(v[i]);
  return s;
}

// Dense row strides over `dims`: dim d's is `unit` times the dims after d.
std::vector<int64_t> denseStrides(const std::vector<int64_t>& dims, int64_t unit) {
  std::vector<int64_t> s(dims.size());
  int64_t next = unit;
  for (size_t d = dims.size(); d-- > 0;) {
    s[d] = next;
    next *= dims[d];
  }
  return s;
}

// The strides argument `arg` has in the contiguous layout over `dims`.
std::vector<int64_t> contiguousStrides(const ChainIR& ir, size_t arg, const std::vector<int64_t>& dims, int64_t cols) {
  const Node& n = ir.node(chainTensorArgs(ir)[arg]);
  switch (n.shape) {
    case ShapeClass::Full:
      return denseStrides(dims, extentOf(n, cols));
    case ShapeClass::Column:
      return std::vector<int64_t>(dims.size(), 0);
    default:
      return denseStrides(dims, 1);
  }
}

// Whether the rows of a value of `extent` at `strides` over `dims` never overlap.
bool rowsDisjoint(const std::vector<int64_t>& dims, const std::vector<int64_t>& strides, int64_t extent) {
  std::vector<size_t> order;
  for (size_t d = 0; d < dims.size(); ++d) {
    if (dims[d] == 1) continue;
    if (strides[d] <= 0) return false;
    order.push_back(d);
  }
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return strides[a] < strides[b]; });
  int64_t reach = extent;  // elements one index of the dims so far spans
  for (size_t d : order) {
    if (strides[d] < reach) return false;
    reach = strides[d] * (dims[d] - 1) + reach;
  }
  return true;
}

// Note [Transposed layouts]: "" when the column strides are absent or each argument's is in range, the
// outputs' 1 (checked before the row strides, whose checks assume columns at stride 1).
std::string columnStridesProblem(const ChainIR& ir, const ChainLayout& layout) {
  if (layout.colStrides.empty()) return "";
  const std::vector<int> args = chainTensorArgs(ir);
  if (layout.colStrides.size() != args.size()) {
    return "the layout lists column strides of " + std::to_string(layout.colStrides.size()) +
           " arguments, the chain has " + std::to_string(args.size());
  }
  const size_t inputs = args.size() - ir.outputs().size();
  for (size_t k = 0; k < args.size(); ++k) {
    const int64_t c = layout.colStrides[k];
    const std::string what = "argument " + std::to_string(k) + " (" + describeNode(ir, args[k]) + ")";
    if (c < 1 || c > (int64_t{1} << 48)) return what + " has column stride " + std::to_string(c) + " outside [1, 2^48]";
    if (c != 1 && k >= inputs) {
      return what + " is an output with column stride " + std::to_string(c) + ": a chain writes columns at stride 1";
    }
  }
  return "";
}

// Note [Repeated columns]: "" when the repeats are absent, or each is in range and only a Full input of a layout
// that is not transposed repeats, dividing its extent.
std::string columnRepeatsProblem(const ChainIR& ir, const ChainLayout& layout, int64_t cols) {
  if (layout.colRepeats.empty()) return "";
  const std::vector<int> args = chainTensorArgs(ir);
  if (layout.colRepeats.size() != args.size()) {
    return "the layout lists column repeats of " + std::to_string(layout.colRepeats.size()) +
           " arguments, the chain has " + std::to_string(args.size());
  }
  const size_t inputs = args.size() - ir.outputs().size();
  for (size_t k = 0; k < args.size(); ++k) {
    const int64_t r = layout.colRepeats[k];
    const Node& n = ir.node(args[k]);
    const std::string what = "argument " + std::to_string(k) + " (" + describeNode(ir, args[k]) + ")";
    if (r < 1 || r > (int64_t{1} << 30)) return what + " has column repeat " + std::to_string(r) + " outside [1, 2^30]";
    if (r == 1) continue;
    if (k >= inputs) return what + " is an output with column repeat " + std::to_string(r) + ": a chain writes every column";
    if (n.shape != ShapeClass::Full) return what + " is a " + shapeClassName(n.shape) + " value with column repeat " +
                                           std::to_string(r) + ": only a Full input repeats";
    if (extentOf(n, cols) % r != 0) {
      return what + " has column repeat " + std::to_string(r) + ", which does not divide its extent " +
             std::to_string(extentOf(n, cols));
    }
    if (layout.transposed()) return what + " repeats its columns in a transposed layout";
  }
  return "";
}

// Note [Transposed layouts]: "" when no input's columns are at a stride other than 1, or the chain is a
// transposed copy (a lone cast, its input at stride 1 in the innermost row dim of extent above 1).
std::string transposedCopyProblem(const ChainIR& ir, const ChainLayout& layout) {
  const std::vector<int> args = chainTensorArgs(ir);
  for (size_t k = 0; k < layout.colStrides.size(); ++k) {
    if (layout.colStrides[k] == 1) continue;
    if (!isLoneCast(ir)) {
      return "argument " + std::to_string(k) + " (" + describeNode(ir, args[k]) + ") has its columns at stride " +
             std::to_string(layout.colStrides[k]) + ": only a lone copy (a transpose) reads such a value";
    }
    for (size_t d = layout.rowDims.size(); d-- > 0;) {
      if (layout.rowDims[d] == 1) continue;
      if (layout.strides[0][d] == 1) return "";
      return "a transposed copy's input has stride 1 in its innermost row dim of extent above 1, not " +
             std::to_string(layout.strides[0][d]);
    }
    return "a transposed copy has a row dim of extent above 1";
  }
  return "";
}

}  // namespace

std::vector<int> chainTensorArgs(const ChainIR& ir) {
  std::vector<int> args;
  for (int in : ir.inputs()) {
    if (ir.node(in).shape != ShapeClass::Scalar) args.push_back(in);
  }
  args.insert(args.end(), ir.outputs().begin(), ir.outputs().end());
  return args;
}

bool isLoneCast(const ChainIR& ir) {
  return ir.size() == 2 && ir.node(0).op == OpKind::Input && ir.node(0).shape == ShapeClass::Full &&
         ir.node(1).op == OpKind::Cast && ir.outputs() == std::vector<int>{1};
}

int64_t extentOf(const Node& n, int64_t cols) { return n.cols > 0 ? n.cols : cols; }

std::string chainLayoutProblem(const ChainIR& ir, int64_t rows, int64_t cols, const ChainLayout& layout) {
  if (layout.contiguous()) {
    if (!layout.strides.empty() || !layout.colStrides.empty() || !layout.colRepeats.empty()) {
      return "a contiguous layout lists no strides";
    }
    return "";
  }
  if (layout.rowDims.size() > kMaxRowDims) {
    return "the layout has " + std::to_string(layout.rowDims.size()) + " row dims, at most " +
           std::to_string(kMaxRowDims);
  }
  int64_t product = 1;
  for (int64_t d : layout.rowDims) {
    if (d < 1) return "row dim " + std::to_string(d) + " is below 1";
    if (product > INT64_MAX / d) return "the row dims overflow";
    product *= d;
  }
  if (product != rows) return "the row dims [" + join(layout.rowDims, ", ") + "] hold " + std::to_string(product) +
                              " rows, the variant " + std::to_string(rows);
  const std::vector<int> args = chainTensorArgs(ir);
  if (layout.strides.size() != args.size()) {
    return "the layout lists strides of " + std::to_string(layout.strides.size()) + " arguments, the chain has " +
           std::to_string(args.size());
  }
  const std::string columns = columnStridesProblem(ir, layout);
  if (!columns.empty()) return columns;
  const std::string repeats = columnRepeatsProblem(ir, layout, cols);
  if (!repeats.empty()) return repeats;
  const size_t inputs = args.size() - ir.outputs().size();
  for (size_t k = 0; k < args.size(); ++k) {
    const Node& n = ir.node(args[k]);
    const std::vector<int64_t>& s = layout.strides[k];
    const std::string what = "argument " + std::to_string(k) + " (" + describeNode(ir, args[k]) + ")";
    if (s.size() != layout.rowDims.size()) return what + " has " + std::to_string(s.size()) + " strides";
    for (int64_t v : s) {
      if (v < 0 || v > (int64_t{1} << 48)) return what + " has stride " + std::to_string(v) + " outside [0, 2^48]";
    }
    if (n.shape != ShapeClass::Full && s != contiguousStrides(ir, k, layout.rowDims, cols)) {
      return what + " is a " + shapeClassName(n.shape) + " value: its strides are [" +
             join(contiguousStrides(ir, k, layout.rowDims, cols), ", ") + "], not [" + join(s, ", ") + "]";
    }
    if (k >= inputs && n.shape == ShapeClass::Full && !rowsDisjoint(layout.rowDims, s, extentOf(n, cols))) {
      return what + " is an output whose rows overlap (strides [" + join(s, ", ") + "])";
    }
  }
  return transposedCopyProblem(ir, layout);
}

ChainLayout normalizeLayout(const ChainIR& ir, int64_t rows, int64_t cols, const ChainLayout& layout) {
  const std::string problem = chainLayoutProblem(ir, rows, cols, layout);
  HOTKERNEL_REQUIRE(problem.empty(), "chain layout: ", problem);
  if (layout.contiguous()) return layout;
  ChainLayout out;
  out.strides.resize(layout.strides.size());
  // Note [Transposed layouts]: column strides of 1 everywhere are the normal form's empty list.
  const bool transposed = std::any_of(layout.colStrides.begin(), layout.colStrides.end(), [](int64_t c) { return c != 1; });
  if (transposed) out.colStrides = layout.colStrides;
  // Note [Repeated columns]: repeats of 1 everywhere are the normal form's empty list.
  if (layout.repeated()) out.colRepeats = layout.colRepeats;
  for (size_t d = 0; d < layout.rowDims.size(); ++d) {
    if (layout.rowDims[d] == 1) continue;
    const bool merge = !out.rowDims.empty() && [&] {
      for (size_t k = 0; k < layout.strides.size(); ++k) {
        if (out.strides[k].back() != layout.strides[k][d] * layout.rowDims[d]) return false;
      }
      return true;
    }();
    if (merge) {
      out.rowDims.back() *= layout.rowDims[d];
      for (size_t k = 0; k < layout.strides.size(); ++k) out.strides[k].back() = layout.strides[k][d];
      continue;
    }
    out.rowDims.push_back(layout.rowDims[d]);
    for (size_t k = 0; k < layout.strides.size(); ++k) out.strides[k].push_back(layout.strides[k][d]);
  }
  if (out.rowDims.empty()) {  // one row
    out.rowDims.push_back(1);
    for (size_t k = 0; k < layout.strides.size(); ++k) {
      out.strides[k] = contiguousStrides(ir, k, out.rowDims, cols);
    }
  }
  bool contiguous = out.rowDims.size() == 1 && !transposed && !layout.repeated();
  for (size_t k = 0; k < out.strides.size() && contiguous; ++k) {
    contiguous = out.strides[k] == contiguousStrides(ir, k, out.rowDims, cols);
  }
  return contiguous ? ChainLayout{} : out;
}

std::vector<int64_t> layoutRowDims(const ChainLayout& layout, int64_t rows) {
  return layout.contiguous() ? std::vector<int64_t>{rows} : layout.rowDims;
}

std::vector<int64_t> layoutStrides(const ChainIR& ir, const ChainLayout& layout, size_t arg, int64_t rows,
                                   int64_t cols) {
  HOTKERNEL_CHECK(arg < chainTensorArgs(ir).size(), "no tensor argument ", arg);
  if (layout.contiguous()) return contiguousStrides(ir, arg, {rows}, cols);
  HOTKERNEL_CHECK(arg < layout.strides.size(), "the layout has no strides for argument ", arg);
  return layout.strides[arg];
}

int64_t layoutColStride(const ChainLayout& layout, size_t arg) {
  if (!layout.transposed()) return 1;
  HOTKERNEL_CHECK(arg < layout.colStrides.size(), "the layout has no column stride for argument ", arg);
  return layout.colStrides[arg];
}

int64_t layoutColRepeat(const ChainLayout& layout, size_t arg) {
  if (!layout.repeated()) return 1;
  HOTKERNEL_CHECK(arg < layout.colRepeats.size(), "the layout has no column repeat for argument ", arg);
  return layout.colRepeats[arg];
}

int64_t layoutRowOffset(const std::vector<int64_t>& rowDims, const std::vector<int64_t>& strides, int64_t row) {
  int64_t offset = 0;
  for (size_t d = rowDims.size(); d-- > 0;) {
    offset += (row % rowDims[d]) * strides[d];
    row /= rowDims[d];
  }
  return offset;
}

int64_t layoutSpan(const ChainIR& ir, const ChainLayout& layout, size_t arg, int64_t rows, int64_t cols) {
  const Node& n = ir.node(chainTensorArgs(ir).at(arg));
  const std::vector<int64_t> dims = layoutRowDims(layout, rows);
  const std::vector<int64_t> strides = layoutStrides(ir, layout, arg, rows, cols);
  int64_t last = 0;
  for (size_t d = 0; d < dims.size(); ++d) last += (dims[d] - 1) * strides[d];
  if (n.shape == ShapeClass::Full) {
    return last + (extentOf(n, cols) - 1) / layoutColRepeat(layout, arg) * layoutColStride(layout, arg) + 1;
  }
  return last + (n.shape == ShapeClass::Column ? extentOf(n, cols) : 1);
}

std::string layoutText(const ChainLayout& layout) {
  if (layout.contiguous()) return "";
  std::string text = join(layout.rowDims, "x") + ":";
  for (size_t k = 0; k < layout.strides.size(); ++k) {
    text += (k ? "|" : "") + join(layout.strides[k], ",");
    if (layout.transposed() && k < layout.colStrides.size()) text += "@" + std::to_string(layout.colStrides[k]);
    if (layout.repeated() && k < layout.colRepeats.size()) text += "/" + std::to_string(layout.colRepeats[k]);
  }
  return text;
}

nlohmann::json layoutToJson(const ChainLayout& layout) {
  nlohmann::json j = {{"rowDims", layout.rowDims}, {"strides", layout.strides}};
  if (layout.transposed()) j["colStrides"] = layout.colStrides;
  if (layout.repeated()) j["colRepeats"] = layout.colRepeats;
  return j;
}

ChainLayout layoutFromJson(const nlohmann::json& j, const std::string& where) {
  jf::object(j, where);
  for (auto it = j.begin(); it != j.end(); ++it) {
    HOTKERNEL_REQUIRE(it.key() == "rowDims" || it.key() == "strides" || it.key() == "colStrides" ||
                          it.key() == "colRepeats",
                      where, " has an unknown key \"", it.key(), "\"");
  }
  ChainLayout layout;
  for (const nlohmann::json& v : jf::array(j, "rowDims", where)) {
    HOTKERNEL_REQUIRE(v.is_number_integer(), where, ".rowDims must hold integers, got ", jf::describe(v));
    layout.rowDims.push_back(v.get<int64_t>());
  }
  for (const nlohmann::json& arg : jf::array(j, "strides", where)) {
    HOTKERNEL_REQUIRE(arg.is_array(), where, ".strides must hold arrays, got ", jf::describe(arg));
    std::vector<int64_t> s;
    for (const nlohmann::json& v : arg) {
      HOTKERNEL_REQUIRE(v.is_number_integer(), where, ".strides must hold integers, got ", jf::describe(v));
      s.push_back(v.get<int64_t>());
    }
    layout.strides.push_back(std::move(s));
  }
  if (j.contains("colStrides")) {
    for (const nlohmann::json& v : jf::array(j, "colStrides", where)) {
      HOTKERNEL_REQUIRE(v.is_number_integer(), where, ".colStrides must hold integers, got ", jf::describe(v));
      layout.colStrides.push_back(v.get<int64_t>());
    }
    HOTKERNEL_REQUIRE(!layout.colStrides.empty(), where, ".colStrides is empty: a layout without column strides ",
                      "omits the key");
  }
  if (j.contains("colRepeats")) {
    for (const nlohmann::json& v : jf::array(j, "colRepeats", where)) {
      HOTKERNEL_REQUIRE(v.is_number_integer(), where, ".colRepeats must hold integers, got ", jf::describe(v));
      layout.colRepeats.push_back(v.get<int64_t>());
    }
    HOTKERNEL_REQUIRE(!layout.colRepeats.empty(), where, ".colRepeats is empty: a layout without column repeats ",
                      "omits the key");
  }
  return layout;
}

}  // namespace hotkernel::chain
