// The chain kernel generator's bodies for chains evaluated per column segment:
// a Cat or an elementwise layout (Note [Chain kernel segments]), folded where
// the Cats cut equal segments (Note [Folded segments]).

#include <functional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "ChainEmitter.h"
#include "CodegenDetail.h"
#include "hotkernel/chain/ChainCodegen.h"
#include "hotkernel/runtime/Check.h"

namespace hotkernel::chain::detail {

// Note [Chain kernel segments]
// A chain with a Cat (or a layout) is evaluated per segment of columns:
// the boundaries are the offsets at which any Cat the outputs reach
// (through other Cats too) switches parts, so within a segment every Cat
// is one part at a fixed shift, and a value is named by its node and the
// shift of the column it is read at (v5 at the column itself, v5s64 64
// columns to the left). A vector of HK_VEC columns never straddles a
// boundary (chainVariantProblem: vec divides every boundary), so each
// thread picks its vector's segment with one comparison chain and runs
// straight-line code there.

// The value of node `o` read `shift` columns to the left, in the current segment.
std::string Emitter::refAt(int o, int64_t shift) const {
  const Node& n = nodes_[static_cast<size_t>(o)];
  const std::string id = std::to_string(o);
  const Scope scope = scopeOf(n.shape);
  if (n.op == OpKind::Constant) return floatLiteral(static_cast<float>(n.scalar));
  if (n.op == OpKind::Cat) {
    const auto [part, at] = detail::catPart(nodes_, o, segLo_ - shift);
    return refAt(part, shift + at);
  }
  const std::string suffix = scope == Scope::Element && shift != 0 ? "s" + std::to_string(shift) : "";
  if (n.op == OpKind::Input) {
    if (scope == Scope::Uniform) return "s" + id;
    if (scope == Scope::Row) return "r" + id + item_;
    if (p_.fold) return "x" + id + "a" + std::to_string(segLo_ - shift) + item_ + "[j]";  // Note [Folded segments]
    return "x" + id + suffix + item_ + "[j]";
  }
  return scope == Scope::Row && rowKernel_ ? "r" + id : "v" + id + suffix;
}

void Emitter::collectAt(const std::vector<int>& targets, std::set<std::pair<int, int64_t>>& computed,
                        std::set<std::pair<int, int64_t>>& inputs) const {
  std::vector<std::pair<int, int64_t>> stack;
  for (int t : targets) stack.emplace_back(t, 0);
  while (!stack.empty()) {
    auto [o, shift] = stack.back();
    stack.pop_back();
    const Node& n = nodes_[static_cast<size_t>(o)];
    const bool element = scopeOf(n.shape) == Scope::Element;
    if (!element) shift = 0;
    if (n.op == OpKind::Input) {
      if (n.shape != ShapeClass::Scalar && element) inputs.insert({o, shift});
      continue;
    }
    if (isLeaf(n) || isReduction(n) || (rowKernel_ && !element)) continue;
    if (n.op == OpKind::Cat) {
      const auto [part, at] = detail::catPart(nodes_, o, segLo_ - shift);
      stack.emplace_back(part, shift + at);
      continue;
    }
    if (computed.insert({o, shift}).second) {
      for (int operand : n.operands) stack.emplace_back(operand, shift);
    }
  }
}

void Emitter::emitLoadsAt(const std::set<std::pair<int, int64_t>>& inputs, const std::string& indent) {
  for (const auto& [o, shift] : inputs) {
    const Node& n = nodes_[static_cast<size_t>(o)];
    const std::string name = "x" + std::to_string(o) + (shift != 0 ? "s" + std::to_string(shift) : "");
    const std::string column = shift != 0 ? "(hk_c - " + std::to_string(shift) + ")" : "hk_c";
    const std::string base = n.shape == ShapeClass::Full ? "hk_o" + std::to_string(argOfInput(o)) + " + " : "";
    const std::string call = std::string("hk_load_") + accessTag(n.dtype) + "(in" + std::to_string(o) + " + " + base;
    emitVectorLoad(indent, name, call + column);
  }
}

void Emitter::segments(const std::vector<int>& targets, const std::string& indent,
                       const std::function<std::string()>& inner) {
  std::vector<int64_t> starts = {0};
  const std::vector<int64_t> cuts = chainCatBoundaries(ir_);  // of the outputs: the targets of every pass
  starts.insert(starts.end(), cuts.begin(), cuts.end());
  // Note [Unrolled elementwise chains]: a segment's loads are its own (checkChainKernel).
  HOTKERNEL_INTERNAL_ASSERT(!gather_ || starts.size() == 1, "gathered loads of a chain with Cat segments");
  for (size_t k = 0; k < starts.size(); ++k) {
    segLo_ = starts[k];
    std::set<std::pair<int, int64_t>> computed, inputs;
    collectAt(targets, computed, inputs);
    if (starts.size() > 1) {
      os_ << indent << (k == 0 ? "" : "} else ");
      if (k + 1 < starts.size()) {
        os_ << "if (hk_c < " << starts[k + 1] << ") {\n";
      } else {
        os_ << "{\n";
      }
    } else {
      os_ << indent << "{\n";
    }
    emitLoadsAt(inputs, indent + "  ");
    os_ << "#pragma unroll\n" << indent << "  for (int j = 0; j < HK_VEC; ++j) {\n";
    for (const auto& [o, shift] : computed) {
      refShift_ = shift;
      os_ << indent << "    const float v" << o << (shift != 0 ? "s" + std::to_string(shift) : "") << " = "
          << expr(o) << ";\n";
    }
    refShift_ = 0;
    os_ << inner() << indent << "  }\n";
  }
  os_ << indent << "}\n";
  segLo_ = 0;
}

// The vector hk_v of `perRow` a row: the row, the vector's first column
// `column`, the row offsets and the Row inputs.
void Emitter::vectorPosition(const char* perRow, const char* column) {
  os_ << "    const long long row = hk_v / " << perRow << ";\n"
      << "    const int " << column << " = static_cast<int>(hk_v - row * " << perRow << ") * HK_VEC;\n";
  rowOffsets("row", "    ");
  positionEnd();
  for (int in : ir_.inputs()) {
    const Node& n = nodes_[static_cast<size_t>(in)];
    if (scopeOf(n.shape) != Scope::Row) continue;
    const std::string id = std::to_string(in);
    emitScalarLoad("    ", "r" + id, std::string("hk_ld_") + accessTag(n.dtype) + "(in" + id + " + row)");
  }
}

// Note [Folded segments]
// Where the Cats cut every row into equal segments of w columns (rotary's
// rotate_half: two halves), the segmented kernel branches per vector on its
// segment, and a warp holding vectors of both halves runs both branches one
// after the other. A folded kernel (ChainKernelParams::fold) gives each
// thread one vector position hk_p in [0, w) of one row and evaluates every
// segment there, at columns hk_p, hk_p + w, ...: straight-line code, no
// branch. Its loads are named by the column they read relative to hk_p
// (x5a64: input 5 at hk_p + 64) and issued once, before every segment's
// arithmetic and every store, so a column two segments read is loaded once
// and nothing waits on a store the compiler cannot prove unaliased. The
// tuner times folded points beside the others; the variant's own timing
// decides (Note [Chain tuning]).
void Emitter::foldedPointwiseBody() {
  const int64_t w = chainFoldWidth(ir_, ir_.width());
  HOTKERNEL_INTERNAL_ASSERT(w > 0, "fold without equal segments (checkChainKernel)");
  os_ << "  const long long hk_fvec = " << w << "LL / HK_VEC;\n  const long long hk_nvec = rows * hk_fvec;\n"
      << "  (void)cols;\n";
  vectorLoop([&] { foldedPointwiseVector(); });
}

// The folded kernel's statements for the vector position hk_v.
void Emitter::foldedPointwiseVector() {
  const int64_t w = chainFoldWidth(ir_, ir_.width());
  const int64_t segments = ir_.width() / w;
  vectorPosition("hk_fvec", "hk_p");
  std::vector<std::set<std::pair<int, int64_t>>> computed(static_cast<size_t>(segments));
  std::set<std::pair<int, int64_t>> loads;  // (input node, column relative to hk_p)
  for (int64_t k = 0; k < segments; ++k) {
    segLo_ = k * w;
    std::set<std::pair<int, int64_t>> inputs;
    collectAt(ir_.outputs(), computed[static_cast<size_t>(k)], inputs);
    for (const auto& [o, shift] : inputs) loads.insert({o, segLo_ - shift});
  }
  for (const auto& [o, at] : loads) {
    const Node& n = nodes_[static_cast<size_t>(o)];
    const std::string name = "x" + std::to_string(o) + "a" + std::to_string(at);
    const std::string base = n.shape == ShapeClass::Full ? "hk_o" + std::to_string(argOfInput(o)) + " + " : "";
    const std::string column = at != 0 ? "(hk_p + " + std::to_string(at) + ")" : "hk_p";
    const std::string call = std::string("hk_load_") + accessTag(n.dtype) + "(in" + std::to_string(o) + " + " + base;
    emitVectorLoad("    ", name, call + column);
  }
  for (int64_t k = 0; k < segments; ++k) {
    segLo_ = k * w;
    const std::string seg = std::to_string(k);
    for (size_t m = 0; m < ir_.outputs().size(); ++m) os_ << "    float o" << m << "f" << seg << "[HK_VEC];\n";
    os_ << "#pragma unroll\n    for (int j = 0; j < HK_VEC; ++j) {\n";
    for (const auto& [o, shift] : computed[static_cast<size_t>(k)]) {
      refShift_ = shift;
      os_ << "      const float v" << o << (shift != 0 ? "s" + std::to_string(shift) : "") << " = " << expr(o)
          << ";\n";
    }
    refShift_ = 0;
    for (size_t m = 0; m < ir_.outputs().size(); ++m) {
      os_ << "      o" << m << "f" << seg << "[j] = " << ref(ir_.outputs()[m]) << ";\n";
    }
    os_ << "    }\n";
  }
  segLo_ = 0;
  for (int64_t k = 0; k < segments; ++k) {
    const std::string seg = std::to_string(k);
    const std::string column = k != 0 ? "hk_p + " + std::to_string(k * w) : "hk_p";
    for (size_t m = 0; m < ir_.outputs().size(); ++m) {
      const Node& n = nodes_[static_cast<size_t>(ir_.outputs()[m])];
      const std::string tag = accessTag(n.dtype), id = std::to_string(m), value = "o" + id + "f" + seg;
      if (n.shape == ShapeClass::Full) {
        os_ << "    hk_store_" << tag << "(out" << id << " + hk_o" << argOfOutput(m) << " + " << column << ", "
            << value << ");\n";
      } else if (n.shape == ShapeClass::Column) {
        os_ << "    if (row == 0) hk_store_" << tag << "(out" << id << " + " << column << ", " << value << ");\n";
      } else if (k == 0) {
        os_ << "    if (hk_p == 0) hk_st_" << tag << "(out" << id << " + row, " << value << "[0]);\n";
      }
    }
  }
}

// The elementwise kernel of a chain with a layout or a Cat (Note [Chain
// kernel segments], Note [Chain layouts in the source]).
void Emitter::segmentedPointwiseBody() {
  const int64_t width = ir_.width();
  os_ << "  const long long hk_cvec = " << (width > 0 ? std::to_string(width) + "LL / HK_VEC" : "cols / HK_VEC")
      << ";\n  const long long hk_nvec = rows * hk_cvec;\n  (void)cols;\n";
  vectorLoop([&] { segmentedPointwiseVector(); });
}

// The segmented kernel's statements for the vector hk_v.
void Emitter::segmentedPointwiseVector() {
  vectorPosition("hk_cvec", "hk_c");
  for (size_t m = 0; m < ir_.outputs().size(); ++m) os_ << "    float o" << m << "[HK_VEC];\n";
  segments(ir_.outputs(), "    ", [&] {
    std::string text;
    for (size_t m = 0; m < ir_.outputs().size(); ++m) {
      text += "        o" + std::to_string(m) + "[j] = " + ref(ir_.outputs()[m]) + ";\n";
    }
    return text;
  });
  for (size_t m = 0; m < ir_.outputs().size(); ++m) {
    const Node& n = nodes_[static_cast<size_t>(ir_.outputs()[m])];
    const std::string tag = accessTag(n.dtype), id = std::to_string(m);
    if (n.shape == ShapeClass::Full) {
      os_ << "    hk_store_" << tag << "(out" << id << " + hk_o" << argOfOutput(m) << " + hk_c, o" << id << ");\n";
    } else if (n.shape == ShapeClass::Column) {
      os_ << "    if (row == 0) hk_store_" << tag << "(out" << id << " + hk_c, o" << id << ");\n";
    } else {
      os_ << "    if (hk_c == 0) hk_st_" << tag << "(out" << id << " + row, o" << id << "[0]);\n";
    }
  }
}

}  // namespace hotkernel::chain::detail
